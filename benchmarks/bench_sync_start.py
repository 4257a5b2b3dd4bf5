"""Synchronised start of harness instances: measured side by side in one run.

Three harness instances (tiny ResNet50, Offline, fixed expected QPS, one intra-op thread
each) are started
  (a) the naive way: one subprocess after the other, each starting its timed test as soon
      as it has loaded and warmed up (no --sync);
  (b) the `vgpu bench` way: all started, each prints READY, then all get the same GO time.
For each round it prints the start skew (max - min of the instances' timed_start_unix),
the system throughput (sum over instances of LoadGen's samples/s), the overlap (share of
the span from the first start to the last end during which every instance was in its
timed test) and, from the completion timelines, the system throughput inside that shared
window; rounds alternate a/b to share the load conditions.
It also prints this process's own CPU time per instance for each way (the orchestrator's
cost; the instances are child processes and are not counted).
Run: .venv/bin/python benchmarks/bench_sync_start.py [rounds] [--instances 3]
    [--duration-ms 2000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from vgpu.bench.fanout import run_round
from vgpu.bench.overlap import round_overlap
from vgpu.bench.targets import Target
from vgpu.remote.local import LocalTransport

INSTANCES: tuple[str, ...] = ("a", "b", "c")
DURATION_MS = 2000


def spec(instance: str, cache: Path) -> dict[str, object]:
    return {
        "schema_version": 1, "model": {"name": "resnet50", "variant": "tiny"},
        "backend": {"name": "onnxruntime", "threads": 1}, "device": {"kind": "cpu"},
        "loadgen": {"scenario": "Offline", "min_duration_ms": DURATION_MS,
                    "target_qps": 3000},
        "batch_size": 32, "instance_name": instance, "cache_dir": str(cache),
    }


def naive(work: Path, cache: Path) -> list[dict[str, object]]:
    processes = []
    for name in INSTANCES:
        folder = work / name
        folder.mkdir(parents=True)
        (folder / "spec.json").write_text(json.dumps(spec(name, cache)))
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "loadgen", "run", str(folder / "spec.json"), "--out",
             str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    for process in processes:
        process.wait(timeout=300)
    return [json.loads((work / n / "result.json").read_text()) for n in INSTANCES]


def synchronised(work: Path, cache: Path) -> list[dict[str, object]]:
    transport = LocalTransport(home=work)
    targets = [Target(instance=n, transport=transport,
                      harness=f"{sys.executable} -m loadgen", work_root=str(work),
                      device={"kind": "cpu"}, device_label="CPU", target_kind="local",
                      threads=1, local_root=work) for n in INSTANCES]
    result = run_round(targets, {n: spec(n, cache) for n in INSTANCES},
                       {n: work / n for n in INSTANCES}, tag="sync",
                       expected_s=DURATION_MS / 1e3)
    if result.failure:
        raise SystemExit(result.failure)
    return [o.record or {} for o in result.outcomes]


def measure(records: list[dict[str, object]]) -> tuple[float, float, float, float]:
    """Start skew (ms), system throughput, the share of the timed span during which
    every instance was in its timed test at once, and the system throughput counted
    inside that shared window only."""
    starts = [float(r["timed_start_unix"]) for r in records]  # type: ignore[arg-type]
    rates = [float(r["throughput"]["samples_per_second"]) for r in records]  # type: ignore[index]
    overlap = round_overlap({str(n): r for n, r in enumerate(records)})
    assert overlap is not None
    return ((max(starts) - min(starts)) * 1e3, sum(rates), overlap.fraction,
            sum(overlap.throughput.values()))


def options() -> int:
    """Parse the options into the module settings; the number of rounds."""
    global INSTANCES, DURATION_MS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rounds", type=int, nargs="?", default=3)
    parser.add_argument("--instances", type=int, default=3,
                        help="harness instances started together (default 3)")
    parser.add_argument("--duration-ms", type=int, default=DURATION_MS,
                        help="each instance's timed test, LoadGen min_duration_ms")
    args = parser.parse_args()
    INSTANCES = tuple(f"i{n:03d}" for n in range(args.instances))
    DURATION_MS = args.duration_ms
    return int(args.rounds)


def main() -> None:
    rounds = options()
    cpu: dict[str, list[float]] = {"naive": [], "synchronised": []}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cache = root / "models"
        naive(root / "warm", cache)  # builds the model once, outside the measurement
        results: dict[str, list[tuple[float, float, float, float]]] = {
            "naive": [], "synchronised": []}
        for number in range(rounds):
            for kind, way in (("naive", naive), ("synchronised", synchronised)):
                before = time.process_time()
                records = way(root / f"{kind[0]}{number}", cache)
                cpu[kind].append((time.process_time() - before) / len(INSTANCES))
                results[kind].append(measure(records))
    print(f"{len(INSTANCES)} instances, {DURATION_MS} ms timed test each, {rounds} rounds")
    print(f"{'round':<6}{'skew ms naive':>15}{'sync':>8}{'samples/s naive':>17}{'sync':>8}"
          f"{'overlap naive':>15}{'sync':>7}{'shared-window samples/s sync':>30}")
    for number in range(rounds):
        (ns, nt, no, _), (ss, st, so, sw) = (results["naive"][number],
                                             results["synchronised"][number])
        print(f"{number:<6}{ns:>15.1f}{ss:>8.1f}{nt:>17.0f}{st:>8.0f}{no:>15.1%}{so:>7.1%}"
              f"{sw:>30.0f}")

    def median(kind: str, field: int) -> float:
        return statistics.median(row[field] for row in results[kind])

    print(f"median start skew: naive {median('naive', 0):.1f} ms, synchronised "
          f"{median('synchronised', 0):.1f} ms")
    print(f"median share of the timed span with all instances running: naive "
          f"{median('naive', 2):.1%}, synchronised {median('synchronised', 2):.1%}")
    print("median system throughput ratio shared window/LoadGen, synchronised: "
          f"{median('synchronised', 3) / median('synchronised', 1):.3f}")
    print("median system throughput ratio synchronised/naive: "
          f"{median('synchronised', 1) / median('naive', 1):.3f}")
    print(f"median orchestrator CPU per instance: naive "
          f"{statistics.median(cpu['naive']) * 1e3:.1f} ms, synchronised "
          f"{statistics.median(cpu['synchronised']) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
