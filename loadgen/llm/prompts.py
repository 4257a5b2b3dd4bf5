"""The samples of the token workload: seeded prompts of token ids, their lengths drawn
uniformly from the spec's input_tokens range. Sample ``i`` is the same for a seed on every
host, so any two runs answer the same questions."""

from __future__ import annotations

import numpy as np

from loadgen.contract import LlmSpec

# Warm-up prompts come from their own random stream, apart from every sample index.
WARMUP_STREAM = 2**32 - 1


def make_prompt(seed: int, index: int, llm: LlmSpec, vocab_size: int) -> np.ndarray:
    rng = np.random.default_rng([seed, index])
    length = int(rng.integers(llm.input_tokens_min, llm.input_tokens_max + 1))
    return rng.integers(0, vocab_size, size=length, dtype=np.int64)


def make_prompts(seed: int, count: int, llm: LlmSpec, vocab_size: int) -> list[np.ndarray]:
    return [make_prompt(seed, i, llm, vocab_size) for i in range(count)]


def warmup_prompt(seed: int, llm: LlmSpec, vocab_size: int) -> np.ndarray:
    return make_prompt(seed, WARMUP_STREAM, llm, vocab_size)
