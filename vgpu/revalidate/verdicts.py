"""One verdict per scenario and workload from its two comparisons (against bare metal and
against the pre-upgrade baseline), and the exit code of the whole revalidation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from vgpu.exitcodes import EXIT_COULD_NOT_RUN, EXIT_FAIL, exit_for, overall_verdict
from vgpu.results.verdict.compare import Check, Comparison, Verdict


@dataclass(frozen=True)
class WorkloadVerdict:
    scenario_id: str
    workload: str
    series_id: str | None
    vs_bare_metal: Comparison | None
    vs_baseline: Comparison | None
    accuracy: Check | None = None  # the accuracy gate, when the workload has a target
    notes: tuple[str, ...] = ()

    @property
    def comparisons(self) -> list[Comparison]:
        return [c for c in (self.vs_bare_metal, self.vs_baseline) if c is not None]

    @property
    def verdict(self) -> Verdict | None:
        """FAIL when either comparison or the accuracy gate fails, PASS when every one
        made passes, else INCONCLUSIVE; None when nothing could be judged."""
        verdicts = {c.verdict for c in self.comparisons}
        if self.accuracy is not None:
            verdicts.add(self.accuracy.verdict)
        if not verdicts:
            return None
        if "FAIL" in verdicts:
            return "FAIL"
        return "PASS" if verdicts == {"PASS"} else "INCONCLUSIVE"


    def gate(self, needs_baseline: bool) -> Verdict | None:
        """The verdict a gate reads: as ``verdict``, except that where the host's own
        baseline is required (--host) a workload not judged against it is not judged at
        all (None), unless it FAILed: bare metal alone cannot let an upgraded host back."""
        verdict = self.verdict
        if needs_baseline and self.vs_baseline is None and verdict != "FAIL":
            return None
        return verdict


def overall(verdicts: Sequence[WorkloadVerdict], needs_baseline: bool) -> Verdict | None:
    """The revalidation's one verdict (vgpu.exitcodes.overall_verdict of the gates)."""
    return cast("Verdict | None", overall_verdict(v.gate(needs_baseline) for v in verdicts))


def exit_code(verdicts: Sequence[WorkloadVerdict], could_not_run: Mapping[str, str],
              needs_baseline: bool = False) -> int:
    """3 when any workload FAILs (a finding outranks a gap), else 1 when a scenario could
    not run, else the overall verdict's code (vgpu.exitcodes): 0 PASS, 4 INCONCLUSIVE, 5
    when nothing was judged against a reference."""
    if any(v.gate(needs_baseline) == "FAIL" for v in verdicts):
        return EXIT_FAIL
    if could_not_run:
        return EXIT_COULD_NOT_RUN
    return exit_for(overall(verdicts, needs_baseline))
