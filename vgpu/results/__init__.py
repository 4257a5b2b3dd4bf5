"""Results: statistics, the SQLite store, comparisons with verdicts, reports.

Producers (bench, training) write through ``ResultStore``: ``begin_run`` then
``finish_run`` (or ``record_run`` in one call) with ``InstanceResult`` and ``Metric``
records; readers use ``load_series`` and the compare/report functions."""

from __future__ import annotations

from vgpu.results.compare import Band, Check, Comparison, Reference, Verdict
from vgpu.results.records import InstanceResult, Metric, Platform, Run, RunStart
from vgpu.results.series import SeriesData, load_series
from vgpu.results.stats import Summary, summarize
from vgpu.results.store import DEFAULT_DB, ResultStore

__all__ = [
    "DEFAULT_DB",
    "Band",
    "Check",
    "Comparison",
    "InstanceResult",
    "Metric",
    "Platform",
    "Reference",
    "ResultStore",
    "Run",
    "RunStart",
    "SeriesData",
    "Summary",
    "Verdict",
    "load_series",
    "summarize",
]
