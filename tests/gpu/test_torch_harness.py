"""Full ResNet50 fp16 and BERT-large fp16 Offline through the harness on the GPU with
backend torch, each against a raw loop of the same torch model on the same inputs and
batch; and the telemetry the harness recorded while the GPU worked."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gpu import figures
from tests.gpu.compare import (
    BERT_LARGE_FP16,
    RESNET50_FP16,
    Comparison,
    Workload,
    compare,
    raw_rate,
)
from tests.gpu.gpuhost import GpuHost

pytestmark = pytest.mark.gpu

MIN_RATIO = 0.90
GPU_METRICS = ("memory_used_bytes", "power_w", "sm_clock_mhz", "gpu_utilization_percent")
# NVML answers these per physical GPU or not at all on a MIG slice.
MIG_UNAVAILABLE = ("gpu_utilization_percent", "memory_utilization_percent")


def _compare(host: GpuHost, work: Workload, tmp: pytest.TempPathFactory) -> Comparison:
    result = compare(host, work, tmp.mktemp(work.label))
    figures.note(work.label, result.figures())
    print(f"{work.label}: harness {result.harness_rate:.1f} samples/s, raw loop "
          f"{result.raw['samples_per_second']:.1f} samples/s, ratio {result.ratio:.3f}")
    return result


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
    assert result.ratio >= MIN_RATIO, (
        f"harness {result.harness_rate:.1f}/s is {result.ratio:.3f} of the raw loop "
        f"{result.raw['samples_per_second']:.1f}/s (want >= {MIN_RATIO})")


def test_resnet50_fp16_keeps_up_with_a_raw_loop(resnet50: Comparison,
                                                torch_cuda: dict[str, Any]) -> None:
    _check(resnet50, torch_cuda)
    assert resnet50.record["backend"]["channels_last"] is True


def test_fp16_is_faster_than_fp32_with_tf32(resnet50: Comparison, gpu_host: GpuHost) -> None:
    """fp32 runs with TF32 (backend.math), as ONNX Runtime's CUDA provider does; fp16 must
    still beat it on the same raw loop, or the fp16 path is not what runs."""
    fp32 = raw_rate(gpu_host, Workload("resnet50", "full", "fp32", RESNET50_FP16.batch), 5.0)
    fp16 = float(resnet50.raw["samples_per_second"])
    speedup = fp16 / float(fp32["samples_per_second"])
    figures.note("resnet50_fp16_over_fp32", {"fp16_raw": fp16, "fp32_raw":
                                             fp32["samples_per_second"], "speedup": speedup,
                                             "fp32_math": fp32["backend"]["math"]})
    print(f"resnet50 fp16 / fp32 (TF32) raw loop: {speedup:.2f}x")
    assert fp32["backend"]["math"]["tf32"] is True
    assert resnet50.record["backend"]["math"]["cudnn_benchmark"] is True
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
