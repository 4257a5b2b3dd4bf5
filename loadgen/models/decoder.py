"""A decoder-only language model (pre-RMSNorm, causal attention with a KV cache, SwiGLU
feed-forward, learned positions) with seeded random weights, taking and returning token
ids as MLPerf's LLM benchmarks do: no tokenizer and no download.

One ONNX graph serves prefill and decode: inputs ``input_ids`` [batch, new] and, per layer,
``past_key_<i>`` / ``past_value_<i>`` [batch, heads, past, head_dim] (past 0 on prefill);
outputs ``next_token`` [batch] (greedy: the arg max of the last position's logits),
``logits`` [batch, vocab] and ``present_key_<i>`` / ``present_value_<i>``.
``reference_generate`` is the fp32 numpy reference: the whole sequence again at every
step, without a cache, for the exact-agreement accuracy gate."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper

from loadgen.llm_sizes import VARIANTS, DecoderConfig
from loadgen.models.graph import GraphBuilder

INIT_STD = 0.08
LM_HEAD_STD = 0.5  # wide logits: greedy picks are far from ties, so fp32 paths agree
NORM_EPS = 1e-5
MASKED_SCORE = -1e9
INPUT_NAME = "input_ids"
TOKEN_OUTPUT = "next_token"
LOGITS_OUTPUT = "logits"


BUILDABLE = ("tiny",)


def past_names(layers: int) -> list[str]:
    return [f"past_{kind}_{i}" for i in range(layers) for kind in ("key", "value")]


def present_names(layers: int) -> list[str]:
    return [f"present_{kind}_{i}" for i in range(layers) for kind in ("key", "value")]


def decoder_weights(cfg: DecoderConfig, seed: int) -> dict[str, np.ndarray]:
    """Every weight, drawn in a fixed order from one seeded generator (fp32)."""
    rng = np.random.default_rng(seed)

    def draw(shape: tuple[int, ...], std: float = INIT_STD) -> np.ndarray:
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std))

    kv = cfg.kv_heads * cfg.head_dim
    w: dict[str, np.ndarray] = {"embed": draw((cfg.vocab_size, cfg.hidden), 1.0),
                                "positions": draw((cfg.max_positions, cfg.hidden), 0.5)}
    for i in range(cfg.layers):
        w |= {f"l{i}.attn_norm": np.ones(cfg.hidden, np.float32),
              f"l{i}.wq": draw((cfg.hidden, cfg.hidden)),
              f"l{i}.wk": draw((cfg.hidden, kv)),
              f"l{i}.wv": draw((cfg.hidden, kv)),
              f"l{i}.wo": draw((cfg.hidden, cfg.hidden)),
              f"l{i}.mlp_norm": np.ones(cfg.hidden, np.float32),
              f"l{i}.gate": draw((cfg.hidden, cfg.intermediate)),
              f"l{i}.up": draw((cfg.hidden, cfg.intermediate)),
              f"l{i}.down": draw((cfg.intermediate, cfg.hidden))}
    w["final_norm"] = np.ones(cfg.hidden, np.float32)
    w["lm_head"] = draw((cfg.hidden, cfg.vocab_size), LM_HEAD_STD)
    return w


# --- the ONNX graph -------------------------------------------------------------------


def _ints(g: GraphBuilder, values: list[int], hint: str = "ints") -> str:
    return g.const(np.array(values, dtype=np.int64), hint)


def _rms_norm(g: GraphBuilder, x: str, weight: str) -> str:
    mean_square = g.op("ReduceMean", g.op("Mul", x, x), axes=[-1], keepdims=1)
    scale = g.op("Sqrt", g.op("Add", mean_square, g.scalar(NORM_EPS)))
    return g.op("Mul", g.op("Div", x, scale), weight)


def _split_heads(g: GraphBuilder, x: str, heads: int, head_dim: int) -> str:
    shaped = g.op("Reshape", x, _ints(g, [0, 0, heads, head_dim], "shape"))
    return g.op("Transpose", shaped, perm=[0, 2, 1, 3])


def _repeat_kv(g: GraphBuilder, x: str, cfg: DecoderConfig) -> str:
    """Grouped-query attention: each key/value head serves heads // kv_heads query heads."""
    groups = cfg.heads // cfg.kv_heads
    if groups == 1:
        return x
    return g.op("Concat", *([x] * groups), axis=1)


