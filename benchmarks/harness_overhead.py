"""Harness overhead on full-size ResNet50 (fp32, synthetic data), measured side by side:

1. a raw ``session.run`` loop over pre-made batches (no LoadGen, no SUT),
2. LoadGen Offline through the harness's ONNX Runtime SUT (same batch, same threads),
3. LoadGen Offline through the harness's Triton SUT (gRPC) against a real Triton server
   whose python backend runs the same ONNX model with the same threads.

Prints samples/s of each and the ratios 2/1 (goal >= 0.98) and 3/2 (goal >= 0.90).
On a shared host other processes change every wall-clock rate, so it also prints the
CPU-seconds each sample cost (all processes involved: the harness, and for Triton the
server and its python backend stubs) and the same ratios computed from them, which other
load disturbs far less.

    .venv/bin/python benchmarks/harness_overhead.py [--seconds 20] [--rounds 1] [--batch 8]

Needs .venv-triton (``bash scripts/setup.sh --test``) for step 3; without it, step 3 is
skipped and said so.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the reusable Triton lab lives with the tests

from loadgen.models import build_model, read_model_io  # noqa: E402
from loadgen.qsl import SampleLibrary  # noqa: E402
from loadgen.runner import run  # noqa: E402
from loadgen.spec import parse_spec  # noqa: E402
from loadgen.triton_repo import write_repository  # noqa: E402
from tests.labs.triton import TritonServer, triton_unavailable  # noqa: E402


@dataclass(frozen=True)
class Measurement:
    samples_per_second: float
    cpu_seconds_per_sample: float


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and all of its children, alive now."""
    root = psutil.Process(pid)
    total = 0.0
    for process in [root, *root.children(recursive=True)]:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def raw_loop(model: Path, batch: int, threads: int, seconds: float) -> Measurement:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    library = SampleLibrary(read_model_io(model), seed=0, performance_count=batch)
    library.load(list(range(batch)))
    feeds = library.batch(np.arange(batch))
    for _ in range(2):
        session.run(None, feeds)
    done, started, cpu = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - started < seconds:
        session.run(None, feeds)
        done += batch
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return Measurement(done / elapsed, cpu / done)


def harness_offline(cache: Path, work: Path, backend: dict[str, Any], batch: int,
                    seconds: float, expected_qps: float,
                    server_pid: int | None = None) -> Measurement:
    doc = {
        "schema_version": 1,
        "model": {"name": "resnet50", "variant": "full", "precision": "fp32"},
        "backend": backend,
        "loadgen": {"scenario": "Offline", "min_duration_ms": int(seconds * 1000),
                    "target_qps": expected_qps, "performance_sample_count": 64},
        # The server-side CPU is counted over the whole call, so no warm-up there.
        "batch_size": batch, "warmup_queries": 0 if server_pid else 2,
        "cache_dir": str(cache),
    }
    server_cpu = tree_cpu_seconds(server_pid) if server_pid else 0.0
    record = run(parse_spec(doc, "benchmark", work), tempfile.mkdtemp(dir=work))
    if server_pid:
        server_cpu = tree_cpu_seconds(server_pid) - server_cpu
    if record["status"] != "ok":
        raise SystemExit(f"harness run failed: {record['reason']}")
    # This process's CPU (all threads) during LoadGen's timed part, as the harness logs it.
    client_cpu = record["telemetry"]["host"]["process_cpu_seconds_timed"]
    samples = record["sample_count"]
    return Measurement(float(record["throughput"]["samples_per_second"]),
                       (client_cpu + server_cpu) / samples)


