"""What `vgpu report` costs as the store's history grows: stores holding 10 and N stored
series (pairs of scenario 6 on VMs and its bare-metal twin bm6, 3 repeats of 3 instances
each, a few workloads), the report built and written as HTML from each, measured side by
side (the sizes interleaved, R rounds, CPU seconds of this process). Prints the medians and
the ratio N / 10: the report shows the latest series of each scenario, workload and target
and what judged them, so its cost should follow what it shows, not the history.

    python benchmarks/report_scale.py [--series 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from vgpu.results.store.records import InstanceResult, RunStart
from vgpu.results.store.result_store import ResultStore
from vgpu.results.views.report import build_report

WORKLOADS = ("resnet50/tiny onnxruntime Offline", "bert/tiny onnxruntime Offline")
SLICES = {"4g": 500.0, "2g": 300.0, "1g": 150.0}


def _instance(name: str, throughput: float) -> InstanceResult:
    p99_ms = 5.0
    return InstanceResult(
        name=name, status="ok", device_kind="cpu", device_note="CPU, no MIG slice",
        validity="VALID", throughput=throughput,
        latency_ns={"p50": p99_ms * 0.5e6, "p90": p99_ms * 0.8e6, "p95": p99_ms * 0.9e6,
                    "p97": p99_ms * 0.95e6, "p99": p99_ms * 1e6, "p99_9": p99_ms * 1.2e6,
                    "min": p99_ms * 0.1e6, "max": p99_ms * 1.5e6, "mean": p99_ms * 0.6e6},
        timed_start_unix=1000.0, timed_end_unix=1010.0, result={"status": "ok"})


def _add_series(store: ResultStore, scenario_id: str, target_kind: str, workload: str,
                scale: float) -> None:
    series_id = uuid.uuid4().hex
    for index, wobble in enumerate((0.0, 1.0, -1.0)):
        start = RunStart(series_id=series_id, scenario_id=scenario_id,
                         scenario_name=f"s{scenario_id}", workload=workload,
                         target_kind=target_kind, repeat_index=index, kind="inference",
                         workload_detail={"loadgen_scenario": "Offline"})
        store.record_run(start, "ok", instances=[
            _instance(name, (rate + wobble) * scale) for name, rate in SLICES.items()],
            sync_skew_s=0.002)


def fill(path: Path, series: int) -> None:
    """``series`` stored series, alternating bare metal and VM, workload by workload."""
    with ResultStore.open(path) as store:
        for index in range(series):
            workload = WORKLOADS[(index // 2) % len(WORKLOADS)]
            if index % 2 == 0:
                _add_series(store, "bm6", "bare-metal", workload, 1.0)
            else:
                _add_series(store, "6", "vm", workload, 0.995)


def report_seconds(path: Path, out: Path) -> float:
    started = time.process_time()
    with ResultStore.open_existing(path) as store:
        out.write_text(build_report(store).html(), encoding="utf-8")
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        sizes = (10, args.series)
        for size in sizes:
            fill(folder / f"{size}.db", size)
        report_seconds(folder / "10.db", folder / "warm.html")  # imports, fonts: not counted
        seconds: dict[int, list[float]] = {size: [] for size in sizes}
        for _ in range(args.rounds):
            for size in sizes:
                seconds[size].append(report_seconds(folder / f"{size}.db",
                                                    folder / f"{size}.html"))
        medians = {size: statistics.median(values) for size, values in seconds.items()}
        for size in sizes:
            html = (folder / f"{size}.html").stat().st_size
            print(f"{size:>6} stored series: report {medians[size]:.2f} s CPU "
                  f"(median of {args.rounds}), HTML {html / 1024:.0f} KiB")
        print(f"ratio {args.series} / 10 series: {medians[args.series] / medians[10]:.2f}")


if __name__ == "__main__":
    main()
