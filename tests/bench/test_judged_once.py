"""One `vgpu bench` makes each series' verdict once, after its series ran; the looks of a
sequential design before it store nothing. The command in-process, each repeat faked by
tests/bench/fake_repeats.py (it stores the next throughput of its side)."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.bench.fake_repeats import fake_repeats, fake_warm_up
from tests.cli.invoke import run_cli
from vgpu.bench import interleave, judging, pacing, session
from vgpu.exitcodes import EXIT_INCONCLUSIVE, EXIT_PASS
from vgpu.results.store.result_store import ResultStore
from vgpu.results.verdict import judge

ARGS = ["bench", "--scenario", "6", "--workload", "resnet50-offline", "--no-report"]


class Counts:
    """Verdicts made and looks taken, per series, by the bench the fakes stand in for."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.verdicts: Counter[str] = Counter()
        self.looks: Counter[str] = Counter()
        self.written_at_looks: list[str] = []
        values = {"bm6": itertools.cycle([1000.0, 1002.0, 998.0, 1001.0]),
                  "6": itertools.cycle([1000.0, 1001.0, 999.0, 1000.0])}
        order: list[tuple[str, int]] = []
        for module in (interleave, session):
            monkeypatch.setattr(module, "run_repeat", fake_repeats(order, values))
            monkeypatch.setattr(module, "calibrate", lambda *_: True)
        monkeypatch.setattr(interleave, "warm_up", fake_warm_up(order))
        verdict, look = judge.judge_stored, judge.comparison_at_look

        def counted_verdict(store: ResultStore, candidate: Any, *more: Any) -> Any:
            self.verdicts[candidate.series_id] += 1
            return verdict(store, candidate, *more)

        def counted_look(store: ResultStore, candidate: Any, chosen: Any) -> Any:
            self.looks[candidate.series_id] += 1
            database = store._db

            def refused(sql: str, *_: Any) -> None:
                self.written_at_looks.append(sql)

            for name in ("execute", "execute_many"):
                monkeypatch.setattr(database, name, refused)
            try:
                return look(store, candidate, chosen)
            finally:
                for name in ("execute", "execute_many"):
                    monkeypatch.delattr(database, name)

        for module in (judge, judging):
            monkeypatch.setattr(module, "judge_stored", counted_verdict)
        monkeypatch.setattr(judge, "judge_against_baseline", _not_in_bench)
        monkeypatch.setattr(pacing, "comparison_at_look", counted_look)

    def clear(self) -> None:
        self.verdicts.clear()
        self.looks.clear()


def _not_in_bench(*_: Any) -> None:
    raise AssertionError("a bench judges through vgpu.bench.judging")


def _bench(db: Path, *more: str) -> tuple[int, str]:
    code, out, err = run_cli([*ARGS, "--db", str(db), *more])
    return code, " ".join((out + err).split())


def _stored_series(db: Path, scenario_id: str) -> list[str]:
    with ResultStore.open(db) as store:
        return list(dict.fromkeys(r.series_id for r in store.runs(scenario_id=scenario_id)))


def test_an_interleaved_then_a_plain_bench_judge_each_series_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counts = Counts(monkeypatch)
    db = tmp_path / "r.db"
    # interleaved with its twin, looked at block by block until decided
    code, text = _bench(db)
    assert code == EXIT_PASS, text
    [twin] = _stored_series(db, "bm6")
    [interleaved] = _stored_series(db, "6")
    assert counts.verdicts == {twin: 1, interleaved: 1}
    assert counts.looks[interleaved] >= 1 and set(counts.looks) == {interleaved}
    assert counts.written_at_looks == []

    counts.clear()  # the twin is stored: the scenario runs on its own, looked at
    code, text = _bench(db, "--runs", "3", "--until-decided")
    assert code == EXIT_INCONCLUSIVE, text  # separate series: the uncalibrated level
    assert "verdict vs scenario bm6: INCONCLUSIVE" in text
    [plain] = [s for s in _stored_series(db, "6") if s != interleaved]
    assert counts.verdicts == {plain: 1}
    assert counts.looks[plain] >= 1 and set(counts.looks) == {plain}
    assert counts.written_at_looks == []
    with ResultStore.open(db) as store:  # stored once it ran, as the verdict's reference
        chosen = store.series_reference(plain)
        assert chosen is not None and chosen.reference_series == twin


def test_the_interleaved_workload_and_the_rest_look_at_one_familys_share(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The twin has resnet50 stored but not BERT: BERT runs interleaved with it, resnet50
    on its own after it, and the command judges both as one family of 2. Each series'
    looks must stop on a FAIL at that family's share, not at a family of the workloads
    their own part of the command ran (1 each)."""
    Counts(monkeypatch)
    families: list[int] = []
    made = pacing.pacing_for

    def recorded(*args: Any, **kwargs: Any) -> Any:
        made_pacing = made(*args, **kwargs)
        if made_pacing is not None and "family" in kwargs:  # not the printed plan's
            families.append(made_pacing.design.family)
        return made_pacing

    for module in (interleave, session):
        monkeypatch.setattr(module, "pacing_for", recorded)
    db = tmp_path / "r.db"
    code, text = _bench(db)  # resnet50 alone, interleaved: a family of 1
    assert code == EXIT_PASS, text
    assert families and set(families) == {1}
    families.clear()
    code, text = _bench(db, "--workload", "bert-offline", "--until-decided")
    assert "scenario 6:" in text, text  # judged (the fake BERT runs report no accuracy)
    assert "Interleaved with its baseline" in text
    assert "at this workload's share of the 2.5%, 1.25% (the command judges its 2 " \
        "workloads as one family)" in text
    assert len(families) >= 2 and set(families) == {2}, families
