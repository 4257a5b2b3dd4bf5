"""A writer process for the concurrency test: ``python store_writer.py LOCATION SERIES N``
opens the store (migrating a new one) and stores N runs of series SERIES, each begun as
``running`` and finished with 3 instances and 5 metrics, the way `vgpu bench` does."""

from __future__ import annotations

import sys

from vgpu.results.store.records import InstanceResult, Metric, Platform, RunStart
from vgpu.results.store.result_store import ResultStore


def main(location: str, series: str, count: int) -> None:
    platform = Platform(host="esx1", gpu="A100 80GB", vcpus=8, memory_gb=32.0)
    with ResultStore.open(location) as store:
        for index in range(count):
            start = RunStart(series_id=series, scenario_id="6", scenario_name="mixed",
                             workload="w", target_kind="vm", repeat_index=index,
                             platform=platform)
            run_id = store.begin_run(start)
            instances = [InstanceResult(name=f"vm-{n}", status="ok", throughput=100.0 + n,
                                        latency_ns={"p99": 1e6 * (n + 1)}, platform=platform)
                         for n in range(3)]
            metrics = [Metric(f"m{n}", float(index * n), "x") for n in range(5)]
            store.finish_run(run_id, "ok", instances=instances, metrics=metrics,
                             sync_skew_s=0.001)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
