"""result.json for training and allreduce runs: built on rank 0 from every rank's
measurements, checked for its required fields, written atomically."""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from loadgen.train.inputstats import job_input
from loadgen.train.nodestats import cache_verdict
from loadgen.train.stats import exposed_comm_share, slowest_rank_per_step, summarize_seconds

SCHEMA_VERSION = 1
HARNESS_VERSION = "0.1.0"
RESULT_FILE = "result.json"
REQUIRED_FIELDS = ("schema_version", "kind", "status", "reason", "spec", "host", "harness_version")


def rank_summary(timings: Mapping[str, Any]) -> dict[str, Any]:
    steps: list[float] = list(timings["step_times_s"])
    images = timings["batch_size"] * len(steps)
    summary: dict[str, Any] = {
        "rank": timings["rank"],
        "local_rank": timings["local_rank"],
        "node_rank": timings["node_rank"],
        "host": timings["host"],
        "device": timings["device"],
        "images_per_s": images / sum(steps),
        "step_time_s": summarize_seconds(steps),
        "param_digest": timings["param_digest"],
        "timed_start_unix": timings["timed_start_unix"],
        "timed_end_unix": timings["timed_end_unix"],
    }
    if timings.get("input"):
        summary["input"] = timings["input"]
    if timings["synced_fb_s"]:
        summary["comm_share"] = exposed_comm_share(timings["synced_fb_s"], timings["unsynced_fb_s"])
    return summary


def training_totals(per_rank: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Totals sum what each rank measured, never rank 0 times the world size."""
    summaries = [rank_summary(t) for t in per_rank]
    job_steps = slowest_rank_per_step([t["step_times_s"] for t in per_rank])
    images = sum(t["batch_size"] * len(t["step_times_s"]) for t in per_rank)
    window = max(t["timed_end_unix"] for t in per_rank) - min(
        t["timed_start_unix"] for t in per_rank
    )
    totals: dict[str, Any] = {
        "images_per_s": sum(s["images_per_s"] for s in summaries),
        "wallclock_images_per_s": images / window if window > 0 else 0.0,
        "global_batch": sum(t["batch_size"] for t in per_rank),
        "step_time_s": summarize_seconds(job_steps),
        "params_in_sync": len({t["param_digest"] for t in per_rank}) == 1,
    }
    shares = [s["comm_share"] for s in summaries if "comm_share" in s]
    communication: dict[str, Any] = {
        "method": "no_sync",
        "measured": bool(shares),
        "description": "1 - median(forward+backward without allreduce) / "
        "median(forward+backward with allreduce), per rank",
    }
    if shares:
        communication["share_mean"] = sum(shares) / len(shares)
        communication["share_max"] = max(shares)
    record = {"ranks": summaries, "totals": totals, "communication": communication}
    fed = [t["input"] for t in per_rank if t.get("input")]
    if fed:
        record["input"] = input_summary(fed, str(per_rank[0]["device"]))
    return record


def input_summary(fed: Sequence[Mapping[str, Any]], device: str) -> dict[str, Any]:
    """The job's input: what every rank read, the shares that name the bound, the page
    cache and the GPU's utilisation (null where no GPU was sampled)."""
    first = fed[0]
    gpu = [r["gpu_utilisation_pct"] for r in fed if r["gpu_utilisation_pct"] is not None]
    before = next((r["page_cache_before_run"] for r in fed if r["page_cache_before_run"]), "")
    consumed = sum(int(r["bytes_consumed_in_run"]) for r in fed)
    job = job_input(fed, "gpu" if device.startswith("cuda") else "cpu")
    return {
        "source": "files",
        "path": first["path"],
        "dataset_bytes": first["dataset_bytes"],
        "mean_image_bytes": first["mean_image_bytes"],
        **job,
        "page_cache_before_run": before,
        "page_cache": cache_verdict(before, int(first["dataset_bytes"]), consumed,
                                    first["memory_bytes"], job["shared_shards"]),
        "gpu_utilisation_pct": sum(gpu) / len(gpu) if gpu else None,
        "gpu_utilisation_note": "" if gpu else first["gpu_utilisation_note"],
    }


def base_record(kind: str, spec: Mapping[str, Any], status: str, reason: str) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": kind,
        "status": status,
        "reason": reason,
        "spec": dict(spec),
        "host": socket.gethostname(),
        "harness_version": HARNESS_VERSION,
        "written_unix": time.time(),
    }


def validate_record(record: Mapping[str, Any]) -> None:
    missing = [name for name in REQUIRED_FIELDS if name not in record]
    if missing:
        raise ValueError(f"result record lacks {missing}")
    if record["status"] not in ("ok", "failed"):
        raise ValueError(f"result status {record['status']!r} is not ok|failed")
    if record["status"] == "ok" and record["kind"] == "train":
        for name in ("ranks", "totals", "world_size", "backend", "settings"):
            if name not in record:
                raise ValueError(f"ok training record lacks {name!r}")
        if len(record["ranks"]) != record["world_size"]:
            raise ValueError("training record must hold one entry per rank")


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def write_record(out_dir: Path, record: Mapping[str, Any]) -> Path:
    validate_record(record)
    path = out_dir / RESULT_FILE
    write_json_atomic(path, record)
    return path


def rank_failure_path(out_dir: Path, rank: int) -> Path:
    return out_dir / f"rank{rank}.failed.json"
