"""The verdict of a whole `vgpu bench` job: PASS only if every workload PASSes, FAIL if
any FAILs, else INCONCLUSIVE naming the undecided workloads and what would decide each;
none (exit 5) when nothing could be judged. Its exit code is the one every judging
command shares (vgpu.exitcodes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vgpu.bench.outcome import BenchOutcome, WorkloadOutcome
from vgpu.exitcodes import EXIT_COULD_NOT_RUN, exit_for, overall_verdict
from vgpu.results.verdict.decided import decided_by


@dataclass(frozen=True)
class WorkloadVerdict:
    workload: str
    verdict: str | None  # None: nothing to judge it against
    why: str  # one sentence: what decided it, or what would


@dataclass(frozen=True)
class ScenarioVerdict:
    scenario: str
    verdict: str | None
    workloads: list[WorkloadVerdict]
    could_not_run: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_COULD_NOT_RUN if self.could_not_run else exit_for(self.verdict)

    def line(self) -> str:
        """The job's last line: its verdict and the workloads that made it so."""
        if self.could_not_run:
            return f"scenario {self.scenario}: could not run: {self.could_not_run}"
        if self.verdict is None:
            unjudged = "; ".join(f"{w.workload}: {w.why}" for w in self.workloads)
            return f"scenario {self.scenario}: no verdict, nothing to judge against ({unjudged})"
        if self.verdict == "PASS":
            said = "; ".join(f"{w.workload} PASS" for w in self.workloads)
        else:
            shown = "FAIL" if self.verdict == "FAIL" else None
            said = "; ".join(f"{w.workload} {w.verdict or 'not judged'} ({w.why})"
                             for w in self.workloads
                             if w.verdict == shown or (shown is None and w.verdict != "PASS"))
        return f"scenario {self.scenario}: {self.verdict}: {said}"

    def as_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "exit_code": self.exit_code,
                "could_not_run": self.could_not_run,
                "workloads": [{"workload": w.workload, "verdict": w.verdict, "why": w.why}
                              for w in self.workloads]}


def _workload_verdict(outcome: WorkloadOutcome) -> WorkloadVerdict:
    label = outcome.workload.label
    if outcome.comparison is None:
        why = outcome.failure or outcome.baseline_note or "nothing to judge against"
        return WorkloadVerdict(label, None, why)
    return WorkloadVerdict(label, outcome.comparison.verdict, decided_by(outcome.comparison))


def scenario_verdict(outcome: BenchOutcome) -> ScenarioVerdict:
    workloads = [_workload_verdict(w) for w in outcome.workloads]
    return ScenarioVerdict(f"{outcome.scenario.id}", overall_verdict(
        w.verdict for w in workloads), workloads, outcome.failure)
