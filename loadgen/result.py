"""The result record: checked against its schema, then written atomically (temp + rename)
so a reader never sees half a file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from loadgen import SCHEMA_VERSION

RESULT_FILE = "result.json"
STATUSES = ("ok", "failed")
VALIDITIES = ("VALID", "INVALID")
ACCURACY_KEYS = ("metric", "value", "target", "samples", "passed", "labels_from")
LATENCY_KEYS = ("min", "max", "mean", "p50", "p90", "p95", "p97", "p99", "p99.9")

# field -> accepted types (None means the field may be null)
REQUIRED_FIELDS: dict[str, tuple[type | None, ...]] = {
    "schema_version": (int,),
    "harness_version": (str,),
    "status": (str,),
    "reason": (str, None),
    "instance_name": (str,),
    "host": (str,),
    "spec": (dict,),
    "spec_source": (str,),
    "model": (dict, None),
    "loadgen_version": (str, None),
    "scenario": (str, None),
    "mode": (str, None),
    "settings": (dict, None),
    "throughput": (dict, None),
    "latency_ns": (dict, None),
    "validity": (dict, None),
    "early_stopping": (dict, None),
    "accuracy": (dict, None),
    "device": (dict,),
    "backend": (dict, None),
    "telemetry": (dict, None),
    "sync": (dict,),
    "timed_start_unix": (float, None),
    "timed_end_unix": (float, None),
    "logs": (dict,),
}


def _type_ok(value: Any, accepted: tuple[type | None, ...]) -> bool:
    if value is None:
        return None in accepted
    if isinstance(value, bool):
        return bool in accepted
    if isinstance(value, int) and float in accepted:
        return True
    return any(t is not None and isinstance(value, t) for t in accepted)


def schema_problems(record: dict[str, Any]) -> list[str]:
    """Everything wrong with a record; an empty list means it is valid."""
    problems = []
    for name, accepted in REQUIRED_FIELDS.items():
        if name not in record:
            problems.append(f"{name}: missing")
        elif not _type_ok(record[name], accepted):
            problems.append(f"{name}: {type(record[name]).__name__} is not one of "
                            f"{[t.__name__ if t else 'null' for t in accepted]}")
    if record.get("schema_version") != SCHEMA_VERSION:
        problems.append(f"schema_version: must be {SCHEMA_VERSION}")
    status = record.get("status")
    if status not in STATUSES:
        problems.append(f"status: {status!r} is not one of {STATUSES}")
    if status == "failed" and not record.get("reason"):
        problems.append("reason: a failed record must say why")
    validity = record.get("validity")
    if isinstance(validity, dict) and validity.get("result") not in VALIDITIES:
        problems.append(f"validity.result: {validity.get('result')!r} is not one of {VALIDITIES}")
    latency = record.get("latency_ns")
    if isinstance(latency, dict):
        problems += [f"latency_ns.{k}: missing" for k in LATENCY_KEYS if k not in latency]
    accuracy = record.get("accuracy")
    if isinstance(accuracy, dict):
        problems += [f"accuracy.{k}: missing" for k in ACCURACY_KEYS if k not in accuracy]
    if status == "ok" and record.get("mode") == "PerformanceOnly":
        for name in ("throughput", "latency_ns", "validity"):
            if not record.get(name):
                problems.append(f"{name}: an ok performance record needs it")
    return problems


def write_result(out_dir: Path, record: dict[str, Any]) -> Path:
    problems = schema_problems(record)
    if problems:
        raise ValueError("result record does not match schema_version 1: " + "; ".join(problems))
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / RESULT_FILE
    fd, tmp = tempfile.mkstemp(prefix=".result-", suffix=".json", dir=out_dir)
    # mkstemp makes the file 0600: give it the mode any other file there gets, so the
    # orchestrator's login can read what a harness container (another user) wrote.
    umask = os.umask(0)
    os.umask(umask)
    os.fchmod(fd, 0o666 & ~umask)
    with os.fdopen(fd, "w") as handle:
        json.dump(record, handle, indent=2, sort_keys=True, default=str)
        handle.write("\n")
    os.replace(tmp, target)
    return target
