"""Runs as CSV (one row per instance of each run, or per run when it has none) or JSON
(every run with its instances, metrics and platform). Each instance also carries its
telemetry summary (vgpu/results/views/telemetry_view.py): ``gpu_util_mean`` ... columns in the
CSV, ``telemetry_summary`` in the JSON."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from typing import Any

from vgpu.results.store.records import LATENCY_PERCENTILES, PLATFORM_COMPARED, Platform, Run
from vgpu.results.store.result_store import ResultStore
from vgpu.results.views import telemetry_view

CSV_COLUMNS = (
    "run_id", "series_id", "scenario_id", "scenario_name", "workload", "kind", "target_kind",
    "status", "reason", "repeat_index", "started_at", "ended_at", "sync_skew_s", "instance",
    "device", "mig_profile", "mig_uuid", "validity", "throughput",
    *(f"latency_{p}_ns" for p in LATENCY_PERCENTILES),
    *telemetry_view.CSV_COLUMNS,
    *(f"platform_{name}" for name in PLATFORM_COMPARED),
)


def _platform_columns(platform: Platform | None) -> dict[str, Any]:
    if platform is None:
        return {}
    return {f"platform_{name}": getattr(platform, name) for name in PLATFORM_COMPARED}


def run_as_dict(store: ResultStore, run: Run) -> dict[str, Any]:
    data = asdict(run)
    data["instances"] = [
        {**asdict(i.result), "telemetry_summary": telemetry_view.as_dict(
            telemetry_view.instance_telemetry(run.id, i.result))}
        for i in store.instances(run.id)
    ]
    data["metrics"] = [asdict(m) for m in store.metrics(run.id)]
    return data


def export_json(store: ResultStore, runs: list[Run]) -> str:
    return json.dumps([run_as_dict(store, run) for run in runs], indent=2, default=str)


def export_csv(store: ResultStore, runs: list[Run]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for run in runs:
        base = {
            "run_id": run.id, "series_id": run.series_id, "scenario_id": run.scenario_id,
            "scenario_name": run.scenario_name, "workload": run.workload, "kind": run.kind,
            "target_kind": run.target_kind, "status": run.status, "reason": run.reason or "",
            "repeat_index": run.repeat_index, "started_at": run.started_at,
            "ended_at": run.ended_at, "sync_skew_s": run.sync_skew_s,
        }
        instances = store.instances(run.id)
        if not instances:
            writer.writerow({**base, **_platform_columns(run.platform)})
        for stored in instances:
            inst = stored.result
            row = dict(base)
            row.update({
                "instance": inst.name,
                "device": inst.device_note or inst.device_name or inst.device_kind,
                "mig_profile": inst.mig_profile, "mig_uuid": inst.mig_uuid,
                "validity": inst.validity, "throughput": inst.throughput,
                **_platform_columns(inst.platform or run.platform),
                **telemetry_view.export_columns(
                    telemetry_view.instance_telemetry(run.id, inst)),
            })
            for p in LATENCY_PERCENTILES:
                row[f"latency_{p}_ns"] = inst.latency_ns.get(p)
            writer.writerow(row)
    return buffer.getvalue()
