"""Scaling report from stored runs: the weak-scaling table of a node-count series, the
VM-vs-bare-metal checks per node count, stored back as metrics on the runs they judge."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vgpu.results.compare import DEFAULT_TOLERANCE
from vgpu.results.records import Metric
from vgpu.results.store import ResultStore
from vgpu.train.records import throughputs_by_nodes
from vgpu.train.scaling import PlatformRow, ScalingRow, scaling_table, vm_vs_bare_metal


@dataclass(frozen=True)
class ScalingReport:
    rows: list[ScalingRow]
    platform_rows: list[PlatformRow]
    run_ids: dict[int, list[int]]


def build_scaling_report(
    store: ResultStore,
    scenario_ids: Sequence[str],
    bare_metal_ids: Sequence[str] = (),
    tolerance: float = DEFAULT_TOLERANCE,
) -> ScalingReport:
    throughputs, run_ids = throughputs_by_nodes(store, scenario_ids)
    platform_rows: list[PlatformRow] = []
    if bare_metal_ids:
        bare, _ = throughputs_by_nodes(store, bare_metal_ids)
        platform_rows = vm_vs_bare_metal(throughputs, bare, tolerance)
    return ScalingReport(scaling_table(throughputs), platform_rows, run_ids)


def store_scaling_report(store: ResultStore, report: ScalingReport) -> None:
    """Adds speedup and efficiency (and the bare-metal ratio) to every run they describe."""
    ratios = {row.nodes: row.ratio for row in report.platform_rows}
    for row in report.rows:
        metrics = [
            Metric("speedup", row.speedup, "x"),
            Metric("scaling_efficiency", row.efficiency),
            Metric("ideal_throughput", row.ideal, "images/s"),
        ]
        if row.nodes in ratios:
            metrics.append(Metric("vm_vs_bare_metal", ratios[row.nodes]))
        for run_id in report.run_ids[row.nodes]:
            store.add_metrics(run_id, metrics)


def render_scaling_report(report: ScalingReport) -> str:
    lines = [
        "nodes  images/s (mean)   ideal        speedup  efficiency",
        *(
            f"{r.nodes:>5}  {r.throughput.mean:>15.2f}  {r.ideal:>11.2f}  "
            f"{r.speedup:>6.2f}x  {r.efficiency * 100:>9.1f}%"
            for r in report.rows
        ),
    ]
    if report.platform_rows:
        lines.append("")
        lines.append("nodes  VM/bare metal  verdict       reason")
        lines.extend(
            f"{p.nodes:>5}  {p.ratio:>13.4f}  {p.check.verdict:<12}  {p.check.reason}"
            for p in report.platform_rows
        )
    return "\n".join(lines)
