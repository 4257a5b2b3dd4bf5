"""Full ResNet50 fp16 and BERT-large fp16 Offline through the harness on the GPU with
backend torch, each at the batch size a short probe chose for this device and against a
raw loop of the same torch model on the same inputs and batch (same device path): the
harness must reach 0.98 of the raw loop with the GPU at least 90% busy (a whole GPU; NVML
has no utilisation on a MIG slice); and the telemetry the harness recorded."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from loadgen.batchsize import CANDIDATES, device_class
from tests.gpu import figures
from tests.gpu.compare import (
    BERT_LARGE_FP16,
    RESNET50_FP16,
    Comparison,
    Workload,
    batch_sweep,
    compare,
    raw_rate,
)
from tests.gpu.gpuhost import GpuHost

pytestmark = pytest.mark.gpu

MIN_RATIO = 0.98
MIN_GPU_BUSY_PCT = 90.0
GPU_METRICS = ("memory_used_bytes", "power_w", "sm_clock_mhz", "gpu_utilization_percent")
# NVML answers these per physical GPU or not at all on a MIG slice.
MIG_UNAVAILABLE = ("gpu_utilization_percent", "memory_utilization_percent")


def _at_chosen_batch(host: GpuHost, work: Workload) -> Workload:
    """``work`` at the batch size the probe chose for this device, recorded."""
    swept = batch_sweep(host, work, CANDIDATES[work.model])
    mig = host.mig_device_uuid is not None
    figures.note(f"batch_probe_{work.model}", {
        "device_class": device_class(host.name, "MIG slice" if mig else None), **swept})
    print(f"{work.model}: probe {swept['rates']} -> batch {swept['chosen']}")
    return replace(work, batch=int(swept["chosen"]))


def _compare(host: GpuHost, work: Workload, tmp: pytest.TempPathFactory) -> Comparison:
    work = _at_chosen_batch(host, work)
    result = compare(host, work, tmp.mktemp(work.label))
    busy = _gpu_busy(result)
    figures.note(work.model, {**result.figures(), "label": work.label,
                              "gpu_busy_percent_mean": busy,
                              "backend": {k: result.record["backend"].get(k) for k in (
                                  "transfer", "in_flight", "cuda_graphs", "math",
                                  "channels_last", "samples_on_device")}})
    print(f"{work.label}: harness {result.harness_rate:.1f} samples/s, raw loop "
          f"{result.raw['samples_per_second']:.1f} samples/s, ratio {result.ratio:.3f}, "
          f"GPU busy {busy if busy is None else round(busy, 1)}%")
    return result


def _gpu_busy(result: Comparison) -> float | None:
    """Mean GPU utilisation during the harness's timed run (None on a MIG slice)."""
    metrics = ((result.record.get("telemetry") or {}).get("gpu") or {}).get("metrics") or {}
    return (metrics.get("gpu_utilization_percent") or {}).get("mean")


@pytest.fixture(scope="module")
def resnet50(gpu_host: GpuHost, torch_cuda: dict[str, Any],
             tmp_path_factory: pytest.TempPathFactory) -> Comparison:
    return _compare(gpu_host, RESNET50_FP16, tmp_path_factory)


def _check(result: Comparison, torch_cuda: dict[str, Any]) -> None:
    record = result.record
    assert record["device"]["execution_provider"] == "torch-cuda"
    assert record["backend"]["cuda_version"] == torch_cuda["cuda"]
    assert record["software"]["torch"]["version"] == torch_cuda["torch"]
    assert record["sut"]["failed_samples"] == 0
    assert result.record["backend"]["samples_on_device"] is True
    assert result.ratio >= MIN_RATIO, (
        f"harness {result.harness_rate:.1f}/s is {result.ratio:.3f} of the raw loop "
        f"{result.raw['samples_per_second']:.1f}/s (want >= {MIN_RATIO})")
    busy = _gpu_busy(result)
    if record["telemetry"]["gpu"]["is_mig"]:
        assert busy is None
    else:
        assert busy is not None and busy >= MIN_GPU_BUSY_PCT, (
            f"the GPU was {busy}% busy during the harness run (want >= {MIN_GPU_BUSY_PCT})")


def test_resnet50_fp16_keeps_up_with_a_raw_loop(resnet50: Comparison,
                                                torch_cuda: dict[str, Any]) -> None:
    _check(resnet50, torch_cuda)
    assert resnet50.record["backend"]["channels_last"] is True


def test_fp16_is_faster_than_fp32_with_tf32(resnet50: Comparison, gpu_host: GpuHost) -> None:
    """fp32 runs with TF32 (backend.math), as ONNX Runtime's CUDA provider does; fp16 must
    still beat it on the same raw loop, or the fp16 path is not what runs."""
    fp32 = raw_rate(gpu_host, Workload("resnet50", "full", "fp32", resnet50.workload.batch),
                    5.0)
    fp16 = float(resnet50.raw["samples_per_second"])
    speedup = fp16 / float(fp32["samples_per_second"])
    figures.note("resnet50_fp16_over_fp32", {"fp16_raw": fp16, "fp32_raw":
                                             fp32["samples_per_second"], "speedup": speedup,
                                             "fp32_math": fp32["backend"]["math"]})
    print(f"resnet50 fp16 / fp32 (TF32) raw loop: {speedup:.2f}x")
    assert fp32["backend"]["math"]["tf32"] is True
    assert resnet50.record["backend"]["math"]["cudnn_algorithms"] == "heuristic"
    assert speedup > 1.0


def test_bert_large_fp16_keeps_up_with_a_raw_loop(
        gpu_host: GpuHost, torch_cuda: dict[str, Any],
        tmp_path_factory: pytest.TempPathFactory) -> None:
    _check(_compare(gpu_host, BERT_LARGE_FP16, tmp_path_factory), torch_cuda)


def test_telemetry_has_gpu_values(resnet50: Comparison, gpu_host: GpuHost) -> None:
    telemetry = resnet50.record["telemetry"]
    assert telemetry["nvml"] == {"available": True}
    gpu = telemetry["gpu"]
    assert gpu["name"] and gpu["driver_version"] == gpu_host.driver_version
    assert gpu["is_mig"] is (gpu_host.mig_device_uuid is not None)
    metrics, unsupported = gpu["metrics"], gpu["unsupported"]
    for name in GPU_METRICS:
        assert name in metrics or unsupported.get(name), f"{name}: neither sampled nor refused"
    for name, values in metrics.items():
        assert values["count"] > 0 and values["mean"] is not None, name
    assert metrics["memory_used_bytes"]["max"] > 0
    if gpu["is_mig"]:
        assert set(MIG_UNAVAILABLE) <= set(unsupported), unsupported
    else:
        assert metrics["gpu_utilization_percent"]["max"] > 0
    figures.note("telemetry", {
        "is_mig": gpu["is_mig"], "mig_profile": gpu["mig_profile"],
        "means": {name: values["mean"] for name, values in metrics.items()},
        "unavailable": unsupported})
    print(f"telemetry unavailable on this device: {unsupported or 'nothing'}")
