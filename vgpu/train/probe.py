"""Allreduce bandwidth probe across a scenario's nodes, as nccl-tests reports it: for each
message size the slowest rank's time, algbw = bytes / time and busbw = algbw * 2(n-1)/n.

NCCL on GPUs, Gloo on CPUs. Each probe is stored as one run (kind ``allreduce``) with the
platform record of the scenario's network, so probes at two link speeds compare like any
two stored series (`vgpu compare`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from loadgen.contract import AllreduceRunSpec
from vgpu.errors import RemoteError
from vgpu.model.scenario import Scenario, TrainingWorkload
from vgpu.results.store.records import Metric, RunStart, TargetKind
from vgpu.results.store.result_store import ResultStore
from vgpu.results.views.allreduce_view import MIB, PROBE_KIND, size_label
from vgpu.train import preflight
from vgpu.train.launch import Launch, TrainNode, run_launch
from vgpu.train.netenv import comm_environment
from vgpu.train.network import describe_link, network_options, training_platform

# nccl-tests style sweep: 1 MiB .. 64 MiB, doubling twice per step.
PROBE_SIZES = (MIB, 4 * MIB, 16 * MIB, 64 * MIB)
PROBE_WORKLOAD = "allreduce-probe"
GB_S = "GB/s"


@dataclass(frozen=True)
class ProbeSettings:
    sizes_bytes: tuple[int, ...] = PROBE_SIZES
    iterations: int = 20
    warmup_iterations: int = 5
    local_ranks: int = 2  # ranks on this machine when the scenario gives no nodes


@dataclass(frozen=True)
class ProbeRun:
    record: dict[str, Any]
    link: str
    run_id: int | None
    series_id: str


def _training_workload(scenario: Scenario) -> TrainingWorkload | None:
    return next((w for w in scenario.workloads if isinstance(w, TrainingWorkload)), None)


def probe_launch(
    scenario: Scenario, nodes: Sequence[TrainNode], remote: bool, settings: ProbeSettings,
) -> Launch:
    """The probe over the scenario's nodes (as many as its first training workload uses,
    with its GPUs per node), or ``settings.local_ranks`` ranks on the one local node."""
    workload = _training_workload(scenario)
    source = scenario.source or f"scenario {scenario.id}"
    procs = settings.local_ranks
    if remote:
        wanted = workload.nodes if workload is not None else len(nodes)
        nodes = preflight.select_nodes(nodes, wanted, source, "workloads[0].nodes")
        procs = workload.gpus_per_node if workload is not None else 1
    on_gpu = all(node.gpus >= procs for node in nodes)
    if remote and not on_gpu:
        procs = 1  # one Gloo rank per node: the probe measures the link between nodes
    backend = "nccl" if on_gpu else "gloo"
    spec = AllreduceRunSpec(
        sizes_bytes=settings.sizes_bytes, iterations=settings.iterations,
        warmup_iterations=settings.warmup_iterations, backend=backend,
        device="gpu" if on_gpu else "cpu", instance_name=PROBE_WORKLOAD,
    )
    comm_env: dict[str, str] = {}
    master_port = 29500
    if workload is not None:
        master_port = workload.network.master_port
        if remote:
            options = network_options(scenario.network, workload.network)
            comm_env = comm_environment(options, backend)
    return Launch(nodes=list(nodes), procs_per_node=procs, command="allreduce",
                  spec=spec.to_json(), master_port=master_port, comm_env=comm_env)


def probe_metrics(record: Mapping[str, Any]) -> list[Metric]:
    """Per size (as the metric's instance) algbw, busbw and time; for the run, the peak
    busbw and the mean over sizes (nccl-tests' "Avg bus bandwidth")."""
    rows = record["rows"]
    # One rank crosses no link: its record has no bus bandwidth (busbw null), only algbw.
    linked = all(r["busbw_gb_s"] is not None for r in rows)
    metrics = [Metric("algbw_peak", max(r["algbw_gb_s"] for r in rows), GB_S)]
    if linked:
        metrics[:0] = [
            Metric("busbw_peak", max(r["busbw_gb_s"] for r in rows), GB_S),
            Metric("busbw_avg", sum(r["busbw_gb_s"] for r in rows) / len(rows), GB_S),
        ]
    for row in rows:
        label = size_label(row["size_bytes"])
        if linked:
            metrics.append(Metric("busbw", row["busbw_gb_s"], GB_S, instance=label))
        metrics += [
            Metric("algbw", row["algbw_gb_s"], GB_S, instance=label),
            Metric("time_us", row["time_us"], "us", instance=label),
        ]
    return metrics


def _detail(launch: Launch, record: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "workload_name": PROBE_WORKLOAD, "nodes": len(launch.nodes),
        "procs_per_node": launch.procs_per_node, "world_size": record.get("world_size"),
        "backend": launch.spec["backend"], "device": launch.spec["device"],
        "sizes_bytes": list(launch.spec["sizes_bytes"]),
        "iterations": launch.spec["iterations"],
    }


def run_probe(
    scenario: Scenario,
    nodes: Sequence[TrainNode] | None,
    out_dir: Path,
    *,
    local_node: TrainNode | None = None,
    store: ResultStore | None = None,
    target_kind: TargetKind = "local",
    settings: ProbeSettings = ProbeSettings(),
    series_id: str | None = None,
    check_nodes: bool = True,
) -> ProbeRun:
    """Runs the probe once over ``nodes`` (None: ``local_node``) and stores it as a run
    with the scenario's network in its platform record. Raises RemoteError on failure."""
    remote = nodes is not None
    chosen = list(nodes) if nodes is not None else [_required(local_node)]
    launch = probe_launch(scenario, chosen, remote, settings)
    if check_nodes:  # a repeat on the same nodes need not prove torch there again
        preflight.check_nodes_ready(launch, scenario.source or f"scenario {scenario.id}")
    record = run_launch(launch, out_dir).record
    if record.get("status") != "ok":
        raise RemoteError(f"allreduce probe failed: {record.get('reason')}")
    series = series_id or uuid.uuid4().hex[:12]
    run_id = None
    if store is not None:
        start = RunStart(
            series_id=series, scenario_id=scenario.id, scenario_name=scenario.name,
            workload=PROBE_WORKLOAD, target_kind=target_kind, kind=PROBE_KIND,
            scenario_file=scenario.source, workload_detail=_detail(launch, record),
            platform=training_platform(scenario, launch.nodes if remote else None),
        )
        run_id = store.record_run(start, "ok", metrics=probe_metrics(record))
    link = describe_link(scenario.network) if remote else "none crossed (this machine)"
    return ProbeRun(record, link, run_id, series)


def _required(node: TrainNode | None) -> TrainNode:
    if node is None:
        raise ValueError("a probe without nodes needs the local node")
    return node


def with_sizes(settings: ProbeSettings, sizes: Sequence[int] | None) -> ProbeSettings:
    return replace(settings, sizes_bytes=tuple(sizes)) if sizes else settings
