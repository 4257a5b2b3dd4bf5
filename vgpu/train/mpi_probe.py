"""The MPI probe over a scenario's nodes (or ranks on this machine): OSU-style
point-to-point latency and bandwidth and allreduce / allgather / broadcast latency and bus
bandwidth by message size, through mpirun (see loadgen.train.mpi_probe).

Stored as one run of kind ``allreduce`` like the Gloo/NCCL probe, its allreduce under the
same metric names (busbw, algbw, time_us per size; busbw_peak, busbw_avg), so the runtimes
compare size by size (`vgpu train runtimes`) and series by series (`vgpu compare`)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.contract import OSU_SIZES, MpiProbeRunSpec
from vgpu.errors import RemoteError
from vgpu.model.scenario import Scenario, TrainingWorkload
from vgpu.results.store.records import Metric, RunStart, TargetKind
from vgpu.results.store.result_store import ResultStore
from vgpu.results.views.allreduce_view import PROBE_KIND, link_gb_s, size_label
from vgpu.train import preflight
from vgpu.train.launch import TrainNode
from vgpu.train.mpirun import MpiJob, run_mpi_job
from vgpu.train.network import describe_link, network_options, training_platform
from vgpu.train.probe import GB_S, ProbeRun

MPI_PROBE_WORKLOAD = "mpi-probe"
# Metric names per operation; allreduce keeps the Gloo/NCCL probe's names.
OP_METRICS: dict[str, tuple[str | None, str]] = {  # op -> (bandwidth metric, time metric)
    "latency": (None, "latency_us"),
    "bandwidth": ("p2p_bw", "p2p_time_us"),
    "allreduce": ("busbw", "time_us"),
    "allgather": ("allgather_busbw", "allgather_time_us"),
    "bcast": ("bcast_busbw", "bcast_time_us"),
}


@dataclass(frozen=True)
class MpiProbeSettings:
    sizes_bytes: tuple[int, ...] = OSU_SIZES
    iterations: int = 100
    large_iterations: int = 10
    local_ranks: int = 2  # ranks on this machine when the probe has no nodes
    ranks_per_node: int = 1  # across nodes: one rank each measures the link between them
    rsh_agent: str | None = None  # how mpirun reaches the other nodes (None: ssh)
    launcher: TrainNode | None = None  # where mpirun runs (None: the first node)
    interface: str | None = None  # MPI's TCP interface or CIDR (None: the scenario's)


def sizes_up_to(max_size: int) -> tuple[int, ...]:
    """OSU's sizes up to ``max_size`` bytes (the quick probe of the tests)."""
    return tuple(size for size in OSU_SIZES if size <= max_size)


def probe_job(scenario: Scenario | None, nodes: Sequence[TrainNode],
              settings: MpiProbeSettings, remote: bool) -> MpiJob:
    workload = None if scenario is None else next(
        (w for w in scenario.workloads if isinstance(w, TrainingWorkload)), None)
    interface = settings.interface
    if interface is None and remote and scenario is not None and workload is not None:
        interface = network_options(scenario.network, workload.network).interface
    spec = MpiProbeRunSpec(sizes_bytes=settings.sizes_bytes, iterations=settings.iterations,
                           large_iterations=settings.large_iterations,
                           instance_name=MPI_PROBE_WORKLOAD)
    return MpiJob(nodes=list(nodes),
                  ranks_per_node=settings.ranks_per_node if remote else settings.local_ranks,
                  command="mpiprobe", spec=spec.to_json(), threads_per_rank=1,
                  interface=interface, launcher=settings.launcher,
                  rsh_agent=settings.rsh_agent, timeout_s=1800.0)


def mpi_probe_metrics(record: Mapping[str, Any], link_speed_gbps: float | None) -> list[Metric]:
    """Per operation and size (the size as the instance); for the run, allreduce's peak
    and mean busbw (as the Gloo/NCCL probe stores them) and the peak's share of the link."""
    rows = record["rows"]
    metrics: list[Metric] = []
    reduce_busbw = [r["busbw_gb_s"] for r in rows
                    if r["op"] == "allreduce" and r["busbw_gb_s"] is not None]
    if reduce_busbw:
        metrics += [Metric("busbw_peak", max(reduce_busbw), GB_S),
                    Metric("busbw_avg", sum(reduce_busbw) / len(reduce_busbw), GB_S)]
        link = link_gb_s(link_speed_gbps)
        if link is not None:
            metrics.append(Metric("busbw_link_share", max(reduce_busbw) / link, "ratio"))
    for row in rows:
        label = size_label(row["size_bytes"])
        bandwidth, time_name = OP_METRICS[row["op"]]
        if bandwidth is not None and row["busbw_gb_s"] is not None:
            metrics.append(Metric(bandwidth, row["busbw_gb_s"], GB_S, instance=label))
        if row["op"] == "allreduce":
            metrics.append(Metric("algbw", row["algbw_gb_s"], GB_S, instance=label))
        metrics.append(Metric(time_name, row["time_us"], "us", instance=label))
    return metrics


def run_mpi_probe(
    scenario: Scenario, nodes: Sequence[TrainNode] | None, out_dir: Path, *,
    local_node: TrainNode | None = None, store: ResultStore | None = None,
    target_kind: TargetKind = "local", settings: MpiProbeSettings = MpiProbeSettings(),
    series_id: str | None = None,
) -> ProbeRun:
    """Runs the probe once over ``nodes`` (None: ranks on ``local_node``) and stores it as
    a run with the scenario's network in its platform record. Raises RemoteError."""
    remote = nodes is not None
    if remote:
        chosen = list(nodes or [])
        workload = next((w for w in scenario.workloads if isinstance(w, TrainingWorkload)),
                        None)
        wanted = workload.nodes if workload is not None else len(chosen)
        chosen = preflight.select_nodes(chosen, wanted, scenario.source or scenario.id,
                                        "workloads[0].nodes")
    elif local_node is None:
        raise ValueError("a probe without nodes needs the local node")
    else:
        chosen = [local_node]
    job = probe_job(scenario, chosen, settings, remote)
    record = run_mpi_job(job, out_dir).record
    if record.get("status") != "ok":
        raise RemoteError(f"MPI probe failed: {record.get('reason')}")
    platform = training_platform(scenario, job.nodes if remote else None)
    series = series_id or uuid.uuid4().hex[:12]
    run_id = None
    if store is not None:
        start = RunStart(
            series_id=series, scenario_id=scenario.id, scenario_name=scenario.name,
            workload=MPI_PROBE_WORKLOAD, target_kind=target_kind, kind=PROBE_KIND,
            scenario_file=scenario.source, platform=platform,
            workload_detail={
                "workload_name": MPI_PROBE_WORKLOAD, "backend": "mpi", "device": "cpu",
                "nodes": record["nodes"], "procs_per_node": job.ranks_per_node,
                "world_size": record["world_size"], "sizes_bytes": list(job.spec["sizes_bytes"]),
                "iterations": job.spec["iterations"], "mpi_library": record["mpi_library"],
            },
        )
        run_id = store.record_run(start, "ok", metrics=mpi_probe_metrics(
            record, platform.link_speed_gbps))
    link = describe_link(scenario.network) if remote else "none crossed (this machine)"
    return ProbeRun(record, link, run_id, series)
