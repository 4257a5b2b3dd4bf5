"""Scaling report from stored runs: the weak-scaling table of a node-count series, the
VM-vs-bare-metal checks per node count, stored back as metrics on the runs they judge."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from vgpu.errors import InputError
from vgpu.results.store.records import Metric
from vgpu.results.store.result_store import ResultStore
from vgpu.results.verdict.compare import DEFAULT_TOLERANCE
from vgpu.results.views.allreduce_view import link_label
from vgpu.train.records import throughputs_by_nodes
from vgpu.train.scaling import PlatformRow, ScalingRow, scaling_table, vm_vs_bare_metal


@dataclass(frozen=True)
class ScalingReport:
    rows: list[ScalingRow]
    platform_rows: list[PlatformRow]
    run_ids: dict[int, list[int]]
    links: dict[int, str] = field(default_factory=dict)  # node count -> link of its runs
    bare_metal_links: dict[int, str] = field(default_factory=dict)


def links_by_nodes(store: ResultStore, run_ids: dict[int, list[int]]) -> dict[int, str]:
    """The link each node count's runs crossed, from their platform records. Multinode
    runs over different links are not one scaling series (100 GbE vs 25 GbE is a
    comparison of its own)."""
    links: dict[int, str] = {}
    for nodes, ids in run_ids.items():
        labels = set()
        for run_id in ids:
            run = store.run(run_id)
            platform = run.platform if run is not None else None
            labels.add(link_label(platform.link_speed_gbps, platform.rdma)
                       if platform is not None else "-")
        links[nodes] = ", ".join(sorted(labels))
    multinode = {label for nodes, label in links.items() if nodes > 1}
    if len(multinode) > 1:
        raise InputError.single(
            "results store", "--scenario",
            f"the multinode runs crossed different links ({'; '.join(sorted(multinode))})",
            fix="give scenarios of one network; compare link speeds with `vgpu compare`")
    return links


def build_scaling_report(
    store: ResultStore,
    scenario_ids: Sequence[str],
    bare_metal_ids: Sequence[str] = (),
    tolerance: float = DEFAULT_TOLERANCE,
) -> ScalingReport:
    throughputs, run_ids = throughputs_by_nodes(store, scenario_ids)
    platform_rows: list[PlatformRow] = []
    bare_links: dict[int, str] = {}
    if bare_metal_ids:
        bare, bare_ids = throughputs_by_nodes(store, bare_metal_ids)
        platform_rows = vm_vs_bare_metal(throughputs, bare, tolerance)
        bare_links = links_by_nodes(store, bare_ids)
    return ScalingReport(scaling_table(throughputs), platform_rows, run_ids,
                         links_by_nodes(store, run_ids), bare_links)


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
    """Study B's weak-scaling table, the link beside every row (a one-node run crosses
    none), and VM vs bare metal per node count."""
    lines = [
        "nodes  images/s (mean)   ideal        speedup  efficiency  link",
        *(
            f"{r.nodes:>5}  {r.throughput.mean:>15.2f}  {r.ideal:>11.2f}  "
            f"{r.speedup:>6.2f}x  {r.efficiency * 100:>9.1f}%  "
            f"{_link_cell(report.links, r.nodes)}"
            for r in report.rows
        ),
    ]
    if report.platform_rows:
        lines.append("")
        lines.append("nodes  VM/bare metal  verdict       link (VM / bare metal)  reason")
        lines.extend(
            f"{p.nodes:>5}  {p.ratio:>13.4f}  {p.check.verdict:<12}  "
            f"{_link_cell(report.links, p.nodes)} / "
            f"{_link_cell(report.bare_metal_links, p.nodes)}  {p.check.reason}"
            for p in report.platform_rows
        )
    return "\n".join(lines)


def _link_cell(links: dict[int, str], nodes: int) -> str:
    label = links.get(nodes, "-")
    return f"{label} (not crossed)" if nodes == 1 and label != "-" else label
