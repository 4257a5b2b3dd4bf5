"""Training result records (the harness's result.json) -> the results store, and the
stored runs of a node-count series -> throughputs for the scaling table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vgpu.errors import InputError
from vgpu.results.store.records import InstanceResult, Metric, RunStart
from vgpu.results.store.result_store import ResultStore

THROUGHPUT = "throughput"
IMAGES_PER_S = "images/s"
# Workload fields that may differ between the runs of one scaling series.
SCALING_FREE_FIELDS = frozenset({"nodes", "world_size", "workload_name"})


def record_metrics(record: Mapping[str, Any]) -> list[Metric]:
    totals = record["totals"]
    metrics = [
        Metric(THROUGHPUT, totals["images_per_s"], IMAGES_PER_S),
        Metric("wallclock_throughput", totals["wallclock_images_per_s"], IMAGES_PER_S),
        Metric("world_size", record["world_size"]),
        Metric("hosts", record["settings"]["nodes"]),
        Metric("step_time_p50", totals["step_time_s"]["p50"], "s"),
        Metric("step_time_p99", totals["step_time_s"]["p99"], "s"),
        Metric("params_in_sync", 1.0 if totals["params_in_sync"] else 0.0),
    ]
    communication = record.get("communication", {})
    if communication.get("measured"):
        metrics.append(Metric("comm_share", communication["share_mean"]))
    metrics += input_metrics(record.get("input"))
    for rank in record["ranks"]:
        metrics.append(
            Metric(THROUGHPUT, rank["images_per_s"], IMAGES_PER_S, instance=f"rank{rank['rank']}")
        )
    return metrics


INPUT_METRICS = (("input_mb_per_s", "MB/s"), ("read_share", ""), ("decode_share", ""),
                 ("data_wait_share", ""), ("worker_cpu_utilisation", ""),
                 ("gpu_utilisation_pct", "%"))


def input_metrics(fed: Mapping[str, Any] | None) -> list[Metric]:
    """A file-fed run's input figures; a GPU utilisation that was not measured is left
    out, not stored as 0."""
    if not fed:
        return []
    return [Metric(name, float(fed[name]), unit) for name, unit in INPUT_METRICS
            if fed.get(name) is not None]


def record_instances(record: Mapping[str, Any], log_dir: str | None) -> list[InstanceResult]:
    device = record.get("device", {})
    return [
        InstanceResult(
            name=f"rank{rank['rank']}",
            status=record["status"],
            device_kind=device.get("kind"),
            device_name=device.get("name"),
            device_note=device.get("note"),
            throughput=rank["images_per_s"],
            timed_start_unix=rank["timed_start_unix"],
            timed_end_unix=rank["timed_end_unix"],
            log_dir=log_dir,
            result={**rank, **({"job_input": record["input"]} if "input" in record else {})},
        )
        for rank in record.get("ranks", [])
    ]


def store_training_record(
    store: ResultStore, start: RunStart, record: Mapping[str, Any], log_dir: str | None
) -> int:
    if record["status"] != "ok":
        return store.record_run(start, "failed", reason=str(record.get("reason") or "failed"))
    starts = [r["timed_start_unix"] for r in record["ranks"]]
    return store.record_run(
        start, "ok",
        instances=record_instances(record, log_dir),
        metrics=record_metrics(record),
        sync_skew_s=max(starts) - min(starts),
    )


def _comparable(detail: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in detail.items() if k not in SCALING_FREE_FIELDS}


def throughputs_by_nodes(
    store: ResultStore, scenario_ids: Sequence[str], target_kind: str | None = None
) -> tuple[dict[int, list[float]], dict[int, list[int]]]:
    """Total images/s of every ok training run in each scenario's latest series, keyed by
    node count, plus the run ids. The scenarios must differ only in node count."""
    by_nodes: dict[int, list[float]] = {}
    run_ids: dict[int, list[int]] = {}
    reference: tuple[str, dict[str, Any]] | None = None
    for scenario_id in scenario_ids:
        runs = [r for r in store.runs(scenario_id=scenario_id, kind="training", status="ok")
                if target_kind is None or r.target_kind == target_kind]
        if not runs:
            raise InputError.single(
                "results store", f"scenario {scenario_id}", "has no successful training run",
                fix=f"run `vgpu train run --scenario {scenario_id}` first",
            )
        series = runs[-1].series_id
        for run in (r for r in runs if r.series_id == series):
            comparable = _comparable(run.workload_detail)
            if reference is None:
                reference = (scenario_id, comparable)
            elif comparable != reference[1]:
                changed = sorted(
                    k for k in set(comparable) | set(reference[1])
                    if comparable.get(k) != reference[1].get(k)
                )
                raise InputError.single(
                    "results store", f"scenario {scenario_id}",
                    f"differs from {reference[0]} in {changed}, not only in node count",
                    fix="compare scenarios that differ only in 'nodes'",
                )
            nodes = int(run.workload_detail["nodes"])
            total = next(m.value for m in store.metrics(run.id)
                         if m.name == THROUGHPUT and m.instance is None)
            by_nodes.setdefault(nodes, []).append(total)
            run_ids.setdefault(nodes, []).append(run.id)
    return by_nodes, run_ids
