"""Images/s of the training harness fed from files against the same run on synthetic data:
the same model, image size, batch and threads, run as `python -m loadgen.train train`
(one rank) under the same OpenMP wait policy, alternating which source goes first over
--rounds so that other load on the machine hits both alike. The file-fed runs read the
JPEG shards of `vgpu data make` (made once in vgpu's cache, or --dataset DIR), evicted
from the page cache before each run.

    .venv/bin/python benchmarks/train_input.py [--model resnet50] [--image-size 112]
        [--batch 8] [--steps 6] [--warmup 2] [--workers 2] [--threads 2] [--rounds 3]
        [--images 2000] [--size small] [--dataset DIR] [--omp-wait-policy PASSIVE]

Prints per source the median images/s, CPU seconds of the run (the harness and its
workers: on a machine shared with other work the steadier figure), input MB/s, the
workers' decode share, the share of
step time spent waiting for data, the workers' CPU and the named bound, then the ratio
files / synthetic (goal >= 0.9 when storage is not the bound)."""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from vgpu.datasets.store import ensure_dataset

GOAL = 0.9


def run_once(args: argparse.Namespace, data: dict[str, Any], work: Path) -> dict[str, Any]:
    spec = {"schema_version": 1, "model": args.model, "image_size": args.image_size,
            "batch_size": args.batch, "warmup_steps": args.warmup,
            "measured_steps": args.steps, "comm_probe_steps": 0, "threads": args.threads,
            "precision": "fp32", "data": data}
    path = work / "spec.json"
    path.write_text(json.dumps(spec))
    out = work / "out"
    env = {**os.environ, "OMP_WAIT_POLICY": args.omp_wait_policy}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "loadgen.train", "train", str(path),
                           "--out", str(out)], capture_output=True, text=True, check=False,
                          env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"harness failed ({data['source']}): {done.stderr[-2000:]}")
    record: dict[str, Any] = json.loads((out / "result.json").read_text())
    # CPU seconds of the harness and its workers, start-up included: on a machine shared
    # with other work, steadier than wall-clock rates.
    record["cpu_s"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return record


def _median(records: list[dict[str, Any]], key: str) -> float:
    return statistics.median(float(r["input"][key]) for r in records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--image-size", type=int, default=112)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--size", default="small", choices=("small", "large"))
    parser.add_argument("--dataset", type=Path, default=None)
    parser.add_argument("--omp-wait-policy", default="PASSIVE", choices=("PASSIVE", "ACTIVE"),
                        help="for both sources alike (a file-fed CPU run defaults to PASSIVE, "
                        "a synthetic one to OpenMP's own)")
    args = parser.parse_args()

    folder, manifest, made = ensure_dataset(args.images, args.size, folder=args.dataset)
    print(f"dataset: {folder} ({'made' if made else 'reused'}; {manifest.total_images} "
          f"images, {manifest.total_bytes / 1e6:.0f} MB, {manifest.encoder})")
    sources = {"synthetic": {"source": "synthetic"},
               "files": {"source": "files", "path": str(folder), "workers": args.workers,
                         "cache": "evict"}}
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in sources}
    with tempfile.TemporaryDirectory(prefix="vgpu-train-input-") as scratch:
        for round_index in range(args.rounds):
            order = list(sources) if round_index % 2 == 0 else list(reversed(sources))
            for name in order:
                work = Path(scratch) / f"{name}-{round_index}"
                work.mkdir()
                results[name].append(run_once(args, sources[name], work))
    rates = {name: statistics.median(r["totals"]["images_per_s"] for r in records)
             for name, records in results.items()}
    print(f"\n{args.model} {args.image_size}px batch {args.batch}, {args.threads} thread(s), "
          f"{args.workers} worker(s), {args.steps} steps, OMP_WAIT_POLICY="
          f"{args.omp_wait_policy}, median of {args.rounds} round(s)")
    cpu = {name: statistics.median(r["cpu_s"] for r in records)
           for name, records in results.items()}
    print(f"{'source':<10} {'images/s':>9} {'CPU s/run':>10} {'input MB/s':>11} "
          f"{'decode':>7} {'data wait':>10} {'worker CPU':>11}  bound")
    print(f"{'synthetic':<10} {rates['synthetic']:>9.1f} {cpu['synthetic']:>10.1f} {'-':>11} "
          f"{'-':>7} {'-':>10} {'-':>11}  -")
    files = results["files"]
    bounds = sorted({r["input"]["bound"] for r in files})
    print(f"{'files':<10} {rates['files']:>9.1f} {cpu['files']:>10.1f} "
          f"{_median(files, 'input_mb_per_s'):>11.1f} {_median(files, 'decode_share'):>7.0%} "
          f"{_median(files, 'data_wait_share'):>10.0%} "
          f"{_median(files, 'worker_cpu_utilisation'):>11.0%}  {'/'.join(bounds)}")
    print("images/s per round: " + "; ".join(
        f"{name} " + ", ".join(f"{r['totals']['images_per_s']:.1f}" for r in records)
        for name, records in results.items()))
    print(f"CPU s/run (harness and its workers, start-up included): files - synthetic = "
          f"{cpu['files'] - cpu['synthetic']:+.1f} s")
    ratio = rates["files"] / rates["synthetic"]
    print(f"\nfiles / synthetic = {ratio:.3f} (goal >= {GOAL} when storage is not the bound: "
          f"{'met' if ratio >= GOAL else 'NOT met'})")


if __name__ == "__main__":
    main()
