"""The ONNX model builders: real architectures, seeded weights, cache keyed by content."""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from loadgen.models import build_model, cache_key, read_model_io
from loadgen.models.bert import VARIANTS as BERT_VARIANTS
from loadgen.models.bert import build_bert


def op_counts(graph: onnx.GraphProto) -> collections.Counter[str]:
    return collections.Counter(n.op_type for n in graph.node)


def parameter_count(graph: onnx.GraphProto) -> int:
    return sum(int(np.prod(t.dims)) for t in graph.initializer)


@pytest.mark.slow
def test_resnet50_full_has_the_v1_5_architecture(model_cache: Path) -> None:
    path = build_model("resnet50", "full", "fp32", model_cache)
    graph = onnx.load(str(path)).graph
    ops = op_counts(graph)
    # stem + 16 bottlenecks x 3 + 4 projection shortcuts; one FC; 16 residual adds
    assert ops["Conv"] == 1 + 16 * 3 + 4
    assert ops["Add"] == 16
    assert ops["Gemm"] == 1
    assert ops["MaxPool"] == 1 and ops["GlobalAveragePool"] == 1
    # torchvision's resnet50 has 25.56M parameters; folded BN leaves conv biases instead
    assert 25_400_000 < parameter_count(graph) < 25_700_000
    io = read_model_io(path)
    assert [(t.name, t.shape, str(t.dtype)) for t in io.inputs] == [
        ("input", (None, 3, 224, 224), "float32")]
    assert io.outputs[0].shape == (None, 1000)
    strided = [n for n in graph.node if n.op_type == "Conv"
               and list(next(a.ints for a in n.attribute if a.name == "strides")) == [2, 2]]
    kernels = [next(list(a.ints) for a in n.attribute if a.name == "kernel_shape")
               for n in strided]
    # v1.5: the stride of a downsampling block sits on its 3x3 convolution (and shortcut)
    assert kernels.count([3, 3]) == 3 and kernels.count([1, 1]) == 3 and [7, 7] in kernels


def test_bert_tiny_runs_with_mlperf_inputs(model_cache: Path) -> None:
    path = build_model("bert", "tiny", "fp32", model_cache)
    io = read_model_io(path)
    assert [(t.name, str(t.dtype)) for t in io.inputs] == [
        ("input_ids", "int64"), ("input_mask", "int64"), ("segment_ids", "int64")]
    assert [t.name for t in io.outputs] == ["start_logits", "end_logits"]
    ops = op_counts(onnx.load(str(path)).graph)
    layers = BERT_VARIANTS["tiny"].layers
    assert ops["LayerNormalization"] == 1 + 2 * layers
    assert ops["Softmax"] == layers
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    seq = BERT_VARIANTS["tiny"].seq_len
    ids = np.arange(3 * seq, dtype=np.int64).reshape(3, seq) % 1000
    mask = np.ones((3, seq), dtype=np.int64)
    start, end = session.run(None, {"input_ids": ids, "input_mask": mask,
                                    "segment_ids": np.zeros_like(ids)})
    assert start.shape == end.shape == (3, seq)
    assert np.isfinite(start).all() and not np.allclose(start, end)


@pytest.mark.slow
def test_bert_large_and_base_have_the_published_sizes() -> None:
    large, base = BERT_VARIANTS["large"], BERT_VARIANTS["base"]
    assert (large.layers, large.hidden, large.heads, large.seq_len) == (24, 1024, 16, 384)
    assert (base.layers, base.hidden, base.heads, base.seq_len) == (12, 768, 12, 384)
    params = parameter_count(build_bert("base", np.dtype(np.float16), 0).graph)
    assert 108_000_000 < params < 111_000_000  # BERT-base: ~110M with the SQuAD head


@pytest.mark.parametrize("name,variant", [("resnet50", "tiny"), ("bert", "tiny")])
def test_fp16_models_are_fp16_and_agree_with_fp32(model_cache: Path, name: str,
                                                  variant: str) -> None:
    fp32 = build_model(name, variant, "fp32", model_cache)
    fp16 = build_model(name, variant, "fp16", model_cache)
    weights = onnx.load(str(fp16)).graph.initializer
    float_types = {t.data_type for t in weights if t.data_type in (1, 10)}
    assert float_types == {onnx.TensorProto.FLOAT16}
    io32, io16 = read_model_io(fp32), read_model_io(fp16)
    rng = np.random.default_rng(0)
    feeds32 = {}
    for t in io32.inputs:
        shape = (2, *t.sample_shape)
        feeds32[t.name] = (rng.standard_normal(shape).astype(np.float32) if t.dtype.kind == "f"
                           else rng.integers(0, 2, shape).astype(np.int64))
    feeds16 = {t.name: feeds32[t.name].astype(t.dtype) for t in io16.inputs}
    out32 = ort.InferenceSession(str(fp32), providers=["CPUExecutionProvider"]).run(None, feeds32)
    out16 = ort.InferenceSession(str(fp16), providers=["CPUExecutionProvider"]).run(None, feeds16)
    assert out16[0].dtype == np.float16
    np.testing.assert_allclose(out16[0].astype(np.float32), out32[0], atol=0.05, rtol=0.05)


def test_cache_reuses_the_file_and_keys_by_content(model_cache: Path, tmp_path: Path) -> None:
    first = build_model("resnet50", "tiny", "fp32", tmp_path)
    mtime = first.stat().st_mtime_ns
    again = build_model("resnet50", "tiny", "fp32", tmp_path)
    assert again == first and again.stat().st_mtime_ns == mtime
    assert cache_key("resnet50", "tiny", "fp32") != cache_key("resnet50", "tiny", "fp16")
    assert cache_key("resnet50", "tiny", "fp32")[:16] in first.name
    # Same seed, same bytes: a rebuild elsewhere is identical.
    other = build_model("resnet50", "tiny", "fp32", tmp_path / "elsewhere")
    assert other.read_bytes() == first.read_bytes()
    assert list(tmp_path.glob("*.tmp")) == []


def test_unknown_model_and_variant_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown model"):
        build_model("gpt", "tiny", "fp32", tmp_path)
    with pytest.raises(ValueError, match="variant 'huge'"):
        build_model("bert", "huge", "fp32", tmp_path)


def test_user_model_io_is_read_from_the_file(tmp_path: Path) -> None:
    from onnx import TensorProto, helper

    node = helper.make_node("Relu", ["pixels"], ["scores"])
    graph = helper.make_graph(
        [node], "user",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 4])])
    path = tmp_path / "user.onnx"
    onnx.save(helper.make_model(graph), str(path))
    io = read_model_io(path)
    assert io.input_names == ("pixels",)
    assert io.inputs[0].batched and io.inputs[0].sample_shape == (4,)
