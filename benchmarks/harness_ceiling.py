"""The harness's own ceiling: how many samples per second LoadGen, the SUT's batching,
sample gathering and the completion path can carry when inference costs nothing.

Each workload runs the whole harness (``run_sample_model``: samples preloaded, handed to
the backend, warm-up, telemetry, LoadGen Offline, the record) around a backend that keeps
the samples as a GPU backend does and completes each batch from a waiter thread at once
(loadgen/backends/null.py), pinned to one CPU core. The rates are printed as ratios to
the best published per-GPU MLPerf Offline rate on an H200 (TensorRT, INT8: ResNet50 about
94,600 samples/s, BERT-99 about 9,160): the goal is at least 2, so that the harness is
never what a GPU run measures. The token workload's SUT is timed the same way around a
generator that streams its tokens at once, in process and through the HTTP streaming
client (backend openai) against vgpu's completions server answering at once from another
process on another core: output tokens per second the client can time, and the client's
CPU per token (on one core, 1 / that is its ceiling whatever the server's speed).

    python benchmarks/harness_ceiling.py [--seconds 5] [--cores 1] [--workload all]
        [--host-gather] [--json FILE]

Exit 0 when every goal is met, 1 when one is missed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from loadgen.backends.null import NullBackend  # noqa: E402
from loadgen.models import ModelIO  # noqa: E402
from loadgen.spec import Spec, parse_spec  # noqa: E402

# Best published per-GPU MLPerf Inference Offline rates on one H200 (TensorRT, INT8).
PUBLISHED_H200 = {"resnet50": 94_600.0, "bert": 9_160.0}
GOAL_RATIO = 2.0
# A streaming LLM server on one H200 (llama-class models, MLPerf Offline) emits some
# thousands of tokens/s; the client must time many times that.
LLM_TOKENS_REFERENCE = 30_000.0
BATCHES = {"resnet50": 64, "bert": 8}  # the main job's Offline workloads
VARIANTS = {"resnet50": "full", "bert": "large"}  # the published benchmarks' sizes
PERFORMANCE_SAMPLES = 256


@dataclass(frozen=True)
class Ceiling:
    workload: str
    batch: int
    samples_per_second: float
    reference: float
    ratio: float
    cpu_seconds_per_sample: float
    samples: int
    status: str


def pin_to_cores(cores: int) -> list[int]:
    """This process (and the threads it starts) on its first ``cores`` allowed CPUs (0:
    left where it is)."""
    allowed = sorted(os.sched_getaffinity(0))
    if cores <= 0:
        return allowed
    chosen = allowed[:cores]
    os.sched_setaffinity(0, chosen)
    return chosen


def sample_spec(workload: str, batch: int, seconds: float, expected: float,
                work: Path) -> Spec:
    doc = {
        "schema_version": 1,
        "model": {"name": workload, "variant": VARIANTS[workload], "precision": "fp32"},
        # backend torch needs no ONNX file: its model I/O is built in (the null backend
        # replaces it, so torch is never imported)
        "backend": {"name": "torch", "threads": 1},
        "device": {"kind": "cpu"},
        "loadgen": {"scenario": "Offline", "mode": "PerformanceOnly",
                    "min_duration_ms": int(seconds * 1000), "min_query_count": 1,
                    "target_qps": expected, "performance_sample_count": PERFORMANCE_SAMPLES},
        "batch_size": batch, "seed": 0, "warmup_queries": 2,
        "cache_dir": str(work / "cache"),
    }
    return parse_spec(doc, "harness_ceiling", work)


def run_null(spec: Spec, work: Path, host_gather: bool = False) -> dict[str, Any]:
    """One harness run around the null backend; with ``host_gather`` the backend does not
    keep the samples, so every batch is gathered into new arrays on the host (what a
    backend fed from host memory costs)."""
    from loadgen.sample_run import run_sample_model

    def open_null(_spec: Spec, _path: Path | None, model_io: ModelIO) -> NullBackend:
        return NullBackend(list(model_io.outputs), keeps=not host_gather)

    record = run_sample_model(spec, tempfile.mkdtemp(dir=work), open_backend=open_null)
    if record["status"] != "ok":
        raise SystemExit(f"harness run failed: {record.get('reason')}")
    return record


def measure_workload(workload: str, batch: int, seconds: float, work: Path,
                     host_gather: bool = False) -> Ceiling:
    # A short run sizes the Offline query so that the measured one lasts ``seconds``.
    probe = run_null(sample_spec(workload, batch, 0.5, 200_000.0, work), work, host_gather)
    rate = float(probe["throughput"]["samples_per_second"])
    record = run_null(sample_spec(workload, batch, seconds, rate, work), work, host_gather)
    rate = float(record["throughput"]["samples_per_second"])
    cpu = record["telemetry"]["host"]["process_cpu_seconds_timed"]
    samples = int(record["sample_count"])
    reference = PUBLISHED_H200[workload]
    ratio = rate / reference
    name = f"{workload} (host gather)" if host_gather else workload
    status = "no goal" if host_gather else "met" if ratio >= GOAL_RATIO else "missed"
    return Ceiling(name, batch, rate, reference, ratio, cpu / samples, samples, status)


class InstantGenerator:
    """Streams ``max_new`` tokens at once, one arrival each, as a server's stream would."""

    name = "instant"

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency

    def generate(self, prompt: np.ndarray, max_new: int,
                 on_first: Callable[[int], None] | None = None,
                 on_tokens: Callable[[int], None] | None = None) -> list[int]:
        tokens = list(range(1, max_new + 1))
        if on_first is not None:
            on_first(tokens[0])
        if on_tokens is not None:
            for _ in tokens:
                on_tokens(1)
        return tokens

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "concurrency": self.concurrency}

    def close(self) -> None:
        return None