def _attention(g: GraphBuilder, x: str, w: dict[str, str], i: int, cfg: DecoderConfig,
               mask_bias: str) -> str:
    q = _split_heads(g, g.op("MatMul", x, w[f"l{i}.wq"]), cfg.heads, cfg.head_dim)
    k_new = _split_heads(g, g.op("MatMul", x, w[f"l{i}.wk"]), cfg.kv_heads, cfg.head_dim)
    v_new = _split_heads(g, g.op("MatMul", x, w[f"l{i}.wv"]), cfg.kv_heads, cfg.head_dim)
    k = g.op_named("Concat", [f"past_key_{i}", k_new], f"present_key_{i}", axis=2)
    v = g.op_named("Concat", [f"past_value_{i}", v_new], f"present_value_{i}", axis=2)
    k_t = g.op("Transpose", _repeat_kv(g, k, cfg), perm=[0, 1, 3, 2])
    scores = g.op("Mul", g.op("MatMul", q, k_t), g.scalar(1.0 / math.sqrt(cfg.head_dim)))
    probs = g.op("Softmax", g.op("Add", scores, mask_bias), axis=-1)
    context = g.op("MatMul", probs, _repeat_kv(g, v, cfg))
    merged = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]),
                  _ints(g, [0, 0, cfg.hidden], "shape"))
    return g.op("MatMul", merged, w[f"l{i}.wo"])


def _mlp(g: GraphBuilder, x: str, w: dict[str, str], i: int) -> str:
    gate = g.op("MatMul", x, w[f"l{i}.gate"])
    silu = g.op("Mul", gate, g.op("Sigmoid", gate))
    return g.op("MatMul", g.op("Mul", silu, g.op("MatMul", x, w[f"l{i}.up"])), w[f"l{i}.down"])


def _scalar_dim(g: GraphBuilder, tensor: str, axis: int) -> str:
    dim = g.op("Shape", tensor, start=axis, end=axis + 1)
    return g.op("Squeeze", dim)


def _positions_and_mask(g: GraphBuilder) -> tuple[str, str, str]:
    """New tokens' positions (past .. past + new), the causal mask bias [new, past + new]
    and the index of the last new token."""
    past = _scalar_dim(g, "past_key_0", 2)
    new = _scalar_dim(g, INPUT_NAME, 1)
    total = g.op("Add", past, new)
    # GraphBuilder.const stores 0-d arrays as [1]; Range and Gather need true scalars.
    one = g.op("Squeeze", _ints(g, [1], "one"))
    zero = g.op("Squeeze", _ints(g, [0], "zero"))
    query_pos = g.op("Range", past, total, one)
    key_pos = g.op("Range", zero, total, one)
    future = g.op("Greater", g.op("Unsqueeze", key_pos, _ints(g, [0], "axes")),
                  g.op("Unsqueeze", query_pos, _ints(g, [1], "axes")))
    mask_bias = g.op("Where", future, g.scalar(MASKED_SCORE), g.scalar(0.0))
    return query_pos, mask_bias, g.op("Sub", new, one)


