"""Harness overhead on an NVIDIA GPU with backend torch: for each workload, ``--repeats``
rounds of a raw loop of the same torch model on the same inputs and batch (no LoadGen, no
SUT; tests/gpu/rawloop.py) followed by LoadGen Offline through ``python -m loadgen run``.
Each runs in its own process bound to GPU 0 (or its first MIG device), as the acceptance
suite binds it.

Prints, per workload, the rounds, the ratio of the medians harness / raw (goal >= 0.98)
and the run-to-run coefficient of variation of the harness's samples/s (goal <= 1 %).
Exits 0 when every goal is met, 1 when one is missed, 2 on a machine without an NVIDIA
GPU or without a CUDA build of torch.

    python benchmarks/gpu_harness_overhead.py [--workload resnet50|bert|all]
        [--seconds 20] [--raw-seconds 15] [--repeats 3] [--out DIR] [--json FILE]
        [--batches-from gpu-check.json]

``--batches-from`` runs each model at the batch size the acceptance suite's probe chose
for this device (``batch_probe_<model>.chosen`` in its figures) instead of the default.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the comparison helpers live with the GPU tests

from tests.gpu.compare import (  # noqa: E402
    BERT_LARGE_FP16,
    RESNET50_FP16,
    Workload,
    harness_doc,
    harness_run,
    json_line,
    raw_rate,
    run_module,
)
from tests.gpu.gpuhost import GpuHost, NoGpu, probe  # noqa: E402

RATIO_GOAL = 0.98
CV_GOAL = 0.01
WORKLOADS = {"resnet50": (RESNET50_FP16,), "bert": (BERT_LARGE_FP16,),
             "all": (RESNET50_FP16, BERT_LARGE_FP16)}


def _give_up(message: str) -> NoReturn:
    print(message, file=sys.stderr)
    sys.exit(2)


def _host_or_exit() -> GpuHost:
    try:
        host = probe()
    except NoGpu as exc:
        _give_up(f"this benchmark needs an NVIDIA GPU and found none ({exc})")
    facts = json_line(run_module(host, "tests.gpu.rawloop", "probe", timeout=120))
    if not facts["cuda_available"]:
        _give_up(f"torch {facts['torch']} sees no CUDA device on {host.name}: install a "
                 f"CUDA build of torch to run this benchmark")
    print(f"{host.name}, driver {host.driver_version}, CUDA driver "
          f"{host.cuda_driver_version}, torch {facts['torch']} (CUDA {facts['cuda']}); "
          f"harness device {host.device}")
    return host


def cv(values: list[float]) -> float:
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0.0


def measure(host: GpuHost, work: Workload, args: argparse.Namespace,
            out: Path) -> dict[str, Any]:
    raw_rates, harness_rates = [], []
    for round_index in range(args.repeats):
        raw = float(raw_rate(host, work, args.raw_seconds)["samples_per_second"])
        doc = harness_doc(host, work, args.seconds, raw)
        done, record = harness_run(host, doc, out / f"{work.label}-{round_index}")
        if done.returncode != 0:
            sys.exit(f"{work.label}: the harness run failed: {record.get('reason')}")
        rate = float(record["throughput"]["samples_per_second"])
        raw_rates.append(raw)
        harness_rates.append(rate)
        print(f"  {work.label} round {round_index + 1}: raw {raw:.1f}/s, harness "
              f"{rate:.1f}/s ({record['validity']['result']}), ratio {rate / raw:.4f}")
    ratio = statistics.median(harness_rates) / statistics.median(raw_rates)
    return {"raw_samples_per_second": raw_rates, "harness_samples_per_second": harness_rates,
            "ratio_of_medians": ratio, "harness_cv": cv(harness_rates),
            "raw_cv": cv(raw_rates)}


def report(label: str, figures: dict[str, Any]) -> bool:
    ratio_ok = figures["ratio_of_medians"] >= RATIO_GOAL
    cv_ok = figures["harness_cv"] <= CV_GOAL
    print(f"{label}: harness / raw loop {figures['ratio_of_medians']:.4f} (goal >= "
          f"{RATIO_GOAL}: {'met' if ratio_ok else 'MISSED'}); harness CV "
          f"{figures['harness_cv']:.2%} (goal <= {CV_GOAL:.0%}: "
          f"{'met' if cv_ok else 'MISSED'}); raw loop CV {figures['raw_cv']:.2%}")
    return ratio_ok and cv_ok


def chosen_batches(path: Path | None) -> dict[str, int]:
    """Model -> the batch size the acceptance suite chose, from its figures file."""
    if path is None or not path.exists():
        return {}
    document = json.loads(path.read_text())
    return {key.removeprefix("batch_probe_"): int(value["chosen"])
            for key, value in document.items()
            if key.startswith("batch_probe_") and isinstance(value, dict) and "chosen" in value}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="all")
    parser.add_argument("--seconds", type=float, default=20.0, help="harness min duration")
    parser.add_argument("--raw-seconds", type=float, default=15.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, help="keep the harness outputs here")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--batches-from", type=Path,
                        help="gpu-check.json whose batch probe chose the batch sizes")
    args = parser.parse_args()
    host = _host_or_exit()
    out = args.out or Path(tempfile.mkdtemp(prefix="gpu-harness-overhead-"))
    chosen = chosen_batches(args.batches_from)
    works = [replace(work, batch=chosen.get(work.model, work.batch))
             for work in WORKLOADS[args.workload]]
    figures = {work.label: measure(host, work, args, out) for work in works}
    met = [report(label, values) for label, values in figures.items()]
    if args.json:
        args.json.write_text(json.dumps({"gpu": host.as_dict(), "workloads": figures},
                                        indent=2) + "\n")
    return 0 if all(met) else 1


if __name__ == "__main__":
    sys.exit(main())
