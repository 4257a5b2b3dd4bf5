"""The small Prometheus ``/metrics`` of vgpu's loopback server and slice simulator, in
vLLM's names where vLLM has one (so one reader serves both): KV blocks in use (16 tokens a
block, as vLLM's default), their peak since the server started, the pool's size and usage
where the server has a pool, and the prefix-cache counters (these servers cache no
prefix: every queried prompt token is a miss)."""

from __future__ import annotations

import threading

from loadgen.llm.engine_info import (
    KV_BLOCKS_PEAK,
    KV_BLOCKS_TOTAL,
    KV_BLOCKS_USED,
    KV_PEAK,
    KV_USAGE,
)

BLOCK_TOKENS = 16


def blocks(tokens: int) -> int:
    return -(-tokens // BLOCK_TOKENS)


class KvAccount:
    """KV tokens held by the sequences a server is answering, thread-safe."""

    def __init__(self, pool_tokens: int | None = None) -> None:
        self.pool_tokens = pool_tokens
        self._lock = threading.Lock()
        self.used = 0
        self.peak = 0
        self.prompt_tokens = 0

    def queried(self, prompt_tokens: int) -> None:
        """A prompt asked for (a prefix-cache query, and a miss)."""
        with self._lock:
            self.prompt_tokens += prompt_tokens

    def admit(self, prompt_tokens: int) -> None:
        """A prompt queried and held while its answer streams."""
        with self._lock:
            self.prompt_tokens += prompt_tokens
            self._add(prompt_tokens)

    def grow(self, tokens: int = 1) -> None:
        with self._lock:
            self._add(tokens)

    def release(self, tokens: int) -> None:
        with self._lock:
            self.used -= tokens

    def set_used(self, tokens: int) -> None:
        """An engine that keeps its own count (the slice simulator's pool)."""
        with self._lock:
            self.used = tokens
            self.peak = max(self.peak, tokens)

    def _add(self, tokens: int) -> None:
        self.used += tokens
        self.peak = max(self.peak, self.used)

    def exposition(self) -> str:
        with self._lock:
            used, peak, prompts = self.used, self.peak, self.prompt_tokens
        lines = [f"{KV_BLOCKS_USED} {blocks(used)}", f"{KV_BLOCKS_PEAK} {blocks(peak)}",
                 "vllm:prefix_cache_hits_total 0",
                 f"vllm:prefix_cache_queries_total {prompts}"]
        if self.pool_tokens:
            total = blocks(self.pool_tokens)
            lines += [f"{KV_BLOCKS_TOTAL} {total}",
                      f"{KV_USAGE[0]} {blocks(used) / total:.6f}",
                      f"{KV_PEAK} {blocks(peak) / total:.6f}"]
        return "\n".join(lines) + "\n"
