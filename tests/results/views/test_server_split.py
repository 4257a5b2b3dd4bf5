"""The Triton server-side split stored as instance metrics: averaged per instance over a
series, shown as a small table per Triton series in the report, and never judged."""

from __future__ import annotations

from collections.abc import Callable

from vgpu.results.store.records import Metric
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import all_series
from vgpu.results.views.report import build_report, split_sections
from vgpu.results.views.server_split import SPLIT_METRICS, series_split, split_rows

AddSeries = Callable[..., list[int]]


def _split(instance: str, queue: float) -> list[Metric]:
    values = {"queue": queue, "compute_input": 20.0, "compute_infer": 900.0,
              "compute_output": 80.0}
    return [Metric(SPLIT_METRICS[k], v, "us", instance) for k, v in values.items()]


def test_the_split_is_averaged_per_instance_and_tabled_in_the_report(
        store: ResultStore, add_series: AddSeries) -> None:
    add_series([{"a": 100.0}, {"a": 110.0}], workload="plain")
    add_series([{"a": 100.0, "b": 90.0}, {"a": 104.0, "b": 92.0}], workload="on triton",
               metrics=[[*_split("a", 100.0), *_split("b", 50.0)],
                        [*_split("a", 300.0), *_split("b", 70.0)]])
    plain, triton = all_series(store)
    assert series_split(store, plain) == {}
    split = series_split(store, triton)
    assert split["a"]["queue"] == 200.0 and split["b"]["queue"] == 60.0
    headers, rows = split_rows(split)
    assert headers == ["instance", "queue us", "compute input us", "compute infer us",
                       "compute output us", "total us"]
    assert rows[0] == ["a", "200", "20.0", "900", "80.0", "1,200"]
    assert not any(name.startswith("triton_") for name in triton.samples)  # not judged
    [(heading, _table)] = split_sections(store, [plain, triton])
    assert heading.startswith("Triton server-side time per request") and "on triton" in heading
    html = build_report(store).html()
    assert "Triton server-side time per request" in html and "compute infer us" in html
