"""Harness overhead on full-size ResNet50 (fp32, synthetic data), measured side by side:

1. a raw ``session.run`` loop over pre-made batches (no LoadGen, no SUT),
2. LoadGen Offline through the harness's ONNX Runtime SUT (same batch, same threads),
3. LoadGen Offline through the harness's Triton SUT (gRPC) against a real Triton server
   whose python backend runs the same ONNX model with the same threads.

Prints samples/s of each and the ratios 2/1 (goal >= 0.98) and 3/2 (goal >= 0.90).

    .venv/bin/python benchmarks/harness_overhead.py [--seconds 20] [--batch 8] [--threads N]

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
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

ROOT = Path(__file__).resolve().parents[1]
# The reusable Triton lab lives with the tests; the project root goes first so that
# `loadgen` is the package and not the tests/loadgen folder.
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from labs.triton import TritonServer, triton_unavailable  # noqa: E402

from loadgen.models import build_model, read_model_io  # noqa: E402
from loadgen.qsl import SampleLibrary  # noqa: E402
from loadgen.runner import run  # noqa: E402
from loadgen.spec import parse_spec  # noqa: E402
from loadgen.triton_repo import write_repository  # noqa: E402


def raw_loop(model: Path, batch: int, threads: int, seconds: float) -> float:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    library = SampleLibrary(read_model_io(model), seed=0, performance_count=batch)
    library.load(list(range(batch)))
    feeds = library.batch(np.arange(batch))
    for _ in range(2):
        session.run(None, feeds)
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        session.run(None, feeds)
        done += batch
    return done / (time.perf_counter() - started)


def harness_offline(cache: Path, work: Path, backend: dict[str, Any], batch: int,
                    threads: int, seconds: float, expected_qps: float) -> float:
    doc = {
        "schema_version": 1,
        "model": {"name": "resnet50", "variant": "full", "precision": "fp32"},
        "backend": backend,
        "loadgen": {"scenario": "Offline", "min_duration_ms": int(seconds * 1000),
                    "target_qps": expected_qps, "performance_sample_count": 64},
        "batch_size": batch, "warmup_queries": 2, "cache_dir": str(cache),
    }
    record = run(parse_spec(doc, "benchmark", work), tempfile.mkdtemp(dir=work))
    if record["status"] != "ok":
        raise SystemExit(f"harness run failed: {record['reason']}")
    return float(record["throughput"]["samples_per_second"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--rounds", type=int, default=1, help="alternate rounds; medians")
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
    rates: dict[str, list[float]] = {"raw": [], "ort_sut": [], "triton_sut": []}
    try:
        for _ in range(args.rounds):
            raw = raw_loop(model, args.batch, args.threads, args.seconds)
            rates["raw"].append(raw)
            # Expected QPS a little above the raw rate so LoadGen's single Offline query
            # lasts at least the requested duration.
            rates["ort_sut"].append(harness_offline(cache, work, ort_backend, args.batch,
                                                    args.threads, args.seconds, raw * 1.2))
            if server is not None:
                triton = {"name": "triton", "url": server.grpc_url, "protocol": "grpc",
                          "model_name": "resnet50", "in_flight": 2}
                rates["triton_sut"].append(harness_offline(
                    cache, work, triton, args.batch, args.threads, args.seconds, raw * 1.2))
    finally:
        if server is not None:
            server.stop()
    median = {k: statistics.median(v) if v else None for k, v in rates.items()}
    for name, values in rates.items():
        if values:
            print(f"  rounds {name:10s}: " + ", ".join(f"{v:.2f}" for v in values))
    print(f"load average (1/5/15 min) at the end: {os.getloadavg()}; other processes on "
          f"the host distort every rate, so compare rounds")
    print(f"ResNet50 full fp32, batch {args.batch}, {args.threads} intra-op threads, "
          f"{args.seconds:.0f} s per measurement, {args.rounds} round(s), "
          f"onnxruntime {ort.__version__}, {os.cpu_count()} CPUs")
    print(f"  raw session.run loop          : {median['raw']:8.2f} samples/s")
    print(f"  LoadGen Offline, ORT SUT      : {median['ort_sut']:8.2f} samples/s")
    ratio_ort = median["ort_sut"] / median["raw"]
    print(f"  ratio ORT SUT / raw loop      : {ratio_ort:8.3f}   (goal >= 0.98)")
    if median["triton_sut"] is None:
        print(f"  Triton SUT skipped: {reason}")
        return 0
    print(f"  LoadGen Offline, Triton SUT   : {median['triton_sut']:8.2f} samples/s "
          f"(gRPC, python backend + onnxruntime)")
    ratio_triton = median["triton_sut"] / median["ort_sut"]
    print(f"  ratio Triton SUT / ORT SUT    : {ratio_triton:8.3f}   (goal >= 0.90)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
