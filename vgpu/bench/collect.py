"""A harness result.json (docs/harness.md) as the store's InstanceResult."""

from __future__ import annotations

from dataclasses import replace

from loadgen.contract import metric_unit, metrics_of
from vgpu.bench.fanout import InstanceOutcome
from vgpu.results.store.records import CPU_DEVICE_NOTE, InstanceResult, Metric
from vgpu.results.views.server_split import SPLIT_METRICS


def instance_result(outcome: InstanceOutcome) -> InstanceResult:
    target, result = outcome.target, outcome.result
    device = result.device
    kind = device.kind or target.device.get("kind")
    note = target.device_label if kind == "cpu" else device.note
    if kind == "cpu" and CPU_DEVICE_NOTE not in (note or ""):
        note = CPU_DEVICE_NOTE
    platform = target.platform
    if platform is not None:
        gpu, software = result.gpu, result.software
        container = target.container
        platform = replace(
            platform,
            harness_version=result.harness_version,
            guest_driver=gpu.driver_version or platform.guest_driver,
            gpu=gpu.parent_name or gpu.name or platform.gpu,
            mig_profile=device.mig_profile or platform.mig_profile,
            runtime=target.runtime,
            container_image=container.image if container else None,
            container_image_id=container.image_id if container else None,
            ort_package=software.ort_package,
            ort_version=software.ort_version,
            execution_provider=device.execution_provider,
            cuda_version=software.cuda_version,
            cuda_driver_version=gpu.cuda_driver_version or None,
            cudnn_version=software.cudnn_version,
            tensorrt_version=software.tensorrt_version,
        )
    validity = result.validity
    return InstanceResult(
        name=target.instance,
        status="failed" if outcome.problem else "ok",
        device_kind=kind,
        device_name=device.gpu_name or (None if kind == "cpu" else target.device_label),
        device_note=note,
        mig_profile=device.mig_profile,
        mig_uuid=device.mig_uuid,
        validity=validity.result if validity else None,
        validity_reasons=list(validity.reasons) if validity else [],
        throughput=result.throughput,
        latency_ns=dict(result.latency_ns),
        timed_start_unix=result.timed_start_unix,
        timed_end_unix=result.timed_end_unix,
        log_dir=str(outcome.log_dir),
        result=outcome.record or {},
        platform=platform,
    )


def server_split_metrics(outcome: InstanceOutcome) -> list[Metric]:
    """A Triton instance's server-side split of the timed run (mean microseconds per
    request in the queue, copying inputs, inferring, copying outputs) as metrics of that
    instance; none for other backends or when the server's statistics were unreadable."""
    metrics = metrics_of(outcome.result)
    return [Metric(name, metrics[name], metric_unit(name), outcome.target.instance)
            for name in SPLIT_METRICS.values() if name in metrics]