def _median(values: list[Measurement]) -> Measurement:
    return Measurement(statistics.median(m.samples_per_second for m in values),
                       statistics.median(m.cpu_seconds_per_sample for m in values))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rounds", type=int, default=1, help="alternate rounds; medians")
    parser.add_argument("--in-flight", type=int, default=2, help="Triton requests in flight")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vgpu-harness-bench-"))
    cache = work / "models"
    model = build_model("resnet50", "full", "fp32", cache)
    ort_backend = {"name": "onnxruntime", "threads": args.threads}
    reason = triton_unavailable()
    server = None
    if reason is None:
        repo = work / "repo"
        write_repository(repo, model, "resnet50", kind="python", max_batch_size=args.batch * 2,
                         intra_op_threads=args.threads)
        server = TritonServer(repo).start()
    rounds: dict[str, list[Measurement]] = {"raw": [], "ort_sut": [], "triton_sut": []}
    try:
        for _ in range(args.rounds):
            raw = raw_loop(model, args.batch, args.threads, args.seconds)
            rounds["raw"].append(raw)
            # Expected QPS a little above the raw rate so LoadGen's single Offline query
            # lasts at least the requested duration.
            expected = raw.samples_per_second * 1.2
            rounds["ort_sut"].append(harness_offline(cache, work, ort_backend, args.batch,
                                                     args.seconds, expected))
            if server is not None and server.process is not None:
                triton = {"name": "triton", "url": server.grpc_url, "protocol": "grpc",
                          "model_name": "resnet50", "in_flight": args.in_flight}
                rounds["triton_sut"].append(harness_offline(
                    cache, work, triton, args.batch, args.seconds, expected,
                    server_pid=server.process.pid))
    finally:
        if server is not None:
            server.stop()
    for name, values in rounds.items():
        if values:
            print(f"  round {name:10s}: " + ", ".join(
                f"{m.samples_per_second:.2f}/s {m.cpu_seconds_per_sample:.3f} cpu-s"
                for m in values))
    # Neighbouring measurements share the host's load best: ratios within each round.
    pairs = [("ORT SUT / raw", rounds["ort_sut"], rounds["raw"]),
             ("Triton / ORT SUT", rounds["triton_sut"], rounds["ort_sut"])]
    for label, top, bottom in pairs:
        if top:
            print(f"  per-round {label:16s}: " + ", ".join(
                f"{t.samples_per_second / b.samples_per_second:.3f}"
                for t, b in zip(top, bottom, strict=True)))
    print(f"load average (1/5/15 min) at the end: {os.getloadavg()}")
    print(f"ResNet50 full fp32, batch {args.batch}, {args.threads} intra-op threads, "
          f"{args.seconds:.0f} s per measurement, {args.rounds} round(s) (medians), "
          f"onnxruntime {ort.__version__}, {os.cpu_count()} CPUs")
    raw, ort_sut = _median(rounds["raw"]), _median(rounds["ort_sut"])
    print("                                  samples/s   CPU-s/sample")
    print(f"  raw session.run loop          : {raw.samples_per_second:9.2f}   "
          f"{raw.cpu_seconds_per_sample:9.3f}")
    print(f"  LoadGen Offline, ORT SUT      : {ort_sut.samples_per_second:9.2f}   "
          f"{ort_sut.cpu_seconds_per_sample:9.3f}")
    wall_ratio = ort_sut.samples_per_second / raw.samples_per_second
    cpu_ratio = raw.cpu_seconds_per_sample / ort_sut.cpu_seconds_per_sample
    print(f"  ratio ORT SUT / raw loop      : {wall_ratio:9.3f}   {cpu_ratio:9.3f}"
          "   (goal >= 0.98)")
    if not rounds["triton_sut"]:
        print(f"  Triton SUT skipped: {reason}")
        return 0
    triton = _median(rounds["triton_sut"])
    print(f"  LoadGen Offline, Triton SUT   : {triton.samples_per_second:9.2f}   "
          f"{triton.cpu_seconds_per_sample:9.3f}   (gRPC, {args.in_flight} in flight)")
    wall_ratio = triton.samples_per_second / ort_sut.samples_per_second
    cpu_ratio = ort_sut.cpu_seconds_per_sample / triton.cpu_seconds_per_sample
    print(f"  ratio Triton SUT / ORT SUT    : {wall_ratio:9.3f}   {cpu_ratio:9.3f}"
          "   (goal >= 0.90)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
