"""One verdict per scenario and workload from its two comparisons (against bare metal and
against the pre-upgrade baseline), and the exit code of the whole revalidation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vgpu.results.compare import Check, Comparison, Verdict

EXIT_PASS = 0
EXIT_COULD_NOT_RUN = 1
EXIT_FAIL = 3


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


def exit_code(verdicts: Sequence[WorkloadVerdict], could_not_run: Mapping[str, str]) -> int:
    """3 when any workload FAILs (a finding outranks a gap), else 1 when a scenario could
    not run, else 0 (PASS, or INCONCLUSIVE where the noise allows no decision)."""
    if any(v.verdict == "FAIL" for v in verdicts):
        return EXIT_FAIL
    if could_not_run:
        return EXIT_COULD_NOT_RUN
    return EXIT_PASS
