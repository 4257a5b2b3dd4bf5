"""A harness result.json (docs/harness.md) as the store's InstanceResult."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from vgpu.bench.fanout import InstanceOutcome
from vgpu.results.records import CPU_DEVICE_NOTE, InstanceResult, Metric
from vgpu.results.server_split import SPLIT_METRICS, SPLIT_UNIT

_LATENCY_KEYS = {"p50": "p50", "p90": "p90", "p95": "p95", "p97": "p97", "p99": "p99",
                 "p99.9": "p99_9", "min": "min", "max": "max", "mean": "mean"}


def _get(record: dict[str, Any], *path: str) -> Any:
    value: Any = record
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _software(record: dict[str, Any], gpu: dict[str, Any]) -> dict[str, str | None]:
    """CUDA, cuDNN and TensorRT as the harness reported them: the inference runtime's
    build (onnxruntime-gpu, else torch) and the driver's CUDA version."""
    ort = _get(record, "software", "onnxruntime") or {}
    torch = _get(record, "software", "torch") or {}

    def text(*values: Any) -> str | None:
        return next((str(v) for v in values if v not in (None, "")), None)

    return {
        "cuda_version": text(ort.get("cuda_version"), torch.get("cuda")),
        "cuda_driver_version": text(gpu.get("cuda_driver_version")),
        "cudnn_version": text(ort.get("cudnn_version"), torch.get("cudnn")),
        "tensorrt_version": text(ort.get("tensorrt_version")),
    }


def instance_result(outcome: InstanceOutcome) -> InstanceResult:
    target = outcome.target
    record = outcome.record or {}
    device = record.get("device") or {}
    kind = device.get("kind") or target.device.get("kind")
    note = target.device_label if kind == "cpu" else device.get("note")
    if kind == "cpu" and CPU_DEVICE_NOTE not in (note or ""):
        note = CPU_DEVICE_NOTE
    latency = {
        ours: float(value)
        for theirs, ours in _LATENCY_KEYS.items()
        if (value := _get(record, "latency_ns", theirs)) is not None
    }
    throughput = _get(record, "throughput", "samples_per_second")
    platform = target.platform
    if platform is not None:
        gpu = _get(record, "telemetry", "gpu") or {}
        container = target.container
        platform = replace(
            platform,
            harness_version=record.get("harness_version"),
            guest_driver=gpu.get("driver_version") or platform.guest_driver,
            gpu=gpu.get("parent_name") or gpu.get("name") or platform.gpu,
            mig_profile=device.get("mig_profile") or platform.mig_profile,
            runtime=target.runtime,
            container_image=container.image if container else None,
            container_image_id=container.image_id if container else None,
            ort_package=_get(record, "software", "onnxruntime", "package"),
            ort_version=_get(record, "software", "onnxruntime", "version"),
            execution_provider=device.get("execution_provider"),
            **_software(record, gpu),
        )
    return InstanceResult(
        name=target.instance,
        status="failed" if outcome.problem else "ok",
        device_kind=kind,
        device_name=device.get("gpu_name") or (None if kind == "cpu" else target.device_label),
        device_note=note,
        mig_profile=device.get("mig_profile"),
        mig_uuid=device.get("mig_uuid"),
        validity=_get(record, "validity", "result"),
        validity_reasons=list(_get(record, "validity", "reasons") or []),
        throughput=None if throughput is None else float(throughput),
        latency_ns=latency,
        timed_start_unix=record.get("timed_start_unix"),
        timed_end_unix=record.get("timed_end_unix"),
        log_dir=str(outcome.log_dir),
        result=record,
        platform=platform,
    )


def server_split_metrics(outcome: InstanceOutcome) -> list[Metric]:
    """A Triton instance's server-side split of the timed run (mean microseconds per
    request in the queue, copying inputs, inferring, copying outputs) as metrics of that
    instance; none for other backends or when the server's statistics were unreadable."""
    timed = _get(outcome.record or {}, "backend", "server_statistics", "timed_run") or {}
    metrics = []
    for kind, name in SPLIT_METRICS.items():
        value = _get(timed, kind, "mean_us")
        if isinstance(value, int | float):
            metrics.append(Metric(name, float(value), SPLIT_UNIT, outcome.target.instance))
    return metrics
