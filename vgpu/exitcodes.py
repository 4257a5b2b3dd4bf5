"""The exit codes every judging command shares (`vgpu bench`, `vgpu compare`, `vgpu
revalidate`, `vgpu campaign`), so that a gate reads them alike:

    0  PASS           every judged workload passed
    1  could not run  an error stopped the command (vCenter, SSH, a harness)
    2  bad input      nothing was changed
    3  FAIL           at least one workload failed (a finding outranks everything else)
    4  INCONCLUSIVE   nothing failed, something is undecided: not a pass
    5  no reference   nothing could be judged: no baseline of this host, no bare metal

A gate that moves on only on 0 never lets an undecided or unjudged host through."""

from __future__ import annotations

from collections.abc import Iterable

EXIT_PASS = 0
EXIT_COULD_NOT_RUN = 1
EXIT_BAD_INPUT = 2
EXIT_FAIL = 3
EXIT_INCONCLUSIVE = 4
EXIT_NO_REFERENCE = 5

VERDICT_EXITS = {"PASS": EXIT_PASS, "FAIL": EXIT_FAIL, "INCONCLUSIVE": EXIT_INCONCLUSIVE}

HELP = ("Exit 0 PASS, 3 FAIL, 4 INCONCLUSIVE, 5 nothing to judge against, 1 could not run, "
        "2 bad input.")


def overall_verdict(verdicts: Iterable[str | None]) -> str | None:
    """One verdict of several: FAIL if any FAILs, PASS only if every one PASSes (an entry
    left unjudged, None, is no PASS), else INCONCLUSIVE; None when nothing was judged
    (every entry None, or none at all)."""
    given = list(verdicts)
    if all(v is None for v in given):
        return None
    if "FAIL" in given:
        return "FAIL"
    return "PASS" if all(v == "PASS" for v in given) else "INCONCLUSIVE"


def exit_for(verdict: str | None) -> int:
    """The exit code of one overall verdict (None: nothing judged)."""
    return EXIT_NO_REFERENCE if verdict is None else VERDICT_EXITS[verdict]
