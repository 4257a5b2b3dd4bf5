"""`vgpu calibrate noise`: stored series of one configuration pooled into the class's noise
levels, which `vgpu compare` then carries; bad input exits 2 and stores nothing."""

from __future__ import annotations

import json

from tests.cli.invoke import run_cli
from tests.results.series import AddSeries
from vgpu.exitcodes import exit_for
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SYSTEM_THROUGHPUT, load_series, series_of_run
from vgpu.results.verdict.noise_store import class_key


def _aa_series(add_series: AddSeries, levels: list[float]) -> list[int]:
    """One series per level: three repeats within 0.3% of it (a tight repeat level and a
    wide series level, as a shared CPU shows)."""
    return [add_series([{"a": level}, {"a": level * 1.003}, {"a": level * 0.997}])[0]
            for level in levels]


def test_calibration_from_stored_series_is_used_by_compare(
        store: ResultStore, add_series: AddSeries) -> None:
    first, *_ = runs = _aa_series(add_series, [1000.0, 1030.0, 985.0, 1012.0, 968.0])
    later = _aa_series(add_series, [950.0])[0]  # the same configuration, another minute
    db = str(store.path)
    code, _, err = run_cli(["compare", str(later), str(first), "--db", db, "--json"])
    before = json.loads(_)
    assert before["verdict"] != "FAIL" and code == exit_for(before["verdict"]), err
    assert "not calibrated" in before["checks"][0]["noise"]
    code, out, err = run_cli(["calibrate", "noise", "--from-runs",
                              ",".join(map(str, runs)), "--db", db])
    assert code == 0, err
    text = " ".join(out.split())
    assert "noise between series CV" in text and "calibrated from 5 series / 15 repeats" in text
    stored = store.noise(class_key(load_series(store, series_of_run(store, first))),
                         SYSTEM_THROUGHPUT)
    assert stored is not None and 0.015 < stored.series_cv < 0.04
    assert stored.repeat_cv < 0.005
    code, out, err = run_cli(["compare", str(later), str(first), "--db", db, "--json"])
    after = json.loads(out)
    assert code == exit_for(after["verdict"]), err
    assert "calibrated from 5 series" in after["checks"][0]["noise"]
    assert after["verdict"] != "FAIL"  # -5% against a 2.3% series level: not a finding


def test_bad_calibration_input_exits_2_and_stores_nothing(
        store: ResultStore, add_series: AddSeries) -> None:
    one = _aa_series(add_series, [1000.0])
    db = str(store.path)
    code, _, err = run_cli(["calibrate", "noise", "--from-runs", str(one[0]), "--db", db])
    assert code == 2 and "--from-runs" in err and "2 or more run ids" in err
    vm = one[0]
    bm = add_series([{"a": 1.0}, {"a": 1.1}], target_kind="bare-metal")[0]
    code, _, err = run_cli(["calibrate", "noise", "--from-runs", f"{vm},{bm}", "--db", db])
    assert code == 2 and "different classes" in err
    assert store.noise(class_key(load_series(store, series_of_run(store, vm))),
                       SYSTEM_THROUGHPUT) is None
