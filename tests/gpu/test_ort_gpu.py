"""onnxruntime-gpu's CUDA and TensorRT providers: each provider starts on the bound
device and agrees with the CPU provider, and the harness runs on the CUDA provider with
its samples on the device (and on TensorRT with an engine cache, where TensorRT's libraries
are installed). On a host with a GPU, an onnxruntime without the CUDA provider (the CPU
build) is a failure unless the run says --no-ort-gpu (gpu-check.sh sets VGPU_NO_ORT_GPU=1);
TensorRT's libraries missing is an optional skip."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loadgen.backends.ort import (
    CPU_PROVIDER,
    CUDA_PROVIDER,
    GPU_PROVIDERS,
    TENSORRT_PROVIDER,
    choose_providers,
    preload_cuda_libraries,
)
from loadgen.models import build_model, read_model_io
from loadgen.qsl import SampleLibrary
from tests.gpu import figures
from tests.gpu.compare import harness_run
from tests.gpu.gpuhost import NO_ORT_GPU_ENV, GpuHost, missing_cuda_provider

pytestmark = pytest.mark.gpu

@pytest.fixture(scope="module")
def ort_gpu(gpu_host: GpuHost) -> Any:
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    if ort is not None:
        preload_cuda_libraries(ort)
    providers = ort.get_available_providers() if ort is not None else []
    missing = missing_cuda_provider(ort.__version__ if ort is not None else None, providers,
                                    os.environ.get(NO_ORT_GPU_ENV) == "1")
    if missing is not None:
        action, reason = missing
        figures.note("onnxruntime", {"missing": reason})
        if action == "skip":
            pytest.skip(reason)
        pytest.fail(reason)
    figures.note("onnxruntime", {"version": ort.__version__, "providers": providers})
    return ort


def _session(ort: Any, model: Path, provider: str, cache: Path) -> Any:
    chosen = choose_providers("gpu", ort.get_available_providers(),
                              "tensorrt" if provider == TENSORRT_PROVIDER else "cuda",
                              False, cache)
    return ort.InferenceSession(str(model), providers=[p for p, _ in chosen],
                                provider_options=[o for _, o in chosen])


@pytest.mark.parametrize("provider", GPU_PROVIDERS)
def test_gpu_provider_matches_the_cpu(ort_gpu: Any, provider: str, tmp_path: Path) -> None:
    if provider not in ort_gpu.get_available_providers():
        pytest.skip(f"gpu: optional: this onnxruntime has no {provider}")
    model = build_model("resnet50", "tiny", "fp32", tmp_path)
    library = SampleLibrary(read_model_io(model), seed=0, performance_count=8)
    library.load(list(range(8)))
    feeds = library.batch(np.arange(8))
    try:
        session = _session(ort_gpu, model, provider, tmp_path / "tensorrt")
        started = session.get_providers()[0]
    except Exception as exc:
        started = f"none ({exc})"
    if started != provider:
        why = f"{provider} is compiled in but did not start here (got {started})"
        if provider == TENSORRT_PROVIDER:
            pytest.skip(f"gpu: optional: {why}: TensorRT's libraries are not installed")
        pytest.fail(f"{why}: check that onnxruntime-gpu matches this host's CUDA and cuDNN")
    expected = ort_gpu.InferenceSession(str(model), providers=[CPU_PROVIDER]).run(
        None, feeds)[0]
    got = session.run(None, feeds)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-2, atol=1e-3)


def test_harness_runs_on_the_cuda_provider(ort_gpu: Any, gpu_host: GpuHost,
                                           tmp_path: Path) -> None:
    doc = {"schema_version": 1,
           "model": {"name": "resnet50", "variant": "tiny", "precision": "fp16"},
           "backend": {"name": "onnxruntime"}, "device": gpu_host.device,
           "loadgen": {"scenario": "Offline", "min_duration_ms": 3000, "target_qps": 5000},
           "batch_size": 32, "cache_dir": str(tmp_path / "models")}
    done, record = harness_run(gpu_host, doc, tmp_path / "out")
    assert done.returncode == 0, record.get("reason")
    backend = record["backend"]
    assert record["device"]["execution_provider"] == CUDA_PROVIDER
    assert backend["io_binding"] is True and backend["samples_on_device"] is True
    assert backend["cuda_libraries_preloaded"] is True
    assert backend["thread_spinning"] is False
    assert record["sut"]["failed_samples"] == 0
    graphs = backend["cuda_graphs"]  # replayed per batch size, or the provider's reason
    assert graphs["enabled"] is True or isinstance(graphs["fallback_reason"], str), graphs
    assert backend["provider_options"]["cudnn_conv_algo_search"] == "HEURISTIC"
    figures.note("onnxruntime_harness", {
        "execution_provider": record["device"]["execution_provider"],
        "samples_per_second": record["throughput"]["samples_per_second"],
        "cuda_graphs": graphs})


def test_tensorrt_on_request_caches_its_engine(ort_gpu: Any, gpu_host: GpuHost,
                                               tmp_path: Path) -> None:
    if TENSORRT_PROVIDER not in ort_gpu.get_available_providers():
        pytest.skip(f"gpu: optional: this onnxruntime has no {TENSORRT_PROVIDER}")
    doc = {"schema_version": 1,
           "model": {"name": "resnet50", "variant": "tiny", "precision": "fp16"},
           "backend": {"name": "onnxruntime", "provider": "tensorrt"},
           "device": gpu_host.device,
           "loadgen": {"scenario": "Offline", "min_duration_ms": 2000, "target_qps": 5000},
           "batch_size": 32, "cache_dir": str(tmp_path / "models")}
    done, record = harness_run(gpu_host, doc, tmp_path / "out")
    if record["device"]["execution_provider"] != TENSORRT_PROVIDER:
        pytest.skip(f"gpu: optional: TensorRT did not start: {record.get('reason')}")
    assert done.returncode == 0, record.get("reason")
    assert record["backend"]["provider_options"]["trt_fp16_enable"] == "True"
    assert list((tmp_path / "models" / "tensorrt").iterdir()), "no TensorRT engine cached"
