"""onnxruntime-gpu's CUDA and TensorRT providers where that build is installed: each
provider starts on the bound device and agrees with the CPU provider, and the harness
runs on a GPU provider with IO binding. With only the CPU build installed, or TensorRT's
libraries missing, these skip with an optional GPU reason (a skip even under
VGPU_REQUIRE_GPU=1, see tests/conftest.py); a CUDA provider that does not start fails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loadgen.backends.ort import CPU_PROVIDER, GPU_PROVIDERS
from loadgen.models import build_model, read_model_io
from loadgen.qsl import SampleLibrary
from tests.gpu import figures
from tests.gpu.compare import harness_run
from tests.gpu.gpuhost import GpuHost

pytestmark = pytest.mark.gpu

# TensorRT's provider needs TensorRT's own libraries, which onnxruntime-gpu does not bring.
REQUIRED_WITH_ORT_GPU = ("CUDAExecutionProvider",)


@pytest.fixture(scope="module")
def ort_gpu(gpu_host: GpuHost) -> Any:
    ort = pytest.importorskip("onnxruntime", reason="gpu: optional: onnxruntime is absent")
    providers = ort.get_available_providers()
    if not set(GPU_PROVIDERS) & set(providers):
        pytest.skip(f"gpu: optional: onnxruntime {ort.__version__} is the CPU build "
                    f"(providers {providers}); install onnxruntime-gpu to test its CUDA "
                    f"and TensorRT providers")
    figures.note("onnxruntime", {"version": ort.__version__, "providers": providers})
    return ort


def _session(ort: Any, model: Path, providers: list[str]) -> Any:
    return ort.InferenceSession(str(model), providers=providers)


@pytest.mark.parametrize("provider", GPU_PROVIDERS)
def test_gpu_provider_matches_the_cpu(ort_gpu: Any, provider: str, tmp_path: Path) -> None:
    if provider not in ort_gpu.get_available_providers():
        pytest.skip(f"gpu: optional: this onnxruntime has no {provider}")
    model = build_model("resnet50", "tiny", "fp32", tmp_path)
    library = SampleLibrary(read_model_io(model), seed=0, performance_count=8)
    library.load(list(range(8)))
    feeds = library.batch(np.arange(8))
    try:
        session = _session(ort_gpu, model, [provider, CPU_PROVIDER])
        started = session.get_providers()[0]
    except Exception as exc:
        started = f"none ({exc})"
    if started != provider:
        why = f"{provider} is compiled in but did not start here (got {started})"
        if provider not in REQUIRED_WITH_ORT_GPU:
            pytest.skip(f"gpu: optional: {why}: TensorRT's libraries are not installed")
        pytest.fail(f"{why}: check that onnxruntime-gpu matches this host's CUDA and cuDNN")
    expected = _session(ort_gpu, model, [CPU_PROVIDER]).run(None, feeds)[0]
    got = session.run(None, feeds)[0]
    np.testing.assert_allclose(got, expected, rtol=1e-2, atol=1e-3)


def test_harness_runs_on_a_gpu_provider(ort_gpu: Any, gpu_host: GpuHost,
                                        tmp_path: Path) -> None:
    doc = {"schema_version": 1,
           "model": {"name": "resnet50", "variant": "tiny", "precision": "fp16"},
           "backend": {"name": "onnxruntime"}, "device": gpu_host.device,
           "loadgen": {"scenario": "Offline", "min_duration_ms": 3000, "target_qps": 5000},
           "batch_size": 32, "cache_dir": str(tmp_path / "models")}
    done, record = harness_run(gpu_host, doc, tmp_path / "out")
    assert done.returncode == 0, record.get("reason")
    assert record["device"]["execution_provider"] in GPU_PROVIDERS
    assert record["backend"]["io_binding"] is True
    figures.note("onnxruntime_harness", {
        "execution_provider": record["device"]["execution_provider"],
        "samples_per_second": record["throughput"]["samples_per_second"]})