def build_decoder(variant: str, dtype: np.dtype, seed: int) -> onnx.ModelProto:
    cfg = VARIANTS[variant]
    if variant not in BUILDABLE:
        raise ValueError(f"llm variant {variant!r} is declared for the memory arithmetic and "
                         f"a serving endpoint; only {', '.join(BUILDABLE)} is built as ONNX")
    g = GraphBuilder(seed, dtype)
    w = {name: g.const(value.astype(g.dtype), name.replace(".", "_"))
         for name, value in decoder_weights(cfg, seed).items()}
    query_pos, mask_bias, last = _positions_and_mask(g)
    x = g.op("Add", g.op("Gather", w["embed"], INPUT_NAME), g.op("Gather", w["positions"],
                                                                   query_pos))
    for i in range(cfg.layers):
        x = g.op("Add", x, _attention(g, _rms_norm(g, x, w[f"l{i}.attn_norm"]), w, i, cfg,
                                      mask_bias))
        x = g.op("Add", x, _mlp(g, _rms_norm(g, x, w[f"l{i}.mlp_norm"]), w, i))
    last_hidden = g.op("Gather", _rms_norm(g, x, w["final_norm"]), last, axis=1)
    logits = g.op_named("MatMul", [last_hidden, w["lm_head"]], LOGITS_OUTPUT)
    g.op_named("ArgMax", [logits], TOKEN_OUTPUT, axis=-1, keepdims=0)
    kv_shape = ["batch", cfg.kv_heads, "past", cfg.head_dim]
    present_shape = ["batch", cfg.kv_heads, "total", cfg.head_dim]
    inputs = [helper.make_tensor_value_info(INPUT_NAME, TensorProto.INT64, ["batch", "new"])]
    inputs += [helper.make_tensor_value_info(n, g.onnx_dtype, kv_shape)
               for n in past_names(cfg.layers)]
    outputs = [helper.make_tensor_value_info(TOKEN_OUTPUT, TensorProto.INT64, ["batch"]),
               helper.make_tensor_value_info(LOGITS_OUTPUT, g.onnx_dtype,
                                             ["batch", cfg.vocab_size])]
    outputs += [helper.make_tensor_value_info(n, g.onnx_dtype, present_shape)
                for n in present_names(cfg.layers)]
    return g.model(f"llm_{variant}", inputs, outputs,
                   {"vgpu.model": "llm", "vgpu.variant": variant,
                    "vgpu.vocab_size": str(cfg.vocab_size), "vgpu.layers": str(cfg.layers)})


# --- the fp32 numpy reference ---------------------------------------------------------


def _np_rms(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + NORM_EPS) * weight


def _np_softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _np_attention(x: np.ndarray, w: dict[str, np.ndarray], i: int,
                  cfg: DecoderConfig) -> np.ndarray:
    n = x.shape[0]

    def heads(y: np.ndarray, count: int) -> np.ndarray:
        return y.reshape(n, count, cfg.head_dim).transpose(1, 0, 2)

    groups = cfg.heads // cfg.kv_heads
    q = heads(x @ w[f"l{i}.wq"], cfg.heads)
    k = np.concatenate([heads(x @ w[f"l{i}.wk"], cfg.kv_heads)] * groups)
    v = np.concatenate([heads(x @ w[f"l{i}.wv"], cfg.kv_heads)] * groups)
    scores = q @ k.transpose(0, 2, 1) / np.float32(math.sqrt(cfg.head_dim))
    scores = scores + np.triu(np.full((n, n), MASKED_SCORE, np.float32), 1)
    context = _np_softmax(scores) @ v
    return context.transpose(1, 0, 2).reshape(n, cfg.hidden) @ w[f"l{i}.wo"]


def reference_logits(tokens: np.ndarray, w: dict[str, np.ndarray],
                     cfg: DecoderConfig) -> np.ndarray:
    """The last position's logits for one sequence, computed over the whole sequence."""
    x = w["embed"][tokens] + w["positions"][: len(tokens)]
    for i in range(cfg.layers):
        x = x + _np_attention(_np_rms(x, w[f"l{i}.attn_norm"]), w, i, cfg)
        h = _np_rms(x, w[f"l{i}.mlp_norm"])
        gate = h @ w[f"l{i}.gate"]
        x = x + (gate / (1 + np.exp(-gate)) * (h @ w[f"l{i}.up"])) @ w[f"l{i}.down"]
    return _np_rms(x[-1], w["final_norm"]) @ w["lm_head"]


def reference_generate(prompt: np.ndarray, max_new: int, w: dict[str, np.ndarray],
                       cfg: DecoderConfig) -> list[int]:
    """Greedy generation without a cache: the fp32 reference of the accuracy gate."""
    tokens = [int(t) for t in prompt]
    out: list[int] = []
    for _ in range(max_new):
        out.append(int(np.argmax(reference_logits(np.asarray(tokens), w, cfg))))
        tokens.append(out[-1])
    return out