def serve_instant() -> int:
    """vgpu's completions server around the instant generator (``--serve-instant``)."""
    from loadgen.llm.server import READY_LINE, CompletionServer

    class Instant:
        def stream(self, prompt: np.ndarray, max_new: int) -> Any:
            return iter(range(1, max_new + 1))

    server = CompletionServer(("127.0.0.1", 0), Instant())  # type: ignore[arg-type]
    host, port = server.server_address[:2]
    print(f"{READY_LINE}http://{host}:{port}", flush=True)
    server.serve_forever()
    return 0


def instant_server(cores: list[int]) -> tuple[subprocess.Popen[str], str]:
    """The instant completions server in its own process, on a core the client is not."""
    from loadgen.llm.server import READY_LINE

    process = subprocess.Popen([sys.executable, __file__, "--serve-instant"],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith(READY_LINE):
        process.kill()
        raise SystemExit(f"the instant completions server did not start: {line!r}")
    others = sorted(set(range(os.cpu_count() or 1)) - set(cores))
    if others:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(process.pid, others)
    return process, line[len(READY_LINE):].strip()


def measure_llm(seconds: float, work: Path, tokens: int = 128, concurrency: int = 8,
                url: str | None = None) -> dict[str, Any]:
    """The token SUT's ceiling: in process around the instant generator, or with ``url``
    through the HTTP streaming client against the instant server."""
    from loadgen.llm.run import run_llm

    backend: dict[str, Any] = {"name": "onnxruntime", "threads": 1}
    if url is not None:
        backend = {"name": "openai", "url": url, "in_flight": concurrency}

    def spec(duration: float, expected: float) -> Spec:
        doc = {
            "schema_version": 1,
            "model": {"name": "llm", "variant": "tiny", "precision": "fp32"},
            "backend": backend,
            "device": {"kind": "cpu"},
            "llm": {"max_output_tokens": tokens},
            "loadgen": {"scenario": "Offline", "mode": "PerformanceOnly",
                        "min_duration_ms": int(duration * 1000), "min_query_count": 1,
                        "target_qps": expected, "performance_sample_count": 64},
            "batch_size": concurrency, "seed": 0, "warmup_queries": 1,
            "cache_dir": str(work / "cache"),
        }
        return parse_spec(doc, "harness_ceiling", work)

    def once(duration: float, expected: float) -> dict[str, Any]:
        engine = None if url is not None else (lambda s: InstantGenerator(s.batch_size))
        record = run_llm(spec(duration, expected), tempfile.mkdtemp(dir=work), engine=engine)
        if record["status"] != "ok":
            raise SystemExit(f"token run failed: {record.get('reason')}")
        return record

    probe = once(0.5, 2_000.0)
    answers = probe["sut"]["completed_samples"] / max(1e-9, _timed_s(probe))
    record = once(seconds, answers)
    elapsed = _timed_s(record)
    output_tokens = int(record["sut"]["output_tokens"])
    rate = output_tokens / elapsed
    cpu = record["telemetry"]["host"]["process_cpu_seconds_timed"]
    return {"client": "http-sse" if url else "in-process",
            "tokens_per_second": rate, "answers_per_second": record["sut"]
            ["completed_samples"] / elapsed, "output_tokens": output_tokens,
            "client_cpu_us_per_token": 1e6 * cpu / output_tokens,
            "tokens_per_answer": tokens, "concurrency": concurrency,
            "reference_tokens_per_second": LLM_TOKENS_REFERENCE,
            "ratio": rate / LLM_TOKENS_REFERENCE,
            "status": "met" if rate / LLM_TOKENS_REFERENCE >= GOAL_RATIO else "missed"}


def _timed_s(record: dict[str, Any]) -> float:
    unix = record["sut"]["completions"]["unix"]
    return float(unix[-1] - unix[0])


def main(argv: list[str] | None = None) -> int:
    if argv is None and sys.argv[1:] == ["--serve-instant"]:
        return serve_instant()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--cores", type=int, default=1,
                        help="CPU cores the harness may use (0: all it is allowed)")
    parser.add_argument("--workload", choices=["resnet50", "bert", "llm", "all"],
                        default="all")
    parser.add_argument("--host-gather", action="store_true",
                        help="also measure batches gathered on the host (no goal: what a "
                             "backend fed from host memory would cost)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    cores = pin_to_cores(args.cores)
    os.environ.setdefault("VGPU_IGNORE_DISTURBANCE", "1")
    work = Path(tempfile.mkdtemp(prefix="vgpu-harness-ceiling-"))
    wanted = ["resnet50", "bert", "llm"] if args.workload == "all" else [args.workload]
    ceilings = [measure_workload(w, BATCHES[w], args.seconds, work)
                for w in wanted if w != "llm"]
    gathered = [measure_workload(w, BATCHES[w], args.seconds, work, host_gather=True)
                for w in wanted if w != "llm"] if args.host_gather else []
    llm = measure_llm(args.seconds, work) if "llm" in wanted else None
    llm_http = None
    if "llm" in wanted:
        server, url = instant_server(cores)
        try:
            llm_http = measure_llm(args.seconds, work, url=url)
        finally:
            server.kill()
            server.wait()
    print(f"harness ceiling: null backend, {len(cores)} core(s) {cores}, "
          f"{args.seconds:.0f} s Offline per workload")
    print("  workload                  batch   samples/s   H200 published   ratio (goal >= 2)   "
          "CPU us/sample")
    for c in [*ceilings, *gathered]:
        print(f"  {c.workload:24s} {c.batch:6d} {c.samples_per_second:11,.0f}   "
              f"{c.reference:14,.0f}   {c.ratio:6.2f} {c.status:>11s}   "
              f"{1e6 * c.cpu_seconds_per_sample:8.2f}")
    for figures in (llm, llm_http):
        if figures is None:
            continue
        print(f"  llm SUT, {figures['client']}: {figures['tokens_per_second']:,.0f} output "
              f"tokens/s timed ({figures['answers_per_second']:,.0f} answers/s of "
              f"{figures['tokens_per_answer']} tokens, {figures['concurrency']} workers; "
              f"client CPU {figures['client_cpu_us_per_token']:.2f} us/token), "
              f"{figures['ratio']:.2f} x {figures['reference_tokens_per_second']:,.0f} "
              f"({figures['status']})")
    if args.json:
        args.json.write_text(json.dumps({"cores": cores, "seconds": args.seconds,
                                         "workloads": [asdict(c) for c in ceilings],
                                         "host_gather": [asdict(c) for c in gathered],
                                         "llm": llm, "llm_http": llm_http}, indent=2))
    missed = [c.workload for c in ceilings if c.status != "met"]
    missed += [f["client"] for f in (llm, llm_http) if f is not None and f["status"] != "met"]
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
