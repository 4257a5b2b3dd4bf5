"""The accuracy gate of the token workload: the engine's greedy tokens for the first
``samples`` prompts must equal, token for token, those of the fp32 numpy reference, which
recomputes the whole sequence at every step without a KV cache. The value is the share of
prompts whose every token agrees; weights come from the seed, so a changed weight in the
served model fails the gate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from loadgen.contract import AccuracySpec, LlmSpec
from loadgen.llm.engines import TokenGenerator
from loadgen.llm_sizes import VARIANTS
from loadgen.models.decoder import decoder_weights, reference_generate

METRIC = "exact_token_match"
LABELS_FROM = "fp32 numpy reference without KV cache (seeded weights)"


def reference_tokens(prompts: list[np.ndarray], max_new: int, variant: str,
                     weight_seed: int) -> list[list[int]]:
    cfg = VARIANTS[variant]
    weights = decoder_weights(cfg, weight_seed)
    return [reference_generate(p, max_new, weights, cfg) for p in prompts]


def accuracy_log(answers: list[list[int]]) -> list[dict[str, Any]]:
    """The answers in LoadGen's mlperf_log_accuracy.json form: per sample its index and its
    token ids as little-endian int32, hex-encoded (what an MLPerf LLM SUT returns)."""
    return [{"seq_id": i, "qsl_idx": i, "data": np.asarray(tokens, "<i4").tobytes().hex()}
            for i, tokens in enumerate(answers)]


def run_token_gate(generator: TokenGenerator, prompts: list[np.ndarray], llm: LlmSpec,
                   accuracy: AccuracySpec, variant: str, weight_seed: int,
                   log_path: Path | None = None) -> dict[str, Any]:
    """The gate's record; with ``log_path`` the answers are written there as LoadGen's
    accuracy log."""
    chosen = prompts[: accuracy.samples]
    expected = reference_tokens(chosen, llm.max_output_tokens, variant, weight_seed)
    got = [generator.generate(p, llm.max_output_tokens) for p in chosen]
    if log_path is not None:
        log_path.write_text(json.dumps(accuracy_log(got), indent=0) + "\n")
    matches = [g == e for g, e in zip(got, expected, strict=True)]
    value = float(np.mean(matches)) if matches else 0.0
    first_mismatch = next((i for i, ok in enumerate(matches) if not ok), None)
    return {"metric": METRIC, "value": value, "target": accuracy.target,
            "samples": len(chosen), "passed": value >= accuracy.target,
            "labels_from": LABELS_FROM, "first_mismatch_sample": first_mismatch}
