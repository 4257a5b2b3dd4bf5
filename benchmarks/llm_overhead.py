"""Overhead of the LLM token workload's SUTs on the tiny decoder, side by side in one run:

1. a raw generate loop: greedy decoding with the KV cache on ONNX Runtime, one prompt after
   another (no LoadGen, no SUT),
2. LoadGen Offline through the harness's in-process SUT (FirstTokenComplete at the first
   token, QuerySamplesComplete with the token count),
3. LoadGen Offline through the HTTP-streaming SUT (backend openai) against vgpu's loopback
   OpenAI-compatible server, which runs the same ONNX model in its own process.

Every prompt has the same length, every answer the same number of tokens, so tokens/s are
comparable. The rounds alternate 1, 2, 3 and each figure is the median over the rounds.
Prints output tokens/s and the ratios 2/1 (goal >= 0.97) and 3/2 (goal >= 0.90), and the
HTTP path's cost per token in microseconds: what it adds to a model of any size (a llama 8B
on a GPU takes ~10 ms per token; the tiny decoder ~0.1 ms).

    .venv/bin/python benchmarks/llm_overhead.py [--seconds 4] [--rounds 3] [--tokens 32]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loadgen.contract import LlmSpec  # noqa: E402
from loadgen.llm.engines import OrtGenerator  # noqa: E402
from loadgen.llm.prompts import make_prompts  # noqa: E402
from loadgen.llm_sizes import VARIANTS  # noqa: E402
from loadgen.models import build_model  # noqa: E402
from loadgen.runner import run  # noqa: E402
from loadgen.spec import parse_spec  # noqa: E402

PROMPTS = 64
PROMPT_TOKENS = 32


def raw_loop(model: Path, llm: LlmSpec, seconds: float) -> tuple[float, int]:
    """Output tokens/s of a plain loop over the same prompts the SUT gets, and its CPU
    microseconds per token."""
    generator = OrtGenerator(str(model), "tiny", 1)
    prompts = make_prompts(0, PROMPTS, llm, VARIANTS["tiny"].vocab_size)
    for prompt in prompts[:4]:
        generator.generate(prompt, llm.max_output_tokens)
    tokens, started, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - started < seconds:
        for prompt in prompts:
            tokens += len(generator.generate(prompt, llm.max_output_tokens))
    cpu_us = (time.process_time() - cpu) / tokens * 1e6
    return tokens / (time.perf_counter() - started), cpu_us


def loadgen_run(cache: Path, llm: LlmSpec, seconds: float, backend: str,
                out: Path) -> tuple[float, float]:
    """LoadGen's output tokens/s and CPU microseconds per token during the timed part: the
    harness process's, plus (HTTP) the loopback server's."""
    doc: dict[str, Any] = {
        "schema_version": 1, "model": {"name": "llm", "variant": "tiny"},
        "backend": {"name": backend, "threads": 1},
        "loadgen": {"scenario": "Offline", "min_duration_ms": round(seconds * 1000),
                    "performance_sample_count": PROMPTS},
        "warmup_queries": 4, "cache_dir": str(cache), "llm": llm.to_json()}
    record = run(parse_spec(doc), out)
    if record["status"] != "ok":
        raise SystemExit(f"{backend} run failed: {record['reason']}")
    tokens = int(record["tokens"]["output_tokens"])
    timed = record["telemetry"]["host"]["process_cpu_seconds_timed"]
    timed += record["sut"].get("loopback_server_cpu_seconds", 0.0)
    return float(record["tokens"]["output_token_throughput"]), timed / tokens * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=32, help="output tokens per prompt")
    args = parser.parse_args()
    llm = LlmSpec(max_output_tokens=args.tokens, input_tokens_min=PROMPT_TOKENS,
                  input_tokens_max=PROMPT_TOKENS)
    rates: dict[str, list[float]] = {"raw": [], "sut": [], "http": []}
    cpu_us: dict[str, list[float]] = {"raw": [], "sut": [], "http": []}
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "models"
        model = build_model("llm", "tiny", "fp32", cache)
        for n in range(args.rounds):
            runs = {"raw": lambda: raw_loop(model, llm, args.seconds),
                    "sut": lambda: loadgen_run(cache, llm, args.seconds, "onnxruntime",
                                               Path(tmp) / f"sut{n}"),  # noqa: B023
                    "http": lambda: loadgen_run(cache, llm, args.seconds, "openai",
                                                Path(tmp) / f"http{n}")}  # noqa: B023
            for name, measure in runs.items():
                rate, per_token = measure()
                rates[name].append(rate)
                cpu_us[name].append(per_token)
            print(f"round {n + 1}: " + ", ".join(f"{k} {v[-1]:,.0f}" for k, v in rates.items()),
                  flush=True)
    raw, sut, http = (statistics.median(rates[k]) for k in ("raw", "sut", "http"))
    print(f"\noutput tokens/s (median of {args.rounds} rounds, {args.tokens} tokens per "
          f"{PROMPT_TOKENS}-token prompt, 1 intra-op thread):")
    cpu = {k: statistics.median(v) for k, v in cpu_us.items()}
    print(f"  1 raw generate loop          {raw:10,.0f}   CPU {cpu['raw']:6.0f} us/token")
    print(f"  2 LoadGen SUT, in-process    {sut:10,.0f}   CPU {cpu['sut']:6.0f} us/token")
    print(f"  3 LoadGen SUT, HTTP + SSE    {http:10,.0f}   CPU {cpu['http']:6.0f} us/token "
          "(both processes)")
    print(f"ratio 2/1 (LoadGen SUT vs raw loop):      {sut / raw:.3f}  (goal >= 0.97)")
    print(f"ratio 3/2 (HTTP streaming vs in-process): {http / sut:.3f}  (goal >= 0.90)")
    added_us = (1 / http - 1 / sut) * 1e6
    print(f"HTTP streaming adds {added_us:.0f} us per token; at 10 ms per token (an 8B "
          f"model on a GPU) that is a ratio of {10_000 / (10_000 + added_us):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
