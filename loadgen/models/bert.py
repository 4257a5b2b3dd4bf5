"""BERT encoder with the SQuAD question-answering head, as MLPerf's BERT inference model:
int64 inputs input_ids, input_mask, segment_ids [batch, seq]; outputs start_logits and
end_logits [batch, seq]. Post-LayerNorm transformer layers with GELU (erf) feed-forward."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

from loadgen.contract import INPUT_NAMES as CONTRACT_INPUT_NAMES
from loadgen.models.graph import GraphBuilder

INPUT_NAMES = CONTRACT_INPUT_NAMES["bert"]
OUTPUT_NAMES = ("start_logits", "end_logits")
INIT_STD = 0.02
MASKED_SCORE = -10000.0


@dataclass(frozen=True)
class BertConfig:
    layers: int
    hidden: int
    heads: int
    intermediate: int
    seq_len: int
    vocab_size: int
    max_positions: int = 512
    type_vocab_size: int = 2


VARIANTS = {
    "large": BertConfig(layers=24, hidden=1024, heads=16, intermediate=4096, seq_len=384,
                        vocab_size=30522),
    "base": BertConfig(layers=12, hidden=768, heads=12, intermediate=3072, seq_len=384,
                       vocab_size=30522),
    "tiny": BertConfig(layers=2, hidden=128, heads=2, intermediate=512, seq_len=128,
                       vocab_size=1024),
}


def _dense(g: GraphBuilder, x: str, n_in: int, n_out: int) -> str:
    w = g.weight("dense_w", (n_in, n_out), INIT_STD)
    b = g.weight("dense_b", (n_out,), INIT_STD)
    return g.op("Add", g.op("MatMul", x, w), b)


def _layer_norm(g: GraphBuilder, x: str, hidden: int) -> str:
    gamma = g.const(np.ones(hidden, dtype=g.dtype), "ln_gamma")
    beta = g.const(np.zeros(hidden, dtype=g.dtype), "ln_beta")
    return g.op("LayerNormalization", x, gamma, beta, axis=-1, epsilon=1e-12)


def _gelu(g: GraphBuilder, x: str) -> str:
    erf = g.op("Erf", g.op("Mul", x, g.scalar(1.0 / math.sqrt(2.0))))
    return g.op("Mul", g.op("Mul", x, g.scalar(0.5)), g.op("Add", erf, g.scalar(1.0)))


def _heads(g: GraphBuilder, x: str, cfg: BertConfig, perm: list[int]) -> str:
    shape = g.const(np.array([0, 0, cfg.heads, cfg.hidden // cfg.heads], dtype=np.int64), "shape")
    return g.op("Transpose", g.op("Reshape", x, shape), perm=perm)


def _encoder_layer(g: GraphBuilder, x: str, mask_bias: str, cfg: BertConfig) -> str:
    h = cfg.hidden
    q = _heads(g, _dense(g, x, h, h), cfg, [0, 2, 1, 3])
    k = _heads(g, _dense(g, x, h, h), cfg, [0, 2, 3, 1])
    v = _heads(g, _dense(g, x, h, h), cfg, [0, 2, 1, 3])
    scale = g.scalar(1.0 / math.sqrt(h // cfg.heads))
    scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), mask_bias)
    context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
    merged = g.op(
        "Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]),
        g.const(np.array([0, 0, h], dtype=np.int64), "shape"),
    )
    x = _layer_norm(g, g.op("Add", x, _dense(g, merged, h, h)), h)
    ffn = _dense(g, _gelu(g, _dense(g, x, h, cfg.intermediate)), cfg.intermediate, h)
    return _layer_norm(g, g.op("Add", x, ffn), h)


def build_bert(variant: str, dtype: np.dtype, seed: int) -> onnx.ModelProto:
    cfg = VARIANTS[variant]
    g = GraphBuilder(seed, dtype)
    ids, mask, segments = INPUT_NAMES
    words = g.op("Gather", g.weight("word_emb", (cfg.vocab_size, cfg.hidden), INIT_STD), ids)
    positions = g.op(
        "Gather",
        g.weight("pos_emb", (cfg.max_positions, cfg.hidden), INIT_STD),
        g.const(np.arange(cfg.seq_len, dtype=np.int64), "positions"),
    )
    types = g.op(
        "Gather", g.weight("type_emb", (cfg.type_vocab_size, cfg.hidden), INIT_STD), segments
    )
    x = _layer_norm(g, g.op("Add", g.op("Add", words, positions), types), cfg.hidden)
    # (1 - mask) * -10000, shaped [batch, 1, 1, seq] to broadcast over heads and queries.
    not_mask = g.op("Sub", g.scalar(1.0), g.op("Cast", mask, to=g.onnx_dtype))
    mask_bias = g.op(
        "Unsqueeze", g.op("Mul", not_mask, g.scalar(MASKED_SCORE)),
        g.const(np.array([1, 2], dtype=np.int64), "axes"),
    )
    for _ in range(cfg.layers):
        x = _encoder_layer(g, x, mask_bias, cfg)
    start, end = g.node("Split", [_dense(g, x, cfg.hidden, 2)], outputs=2, axis=-1)
    last_axis = g.const(np.array([-1], dtype=np.int64), "axes")
    g.op_named("Squeeze", [start, last_axis], OUTPUT_NAMES[0])
    g.op_named("Squeeze", [end, last_axis], OUTPUT_NAMES[1])
    dims = ["batch", cfg.seq_len]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in INPUT_NAMES]
    outputs = [helper.make_tensor_value_info(n, g.onnx_dtype, dims) for n in OUTPUT_NAMES]
    return g.model(
        f"bert_{variant}", inputs, outputs,
        {"vgpu.model": "bert", "vgpu.variant": variant, "vgpu.vocab_size": str(cfg.vocab_size)},
    )
