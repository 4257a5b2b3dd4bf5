"""ONNX Runtime backend, with the CPU build of onnxruntime: which providers and options a
GPU run asks for (CUDA by default, TensorRT only on request, with fp16 and an engine cache),
the CUDA libraries preloaded, no spinning threads on a GPU session, and the reused IO
binding that gathers each batch from samples kept where the session runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from loadgen.backends.ort import (
    CPU_PROVIDER,
    CUDA_OPTIONS,
    CUDA_PROVIDER,
    TENSORRT_PROVIDER,
    BoundRunner,
    OrtBackend,
    choose_providers,
    preload_cuda_libraries,
    session_options,
    started_provider,
)
from loadgen.errors import RunFailed
from loadgen.models import build_model, read_model_io
from loadgen.qsl import SampleLibrary
from loadgen.spec import SpecError, parse_spec
from tests.loadgen.harness_helpers import base_spec

ALL_GPU = [TENSORRT_PROVIDER, CUDA_PROVIDER, CPU_PROVIDER]


def test_a_gpu_run_uses_the_cuda_provider_even_where_tensorrt_is_present() -> None:
    assert CUDA_OPTIONS == {"device_id": "0", "use_tf32": "1",
                            "cudnn_conv_algo_search": "HEURISTIC"}
    assert choose_providers("gpu", ALL_GPU) == [(CUDA_PROVIDER, CUDA_OPTIONS),
                                                (CPU_PROVIDER, {})]
    assert choose_providers("mig", ALL_GPU, "cuda") == [(CUDA_PROVIDER, CUDA_OPTIONS),
                                                        (CPU_PROVIDER, {})]


def test_tensorrt_on_request_has_fp16_and_an_engine_cache(tmp_path: Path) -> None:
    chosen = choose_providers("gpu", ALL_GPU, "tensorrt", True, tmp_path / "tensorrt")
    assert [name for name, _ in chosen] == [TENSORRT_PROVIDER, CUDA_PROVIDER, CPU_PROVIDER]
    options = chosen[0][1]
    assert options["trt_fp16_enable"] == "True"
    assert options["trt_engine_cache_enable"] == "True"
    assert options["trt_engine_cache_path"] == str(tmp_path / "tensorrt")
    assert options["trt_timing_cache_path"] == str(tmp_path / "tensorrt")
    fp32 = choose_providers("gpu", ALL_GPU, "tensorrt", False, tmp_path)[0][1]
    assert fp32["trt_fp16_enable"] == "False"


def test_a_missing_gpu_provider_fails_and_says_which() -> None:
    with pytest.raises(RunFailed, match="needs onnxruntime's TensorrtExecutionProvider"):
        choose_providers("gpu", [CUDA_PROVIDER, CPU_PROVIDER], "tensorrt")
    with pytest.raises(RunFailed, match="install onnxruntime-gpu"):
        choose_providers("gpu", ort.get_available_providers())
    assert choose_providers("cpu", ALL_GPU) == [(CPU_PROVIDER, {})]


def test_the_cuda_libraries_are_preloaded_where_onnxruntime_can() -> None:
    assert hasattr(ort, "preload_dlls")
    assert preload_cuda_libraries(ort) is True


def test_a_gpu_session_does_not_spin() -> None:
    gpu = session_options(ort, 2, on_gpu=True)
    assert gpu.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert gpu.get_session_config_entry("session.inter_op.allow_spinning") == "0"
    cpu = session_options(ort, 2, on_gpu=False)
    with pytest.raises(RuntimeError, match="does not have configuration"):
        cpu.get_session_config_entry("session.intra_op.allow_spinning")
    assert cpu.intra_op_num_threads == 2


def test_a_gpu_run_on_the_cpu_build_fails_before_any_session(model_cache: Path) -> None:
    model = build_model("resnet50", "tiny", "fp32", model_cache)
    with pytest.raises(RunFailed, match="CUDAExecutionProvider"):
        OrtBackend(str(model), 1, "gpu", None, "fp32", model_cache)


@pytest.mark.parametrize("name", ["resnet50", "bert"])
def test_kept_samples_give_the_outputs_of_gathered_feeds(model_cache: Path, name: str) -> None:
    model = build_model(name, "tiny", "fp32", model_cache)
    library = SampleLibrary(read_model_io(model), seed=3, performance_count=24)
    library.preload()
    library.load(list(range(24)))
    providers = choose_providers("cpu", ort.get_available_providers())
    session = ort.InferenceSession(str(model), session_options(ort, 1, True),
                                   providers=[CPU_PROVIDER])
    runner = BoundRunner(ort, session, providers, "cpu")
    binding = runner.binding
    assert library.preloaded is not None
    runner.keep_samples(library.preloaded)
    assert runner.keeps_samples
    for batch in ([5, 1, 17, 2], [9, 0, 23], [5, 1, 17, 2], [11]):
        indices = np.array(batch)
        got = runner.run_rows(library.rows(indices))
        expected = session.run(None, library.batch(indices))
        for out, want in zip(got, expected, strict=True):
            assert out.shape[0] == len(batch)
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
        copied = runner.run(library.batch(indices[::-1]))
        np.testing.assert_allclose(copied[0], expected[0][::-1], rtol=1e-5, atol=1e-6)
    assert runner.binding is binding


@pytest.mark.parametrize("name", ["resnet50", "bert"])
def test_static_buffers_per_batch_size_give_the_same_outputs(model_cache: Path,
                                                            name: str) -> None:
    """The CUDA-graph binding (fixed input and output buffers per batch size, host feeds
    copied into them, a graph id per size) exercised on the CPU provider, which ignores
    the graph id: the outputs are those of plain session runs."""
    model = build_model(name, "tiny", "fp32", model_cache)
    library = SampleLibrary(read_model_io(model), seed=3, performance_count=16)
    library.preload()
    library.load(list(range(16)))
    session = ort.InferenceSession(str(model), session_options(ort, 1, True),
                                   providers=[CPU_PROVIDER])
    runner = BoundRunner(ort, session, [(CPU_PROVIDER, {})], "cpu", graphs=True)
    warm = library.batch(np.arange(4))
    np.testing.assert_allclose(runner.run(warm)[0], session.run(None, warm)[0],
                               rtol=1e-5, atol=1e-6)  # before any sample is kept
    assert library.preloaded is not None
    runner.keep_samples(library.preloaded)
    first_inputs = runner._inputs_for(4)
    for batch in ([5, 1, 12, 2], [9, 0, 15], [5, 1, 12, 2]):
        indices = np.array(batch)
        expected = session.run(None, library.batch(indices))
        for got in (runner.run_rows(library.rows(indices)),
                    runner.run(library.batch(indices))):
            for out, want in zip(got, expected, strict=True):
                np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert runner._inputs_for(4) is first_inputs  # the addresses a graph was captured with
    assert runner.graph_batch_sizes == [3, 4]
    runner.want_outputs = False
    assert runner.run_rows_wanted(library.rows(np.array([1, 2, 3, 4]))) == []


def test_the_cpu_record_says_what_ran(model_cache: Path) -> None:
    model = build_model("resnet50", "tiny", "fp32", model_cache)
    backend = OrtBackend(str(model), 1, "cpu", None, "fp32", model_cache)
    described = backend.describe()
    assert described["execution_provider"] == CPU_PROVIDER
    assert described["io_binding"] is False
    assert described["samples_on_device"] is False
    assert described["cuda_libraries_preloaded"] is False
    assert described["provider_options"] == {}
    assert described["cuda_graphs"] == {"enabled": False, "batch_sizes": [],
                                        "fallback_reason": "not on the CUDA provider"}
    assert backend.keep_samples({"input": np.zeros((1, 3), np.float32)}) is False


def test_backend_provider_is_read_and_checked(tmp_path: Path) -> None:
    gpu = {"kind": "gpu", "uuid": "GPU-0"}
    spec = parse_spec(base_spec(tmp_path, backend={"name": "onnxruntime",
                                                   "provider": "tensorrt"}, device=gpu))
    assert spec.backend.provider == "tensorrt"
    assert parse_spec(base_spec(tmp_path, device=gpu)).backend.provider is None
    with pytest.raises(SpecError, match=r"backend\.provider: chooses the GPU provider"):
        parse_spec(base_spec(tmp_path, backend={"name": "onnxruntime", "provider": "cuda"}))
    with pytest.raises(SpecError, match=r"backend\.provider: 'rocm' is not one of cuda, tensorrt"):
        parse_spec(base_spec(tmp_path, backend={"name": "onnxruntime", "provider": "rocm"},
                             device=gpu))


def test_a_session_that_fell_back_to_the_cpu_fails_a_gpu_device_and_passes_the_cpu() -> None:
    """ONNX Runtime drops a CUDA provider that fails to start and runs on the CPU without
    an error; a GPU or MIG device must not be measured like that (inference and LLM)."""
    path = build_model("resnet50", "tiny", "fp32")
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert started_provider(session, "cpu") == "CPUExecutionProvider"
    for kind in ("gpu", "mig"):
        with pytest.raises(RunFailed, match=f"fell back to the CPU although device.kind is {kind}"):
            started_provider(session, kind)
