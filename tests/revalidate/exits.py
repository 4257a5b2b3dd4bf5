"""What a revalidation's exit code must be, given what it judged (vgpu.exitcodes)."""

from __future__ import annotations

from vgpu.exitcodes import EXIT_PASS, exit_for
from vgpu.revalidate.flow import RevalidateOutcome


def ran_as_judged(outcome: RevalidateOutcome) -> int:
    """The code a finished revalidation exits with: its overall verdict's (0 PASS, 3 FAIL,
    4 INCONCLUSIVE, 5 nothing judged), 0 for a capture that had nothing to judge."""
    if outcome.capture and outcome.verdict is None:
        return EXIT_PASS
    return exit_for(outcome.verdict)
