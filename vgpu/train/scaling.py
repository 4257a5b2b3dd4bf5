"""Multinode scaling and VM-vs-bare-metal tables (pure: numbers in, numbers out).

Weak scaling (fixed per-GPU batch): speedup(N) = throughput(N) / throughput(1) and
efficiency(N) = throughput(N) / (N x throughput(1)); 1.0 is ideal. Throughputs are the
means over repeats; the VM-vs-bare-metal checks use the same statistics and verdicts as
inference (vgpu.results.verdict.compare)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from vgpu.results.stats.intervals import Summary, summarize
from vgpu.results.verdict.compare import DEFAULT_TOLERANCE, Check, band_for, compare_samples


@dataclass(frozen=True)
class ScalingRow:
    nodes: int
    throughput: Summary
    ideal: float
    speedup: float
    efficiency: float


@dataclass(frozen=True)
class PlatformRow:
    nodes: int
    check: Check

    @property
    def ratio(self) -> float:
        """VM throughput / bare-metal throughput (means)."""
        return self.check.ratio


def scaling_table(throughput_by_nodes: Mapping[int, Sequence[float]]) -> list[ScalingRow]:
    """Rows sorted by node count; the one-node series is the base."""
    if 1 not in throughput_by_nodes or not throughput_by_nodes[1]:
        raise ValueError("scaling needs a one-node result as its base")
    base = summarize(throughput_by_nodes[1]).mean
    if base <= 0:
        raise ValueError("the one-node throughput must be positive")
    rows: list[ScalingRow] = []
    for nodes in sorted(throughput_by_nodes):
        if nodes < 1:
            raise ValueError(f"node count must be >= 1, got {nodes}")
        summary = summarize(throughput_by_nodes[nodes])
        rows.append(ScalingRow(
            nodes=nodes,
            throughput=summary,
            ideal=nodes * base,
            speedup=summary.mean / base,
            efficiency=summary.mean / (nodes * base),
        ))
    return rows


def vm_vs_bare_metal(
    vm: Mapping[int, Sequence[float]],
    bare_metal: Mapping[int, Sequence[float]],
    tolerance: float = DEFAULT_TOLERANCE,
) -> list[PlatformRow]:
    """One throughput check per node count present on both sides."""
    band = band_for(higher_is_better=True, tolerance=tolerance)
    return [
        PlatformRow(
            nodes=nodes,
            check=compare_samples("throughput", vm[nodes], bare_metal[nodes], band, "images/s"),
        )
        for nodes in sorted(set(vm) & set(bare_metal))
    ]
