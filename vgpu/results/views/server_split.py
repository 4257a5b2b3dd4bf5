"""The Triton server-side split of a request's time: queue, compute input, compute infer
and compute output, in mean microseconds per request over a timed run, stored as metrics
of each instance (``triton_queue_us`` ...). Instance metrics are not judged against
baselines: they explain a throughput or latency, they are not one."""

from __future__ import annotations

from collections import defaultdict

from loadgen.contract import SERVER_SPLIT
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SeriesData
from vgpu.results.views.format import number

SPLIT_METRICS = SERVER_SPLIT  # split kind -> metric name (what metrics_of names them)
SPLIT_LABELS = {"queue": "queue", "compute_input": "compute input",
                "compute_infer": "compute infer", "compute_output": "compute output"}
SPLIT_UNIT = "us"
_KIND_OF = {name: kind for kind, name in SPLIT_METRICS.items()}

Split = dict[str, dict[str, float]]  # instance -> split kind -> mean us per request


def series_split(store: ResultStore, series: SeriesData) -> Split:
    """Per instance, each part of the split averaged over the series' ok repeats; empty
    when the series did not run on Triton."""
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for run in series.runs:
        for metric in store.metrics(run.id):
            kind = _KIND_OF.get(metric.name)
            if kind is not None and metric.instance is not None:
                values[metric.instance][kind].append(metric.value)
    return {
        instance: {kind: sum(v) / len(v) for kind, v in kinds.items()}
        for instance, kinds in values.items()
    }


def split_rows(split: Split) -> tuple[list[str], list[list[str]]]:
    """Headers and rows of a table of the split: one row per instance."""
    headers = ["instance", *(f"{SPLIT_LABELS[k]} us" for k in SPLIT_METRICS), "total us"]
    rows = []
    for instance, kinds in sorted(split.items()):
        cells = [kinds.get(k) for k in SPLIT_METRICS]
        total = sum(c for c in cells if c is not None)
        rows.append([instance, *("-" if c is None else number(c) for c in cells),
                     number(total)])
    return headers, rows
