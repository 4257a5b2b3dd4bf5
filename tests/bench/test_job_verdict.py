"""`vgpu bench` ends in one verdict for the whole scenario and the exit code every
judging command shares (vgpu.exitcodes): the command in-process, its twin interleaved
block by block, each repeat faked by tests/bench/fake_repeats.py (it stores the
next throughput of its side), so that the verdict is known."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.bench.fake_repeats import fake_repeats, fake_warm_up
from tests.cli.invoke import run_cli
from vgpu.bench import interleave
from vgpu.exitcodes import EXIT_FAIL, EXIT_INCONCLUSIVE, EXIT_NO_REFERENCE, EXIT_PASS

ARGS = ["bench", "--scenario", "6", "--workload", "resnet50-offline", "--no-report"]


def _bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, twin: list[float],
           mine: list[float], *more: str) -> tuple[int, str]:
    values: dict[str, Iterator[float]] = {"bm6": iter(twin), "6": iter(mine)}
    order: list[tuple[str, int]] = []
    monkeypatch.setattr(interleave, "run_repeat", fake_repeats(order, values))
    monkeypatch.setattr(interleave, "warm_up", fake_warm_up(order))
    monkeypatch.setattr(interleave, "calibrate", lambda *_: True)
    code, out, err = run_cli([*ARGS, "--db", str(tmp_path / "r.db"), *more])
    return code, " ".join((out + err).split())


def test_identical_sides_pass_and_exit_0(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    drift = [1000.0, 985.0, 970.0, 955.0]
    code, text = _bench(tmp_path, monkeypatch, drift, [v * 0.998 for v in drift],
                        "--runs", "4")
    assert code == EXIT_PASS, text
    assert "scenario 6: PASS: resnet50-offline PASS (exit 0)" in text


def test_a_slowed_side_fails_and_exits_3(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    steady = [1000.0, 1004.0, 996.0, 1001.0]
    code, text = _bench(tmp_path, monkeypatch, steady, [v * 0.9 for v in steady],
                        "--runs", "4")
    assert code == EXIT_FAIL, text
    assert "scenario 6: FAIL: resnet50-offline FAIL (system_throughput FAIL: -10.0%" in text


def test_an_undecided_workload_is_named_with_what_would_decide_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 3% noise per run against a 2% tolerance: 4 blocks cannot decide
    noisy = [1000.0, 1030.0, 970.0, 1000.0]
    code, text = _bench(tmp_path, monkeypatch, noisy, [1000.0, 970.0, 1030.0, 985.0],
                        "--runs", "4")
    assert code == EXIT_INCONCLUSIVE, text
    line = text[text.index("scenario 6: INCONCLUSIVE"):]
    assert "resnet50-offline INCONCLUSIVE (system_throughput undecided:" in line
    assert "would decide" in line and "(exit 4)" in line


def test_nothing_to_judge_against_exits_5(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interleave, "run_repeat", _never)
    from vgpu.bench import session

    order: list[tuple[str, int]] = []
    monkeypatch.setattr(session, "run_repeat", fake_repeats(order, {"6": iter([1000.0] * 4)}))
    monkeypatch.setattr(session, "calibrate", lambda *_: True)
    code, out, err = run_cli([*ARGS, "--db", str(tmp_path / "r.db"), "--runs", "2",
                              "--no-baseline", "--json"])
    assert code == EXIT_NO_REFERENCE, out + err
    assert '"verdict": null' in out and '"exit_code": 5' in out


def _never(*_: Any) -> None:
    raise AssertionError("no twin runs with --no-baseline")
