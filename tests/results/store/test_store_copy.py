"""Copying runs between stores (vgpu/results/store/copy.py, `vgpu results --copy-to`): SQLite
to a real PostgreSQL server and back, idempotently, with baselines."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from vgpu.cli import _register, app
from vgpu.results.store.copy import copy_runs, copy_stores
from vgpu.results.store.records import (
    BaselineSet,
    InstanceResult,
    Metric,
    Platform,
    RunStart,
    SeriesReference,
)
from vgpu.results.store.result_store import ResultStore

pytestmark = pytest.mark.postgres

PLATFORM = Platform(host="esx1", esxi_version="8.0.2", gpu="A100 80GB", vcpus=16,
                    memory_gb=128.0, link_speed_gbps=25.0)


REFERENCE = SeriesReference(series_id="series-six", reference_series="series-bm",
                            relation="twin", kind="vm-vs-bare-metal", tolerance=0.02,
                            tolerances={"latency_p99_worst": 0.05}, note="scenario bm6",
                            family="f1")


def _start(series: str, repeat: int, scenario: str = "6") -> RunStart:
    return RunStart(series_id=series, scenario_id=scenario, scenario_name=f"s{scenario}",
                    workload="resnet50 Offline", target_kind="vm", repeat_index=repeat,
                    workload_detail={"batch": 64}, platform=PLATFORM)


def _fill(store: ResultStore) -> dict[str, int]:
    """Two scenarios, a failed run, a baseline, and a run still going."""
    ids = {}
    for repeat in range(2):
        ids[f"six-{repeat}"] = store.record_run(
            _start("series-six", repeat), "ok", sync_skew_s=0.002,
            instances=[InstanceResult(f"vm-{n}", "ok", throughput=100.5 + n + repeat,
                                      latency_ns={"p99": 2.5e6}, platform=PLATFORM,
                                      result={"qps": 1 / 3}) for n in range(2)],
            metrics=[Metric("power", 250.25, "W", instance="vm-0"), Metric("workers", 2)])
    ids["bm"] = store.record_run(_start("series-bm", 0, scenario="bm6"), "ok",
                                 instances=[InstanceResult("host", "ok", throughput=210.0)])
    ids["failed"] = store.record_run(_start("series-six-b", 0), "failed", reason="vm-1 died")
    ids["running"] = store.begin_run(_start("series-six-c", 0))
    store.set_baseline(ids["bm"], name="bm-6")
    store.set_baseline(ids["six-1"], name="pre-upgrade:6:resnet50")
    store.put_series_reference(REFERENCE)
    return ids


def _content(store: ResultStore) -> list[tuple[object, ...]]:
    """Everything of every finished run except ids, in a comparable form."""
    rows = []
    for run in store.runs():
        if run.status == "running":
            continue
        rows.append((run.series_id, run.repeat_index, run.started_at, run.ended_at,
                     run.status, run.reason, run.workload_detail, run.platform, run.host,
                     run.pid, run.sync_skew_s,
                     [i.result for i in store.instances(run.id)], store.metrics(run.id)))
    return rows


def _baselines(store: ResultStore) -> dict[str, tuple[str, int, float]]:
    out = {}
    for baseline in store.baselines():
        run = store.run(baseline.run_id)
        assert run is not None and run.series_id == baseline.series_id
        out[baseline.name] = (run.series_id, run.repeat_index, run.started_at)
    return out


def test_sqlite_to_postgres_and_back_copies_everything_once(
    tmp_path: Path, postgres_url: str
) -> None:
    with ResultStore.open(tmp_path / "lab.db") as source:
        ids = _fill(source)
        with ResultStore.open(postgres_url) as shared:
            first = copy_runs(source, shared)
            assert (len(first.copied), first.already_there) == (4, 0)
            assert first.still_running == [ids["running"]]
            assert (first.instances, first.metrics) == (5, 4)
            assert sorted(first.baselines_copied) == ["bm-6", "pre-upgrade:6:resnet50"]
            assert _content(shared) == _content(source)
            assert _baselines(shared) == _baselines(source)
            assert shared.series_reference("series-six") == REFERENCE
            again = copy_runs(source, shared)
            assert (again.copied, again.already_there, again.baselines_copied) == ({}, 4, [])
            assert len(shared.runs()) == 4
    back = copy_stores(postgres_url, tmp_path / "back.db")
    assert len(back.copied) == 4
    with ResultStore.open(tmp_path / "back.db") as returned, \
            ResultStore.open(tmp_path / "lab.db") as source:
        assert _content(returned) == _content(source)
        assert _baselines(returned) == _baselines(source)
        assert returned.series_reference("series-six") == REFERENCE
    assert copy_stores(postgres_url, tmp_path / "back.db").copied == {}


def test_a_run_finished_after_the_first_copy_goes_with_the_next(
    tmp_path: Path, postgres_url: str
) -> None:
    with ResultStore.open(tmp_path / "lab.db") as source, \
            ResultStore.open(postgres_url) as shared:
        ids = _fill(source)
        copy_runs(source, shared, scenario_id="bm6")
        assert [r.scenario_id for r in shared.runs()] == ["bm6"]
        assert [b.name for b in shared.baselines()] == ["bm-6"]
        source.finish_run(ids["running"], "ok")
        later = copy_runs(source, shared)
        assert (len(later.copied), later.already_there, later.still_running) == (4, 1, [])
        assert later.baselines_copied == ["pre-upgrade:6:resnet50"]


def test_a_copied_baseline_set_keeps_its_host_and_facts(
    tmp_path: Path, postgres_url: str
) -> None:
    with ResultStore.open(tmp_path / "lab.db") as source, \
            ResultStore.open(postgres_url) as shared:
        ids = _fill(source)
        source.set_baseline(ids["six-0"], name="pre-upgrade@esx1:6:resnet50")
        measured = BaselineSet("pre-upgrade@esx1", "esx1", "uuid-esx1", "pf-capture",
                               1700000000.0, drain_facts_id="pf-drain")
        source.put_baseline_set(measured)
        source.put_baseline_set(BaselineSet("other-set", "esx2", None, None, 1700000000.0))
        copy_runs(source, shared)
        assert shared.baseline_sets() == [measured]  # the set no copied baseline is in stays


def test_a_baseline_the_target_gives_another_run_is_kept(
    tmp_path: Path, postgres_url: str
) -> None:
    with ResultStore.open(tmp_path / "lab.db") as source, \
            ResultStore.open(postgres_url) as shared:
        _fill(source)
        theirs = shared.record_run(_start("their-series", 0, scenario="bm6"), "ok")
        shared.set_baseline(theirs, name="bm-6")
        summary = copy_runs(source, shared)
        assert summary.baselines_kept == ["bm-6"]
        assert shared.baseline("bm-6").run_id == theirs  # type: ignore[union-attr]
        assert "kept as they are there: bm-6" in summary.describe()


def test_cli_copy_to_postgres_with_the_url_in_vgpu_db(
    tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ResultStore.open(tmp_path / "lab.db") as source:
        _fill(source)
    _register()
    runner = CliRunner()
    copy = ["results", "--db", str(tmp_path / "lab.db"), "--copy-to", postgres_url,
            "--scenario", "6"]
    result = runner.invoke(app, copy)
    assert result.exit_code == 0, result.output
    assert "copied 3 run(s) (4 instance(s), 4 metric(s))" in result.output
    assert "still running" in result.output
    again = runner.invoke(app, copy)
    assert "copied 0 run(s)" in again.output and "3 already there" in again.output
    monkeypatch.setenv("VGPU_DB", postgres_url)
    listing = runner.invoke(app, ["results", "--export", "json"])
    assert listing.exit_code == 0, listing.output
    assert listing.output.count('"series_id"') == 3
    assert runner.invoke(app, ["baseline", "list"]).exit_code == 0
