"""Backend torch on the CPU: real LoadGen Offline runs of the tiny models, seeded weights,
and a GPU request on a torch without CUDA failing instead of falling back."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from loadgen.contract import INFERENCE_MODELS, ModelSpec
from loadgen.llm_sizes import VARIANTS
from loadgen.models import build_model, builtin_model_io
from loadgen.models.decoder import decoder_weights
from loadgen.qsl import SampleLibrary
from loadgen.result import schema_problems
from loadgen.runner import run
from loadgen.spec import parse_spec
from tests.loadgen.harness_helpers import base_spec, run_cli

torch = pytest.importorskip("torch", reason="the train extra (torch) is not installed")

from loadgen.backends.pytorch import TorchBackend  # noqa: E402
from loadgen.torchmodels import BUILDERS, build_torch_model  # noqa: E402

pytestmark = pytest.mark.train

TARGET_QPS = {"resnet50": 2000, "bert": 300}
# The ONNX builder's learned tensors, by name hint (the rest are shapes, axes, scalars).
ONNX_WEIGHTS = ("conv_w", "conv_b", "fc_w", "fc_b", "dense_w", "dense_b", "word_emb",
                "pos_emb", "type_emb", "ln_gamma", "ln_beta")
LLM_WEIGHTS = tuple(name.replace(".", "_") for name in decoder_weights(VARIANTS["tiny"], 0))


def torch_spec(cache: Path, model: str, **overrides: Any) -> dict[str, Any]:
    doc = base_spec(cache, model={"name": model, "variant": "tiny"},
                    backend={"name": "torch", "threads": 1}, **overrides)
    doc["loadgen"].update(target_qps=TARGET_QPS[model], min_duration_ms=500)
    return doc


def tiny_feeds(model: str, batch: int, seed: int = 3) -> dict[str, np.ndarray]:
    library = SampleLibrary(builtin_model_io(model, "tiny", "fp32"), seed, batch)
    library.load(list(range(batch)))
    return library.batch(np.arange(batch))


@pytest.mark.parametrize("model", ["resnet50", "bert"])
def test_offline_run_through_the_torch_backend(model_cache: Path, tmp_path: Path,
                                               model: str) -> None:
    out = tmp_path / "out"
    record = run(parse_spec(torch_spec(model_cache, model), "spec.json", tmp_path), out)
    assert record["status"] == "ok", record["reason"]
    assert schema_problems(record) == []
    assert json.loads((out / "result.json").read_text())["status"] == "ok"
    assert record["throughput"]["samples_per_second"] > 0
    assert record["sut"]["completed_samples"] == record["sample_count"] > 0
    assert record["sut"]["failed_samples"] == 0
    assert record["device"]["execution_provider"] == "torch-cpu"
    backend = record["backend"]
    assert (backend["name"], backend["device"], backend["intra_op_threads"]) == (
        "torch", "cpu", 1)
    assert backend["torch_version"] == torch.__version__ == record["software"]["torch"]["version"]
    assert record["model"]["path"] is None
    assert [t["name"] for t in record["model"]["inputs"]] == list(
        builtin_model_io(model, "tiny", "fp32").input_names)


@pytest.mark.parametrize("model", INFERENCE_MODELS)
def test_torch_models_have_the_onnx_models_weights(model_cache: Path, model: str) -> None:
    assert set(BUILDERS) == set(INFERENCE_MODELS)
    graph = onnx.load(str(build_model(model, "tiny", "fp32", model_cache))).graph
    learned = LLM_WEIGHTS if model == "llm" else ONNX_WEIGHTS
    onnx_count = sum(int(np.prod(t.dims)) for t in graph.initializer
                     if t.name.rsplit("_", 1)[0] in learned)
    torch_count = sum(p.numel() for p in build_torch_model(model, "tiny", 0).parameters())
    assert torch_count == onnx_count


def test_resnet_outputs_are_deterministic_for_the_seed() -> None:
    images = torch.from_numpy(tiny_feeds("resnet50", 4)["input"])
    with torch.inference_mode():
        first = build_torch_model("resnet50", "tiny", 11)(images)[0]
        again = build_torch_model("resnet50", "tiny", 11)(images)[0]
        other = build_torch_model("resnet50", "tiny", 12)(images)[0]
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    assert torch.allclose(first.sum(dim=1), torch.ones(4))


def test_the_backend_returns_the_models_outputs_in_order() -> None:
    backend = TorchBackend(ModelSpec("bert", "tiny"), 1, "cpu", seed=5)
    try:
        feeds = tiny_feeds("bert", 2)
        first, again = backend.infer(feeds), backend.infer(feeds)
        assert [a.shape for a in first] == [(2, 128), (2, 128)]
        assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    finally:
        backend.close()


def test_a_failed_batch_reports_its_error_and_frees_its_slot() -> None:
    backend = TorchBackend(ModelSpec("resnet50", "tiny"), 1, "cpu", seed=5)
    results: list[tuple[Any, BaseException | None]] = []
    finished = threading.Semaphore(0)

    def done(outputs: Any, error: BaseException | None) -> None:
        results.append((outputs, error))
        finished.release()

    try:
        for feeds in ({}, {}, tiny_feeds("resnet50", 2)):
            backend.submit(feeds, done)
            assert finished.acquire(timeout=30)
    finally:
        backend.close()
    assert [type(error) for _, error in results[:2]] == [KeyError, KeyError]
    outputs, error = results[2]
    assert error is None and outputs[0].shape == (2, 10)


def test_a_gpu_request_without_cuda_fails_with_exit_1(model_cache: Path, tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("gpu: this torch has CUDA, so a GPU request would run")
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(torch_spec(model_cache, "resnet50",
                                          device={"kind": "gpu", "index": 0})))
    done = run_cli("run", str(spec), "--out", str(tmp_path / "out"))
    assert done.returncode == 1, done.stderr
    record = json.loads((tmp_path / "out" / "result.json").read_text())
    assert record["status"] == "failed"
    assert "device.kind gpu needs CUDA" in record["reason"]
    assert record["reason"] in done.stderr
    assert record["throughput"] is None
