"""What `vgpu bench` gives back (one outcome per workload, one per scenario) and the
listener it reports its progress to."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from vgpu.bench.fanout import RoundListener
from vgpu.bench.workload import EffectiveWorkload
from vgpu.model.scenario import Scenario
from vgpu.results.store.records import SeriesReference
from vgpu.results.store.series import SeriesData
from vgpu.results.verdict.compare import Comparison
from vgpu.results.views.server_split import Split
from vgpu.targets.target import Target


class BenchListener(RoundListener, Protocol):
    def phase(self, text: str) -> None: ...

    def begin_round(self, instances: Sequence[str], expected_s: float) -> None: ...

    def end_round(self) -> None: ...


class QuietListener:
    def phase(self, text: str) -> None:
        return None

    def begin_round(self, instances: Sequence[str], expected_s: float) -> None:
        return None

    def end_round(self) -> None:
        return None

    def state(self, instance: str, text: str) -> None:
        return None

    def tick(self, elapsed_s: float) -> None:
        return None


@dataclass
class WorkloadOutcome:
    workload: EffectiveWorkload
    series_id: str
    run_ids: list[int] = field(default_factory=list)
    failure: str | None = None
    series: SeriesData | None = None
    comparison: Comparison | None = None  # its verdict, made once the command's series ran
    baseline_note: str | None = None  # which reference, or why none (set with reference)
    reference: SeriesReference | None = None  # as chosen (vgpu.bench.judging.reference_for)
    reference_chosen: bool = False
    calibrated_qps: dict[str, float] = field(default_factory=dict)
    # a capacity search's start per instance (vgpu.bench.capacity_plan.warm_starts)
    capacity_start: dict[str, float] = field(default_factory=dict)
    server_split: Split = field(default_factory=dict)  # Triton: instance -> part -> us
    # interleaved with another series block by block: {"partner", "order", "role"}
    design: dict[str, str] | None = None


@dataclass
class BenchOutcome:
    scenario: Scenario
    targets: list[Target]
    notes: list[str]
    workloads: list[WorkloadOutcome] = field(default_factory=list)

    @property
    def failure(self) -> str | None:
        return next((w.failure for w in self.workloads if w.failure), None)

    @property
    def comparisons(self) -> list[Comparison]:
        return [w.comparison for w in self.workloads if w.comparison is not None]
