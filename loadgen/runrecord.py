"""What every harness run shares, whatever its workload: the run record collected as the
run goes (``RunRecord``), LoadGen's settings from the spec and its log settings, the log
file names and the completion timeline."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import mlperf_loadgen as lg

from loadgen import HARNESS_VERSION, SCHEMA_VERSION
from loadgen.device import CPU_NOTE, DeviceBinding
from loadgen.errors import HarnessError
from loadgen.gate import ACCURACY_LOG
from loadgen.mllog import summarize
from loadgen.rules import rules_record
from loadgen.spec import LoadgenSpec, Spec
from loadgen.versions import version_info

SUMMARY_LOG = "mlperf_log_summary.txt"
DETAIL_LOG = "mlperf_log_detail.txt"
LOG_FILES = (SUMMARY_LOG, DETAIL_LOG, ACCURACY_LOG)
MS_TO_NS = 1_000_000
TIMELINE_POINTS = 2000


def loadgen_settings(spec: LoadgenSpec, performance_count: int) -> Any:
    """LoadGen TestSettings from the spec; the scenario decides what each target means."""
    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, spec.scenario)
    settings.mode = getattr(lg.TestMode, spec.mode)
    settings.min_duration_ms = spec.min_duration_ms
    if spec.max_duration_ms is not None:
        settings.max_duration_ms = spec.max_duration_ms
    settings.min_query_count = spec.min_query_count
    settings.performance_sample_count_override = performance_count
    if spec.target_qps is not None:
        settings.offline_expected_qps = spec.target_qps
        settings.server_target_qps = spec.target_qps
    if spec.target_latency_ms is not None:
        latency_ns = round(spec.target_latency_ms * MS_TO_NS)
        settings.server_target_latency_ns = latency_ns
        settings.single_stream_expected_latency_ns = latency_ns
        settings.multi_stream_expected_latency_ns = latency_ns
    if spec.samples_per_query is not None:
        settings.multi_stream_samples_per_query = spec.samples_per_query
    return settings


def log_settings(out_dir: Path) -> Any:
    """LoadGen writes its logs into ``out_dir`` and copies none to stdout."""
    output = lg.LogOutputSettings()
    output.outdir = str(out_dir)
    output.copy_summary_to_stdout = False
    output.copy_detail_to_stdout = False
    settings = lg.LogSettings()
    settings.log_output = output
    settings.enable_trace = False
    return settings


def _device_record(binding: DeviceBinding, backend: dict[str, Any] | None,
                   telemetry: dict[str, Any] | None) -> dict[str, Any]:
    record: dict[str, Any] = {**binding.as_dict(), "execution_provider": None,
                              "gpu_name": None, "mig_profile": None, "mig_uuid": None}
    if backend:
        record["execution_provider"] = backend.get("execution_provider")
    gpu = (telemetry or {}).get("gpu")
    if gpu:
        record.update(gpu_name=gpu["name"], mig_profile=gpu["mig_profile"],
                      mig_uuid=gpu["mig_uuid"])
    if binding.kind == "cpu":
        record["note"] = CPU_NOTE
    elif gpu:
        what = f"MIG slice {gpu['mig_profile']} {gpu['mig_uuid']}" if gpu["is_mig"] else "GPU"
        record["note"] = f"{what} on {gpu['parent_name']}"
    else:
        record["note"] = f"{binding.kind} requested; NVML could not describe the device"
    return record


class RunRecord:
    """Collects the record's parts as the run goes; ``record()`` assembles them."""

    def __init__(self, spec: Spec, out_dir: Path) -> None:
        self.spec, self.out_dir = spec, out_dir
        self.reason: str | None = None
        self.model: dict[str, Any] | None = None
        self.backend: dict[str, Any] | None = None
        self.telemetry: dict[str, Any] | None = None
        self.sync: dict[str, Any] = {"mode": "none"}
        self.timed: tuple[float | None, float | None] = (None, None)
        self.sut: dict[str, Any] | None = None
        self.accuracy: dict[str, Any] | None = None
        self.qsl_load_s: float | None = None
        self.qsl_preload_s: float | None = None
        self.stability: dict[str, Any] | None = None
        self.timed_cpu_s: float | None = None

    def fail(self, exc: BaseException) -> None:
        if self.reason is None:
            self.reason = str(exc) if isinstance(exc, HarnessError) else \
                f"{type(exc).__name__}: {exc}"

    def record(self, binding: DeviceBinding) -> dict[str, Any]:
        detail = self.out_dir / DETAIL_LOG
        log = summarize(detail) if detail.exists() else {}
        failed = (self.sut or {}).get("failed_samples", 0)
        if failed and log.get("validity"):
            # LoadGen only sees completions; samples completed without inference make the
            # measurement meaningless whatever LoadGen concluded.
            validity = log["validity"]
            validity["loadgen_result"] = validity["result"]
            validity["result"] = "INVALID"
            validity["reasons"].append(f"harness: {failed} samples failed in the backend and "
                                       f"were completed without inference")
        host = socket.gethostname()
        return {
            "schema_version": SCHEMA_VERSION,
            "harness_version": HARNESS_VERSION,
            "software": version_info(),
            "status": "failed" if self.reason else "ok",
            "reason": self.reason,
            "instance_name": self.spec.instance_name or host,
            "host": host,
            "spec_source": self.spec.source,
            "spec": self.spec.as_dict(),
            "model": self.model,
            "loadgen_version": log.get("loadgen_version"),
            "scenario": log.get("scenario"),
            "mode": log.get("mode"),
            "settings": log.get("settings"),
            "requested_settings": log.get("requested_settings"),
            "throughput": log.get("throughput"),
            "latency_ns": log.get("latency_ns"),
            "query_latency_ns": log.get("query_latency_ns"),
            "query_count": log.get("query_count"),
            "samples_per_query": log.get("samples_per_query"),
            "sample_count": log.get("sample_count"),
            "overlatency_query_count": log.get("overlatency_query_count"),
            "validity": log.get("validity"),
            "early_stopping": log.get("early_stopping"),
            "loadgen_errors": log.get("loadgen_errors", []),
            "loadgen_warnings": log.get("loadgen_warnings", []),
            "accuracy": self.accuracy,
            "mlperf_rules": rules_record(self.spec, self.spec.loadgen.performance_sample_count),
            "sut": self.sut,
            "device": _device_record(binding, self.backend, self.telemetry),
            "backend": self.backend,
            "telemetry": self.telemetry,
            "sync": self.sync,
            "timed_start_unix": self.timed[0],
            "timed_end_unix": self.timed[1],
            "qsl_load_s": self.qsl_load_s,
            "qsl_preload_s": self.qsl_preload_s,
            "stability": self.stability,
            "logs": {name: name for name in LOG_FILES if (self.out_dir / name).exists()},
        }


def completion_timeline(points: list[tuple[float, int]], start: float,
                        limit: int = TIMELINE_POINTS) -> dict[str, list[float]]:
    """Samples completed by each moment of the timed run, from ``start`` (0 samples) to the
    last completion; thinned evenly to at most ``limit`` points (the last always kept), so
    that the orchestrator can count any instance's samples inside the window all shared."""
    if len(points) > limit:
        step = len(points) / (limit - 1)
        points = [points[int(i * step)] for i in range(limit - 1)] + [points[-1]]
    return {"unix": [start, *(t for t, _ in points)],
            "samples": [0.0, *(float(n) for _, n in points)]}


def fresh_out_dir(out_dir: str | Path) -> Path:
    """``out_dir``, made if missing, without a previous run's LoadGen logs."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in LOG_FILES:
        (out / stale).unlink(missing_ok=True)
    return out
