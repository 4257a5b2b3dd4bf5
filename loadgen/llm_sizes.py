"""Decoder sizes and their memory arithmetic: weights plus the KV cache of the largest
batch at full context. Standard library only, so that vgpu's planner imports it."""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3
BYTES_PER_VALUE = {"fp32": 4, "fp16": 2}
# CUDA context, activations and the allocator's slack: the share of the slice's memory a
# serving engine cannot give to weights and KV cache (vLLM's default gpu_memory_utilization
# is 0.9).
RESERVED_SHARE = 0.10


@dataclass(frozen=True)
class DecoderConfig:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab_size: int
    max_positions: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def parameter_count(self) -> int:
        kv = self.kv_heads * self.head_dim
        attention = 2 * self.hidden * self.hidden + 2 * self.hidden * kv
        per_layer = attention + 3 * self.hidden * self.intermediate + 2 * self.hidden
        embeddings = 2 * self.vocab_size * self.hidden + self.max_positions * self.hidden
        return self.layers * per_layer + embeddings + self.hidden

    def kv_bytes_per_token(self, bytes_per_value: int) -> int:
        """Key and value of every layer for one token of one sequence."""
        return 2 * self.layers * self.kv_heads * self.head_dim * bytes_per_value


# tiny runs here on a CPU core; 8b and 70b are llama-3.1-sized declarations for the memory
# arithmetic and a serving endpoint: they are never built as ONNX files.
VARIANTS: dict[str, DecoderConfig] = {
    "tiny": DecoderConfig(layers=2, hidden=64, heads=4, kv_heads=4, intermediate=128,
                          vocab_size=512, max_positions=256),
    "8b": DecoderConfig(layers=32, hidden=4096, heads=32, kv_heads=8, intermediate=14336,
                        vocab_size=128256, max_positions=8192),
    "70b": DecoderConfig(layers=80, hidden=8192, heads=64, kv_heads=8, intermediate=28672,
                         vocab_size=128256, max_positions=8192),
}


@dataclass(frozen=True)
class MemoryEstimate:
    variant: str
    precision: str
    batch: int
    context_tokens: int
    weights_bytes: int
    kv_cache_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.weights_bytes + self.kv_cache_bytes

    def fits(self, memory_gib: float) -> bool:
        return self.total_bytes <= memory_gib * GIB * (1 - RESERVED_SHARE)

    def arithmetic(self) -> str:
        """The sum, written out: what a plan line and a refusal show."""
        cfg = VARIANTS[self.variant]
        size = BYTES_PER_VALUE[self.precision]
        return (f"weights {_count(cfg.parameter_count())} params x {size} B = "
                f"{_bytes(self.weights_bytes)} + KV cache {self.batch} seq x "
                f"{self.context_tokens} tokens x {_bytes(cfg.kv_bytes_per_token(size))} = "
                f"{_bytes(self.kv_cache_bytes)}; total {_bytes(self.total_bytes)}")


def _count(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.2f} M"


def _bytes(n: int) -> str:
    for unit, size in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


def estimate(variant: str, precision: str, batch: int, context_tokens: int) -> MemoryEstimate:
    cfg = VARIANTS[variant]
    size = BYTES_PER_VALUE[precision]
    return MemoryEstimate(variant, precision, batch, context_tokens,
                          cfg.parameter_count() * size,
                          batch * context_tokens * cfg.kv_bytes_per_token(size))
