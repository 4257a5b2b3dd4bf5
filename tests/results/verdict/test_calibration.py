"""References calibrated from stored golden runs: pooled per host class, written to a
file, read back and used by `vgpu compare --references` with the two-sample statistics."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.cli.invoke import run_cli
from tests.results.series import AddSeries, Repeat, record_series
from vgpu.results.store.records import InstanceResult, Platform
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SeriesData, load_series, series_of_run
from vgpu.results.verdict.calibration import calibrate, host_class
from vgpu.results.verdict.noise_store import calibrate_series

GOLDEN = [{"a": 500.0, "b": 500.0}, {"a": 505.0, "b": 498.0}, {"a": 497.0, "b": 503.0}]
SLOWER = [{"a": 450.0, "b": 452.0}, {"a": 448.0, "b": 449.0}, {"a": 451.0, "b": 447.0}]
SAME = [{"a": 501.0, "b": 500.0}, {"a": 499.0, "b": 502.0}, {"a": 500.0, "b": 500.0}]


def test_golden_series_pool_into_one_reference_per_host_class(
        store: ResultStore, add_series: AddSeries) -> None:
    add_series(GOLDEN, scenario_id="bm6", target_kind="bare-metal")
    add_series(GOLDEN[::-1], scenario_id="bm6", target_kind="bare-metal")
    add_series(SLOWER, scenario_id="6", target_kind="vm")
    references = calibrate(store, ["bm6"])
    [reference] = references
    assert (reference.target_kind, reference.metric, reference.n, reference.series) == (
        "bare-metal", "system_throughput", 6, 2)
    totals = [sum(r.values()) for r in GOLDEN] * 2
    assert abs(reference.mean - sum(totals) / 6) < 1e-9
    assert reference.stdev > 0


def test_compare_against_a_calibrated_file_judges_with_the_same_statistics(
        tmp_path: Path, store: ResultStore, add_series: AddSeries) -> None:
    golden = [add_series(GOLDEN, scenario_id="bm6", target_kind="bare-metal")[0],
              add_series(GOLDEN[::-1], scenario_id="bm6", target_kind="bare-metal")[0]]
    # the two golden series are also the class's noise calibration: no series level seen,
    # but two series bound it only loosely (90% upper bound), so the same values cannot PASS
    calibrate_series(store, [load_series(store, series_of_run(store, r)) for r in golden])
    db, out = str(store.path), tmp_path / "refs.yaml"
    code, _, err = run_cli(["baseline", "calibrate", str(out), "--db", db, "-s", "bm6"])
    assert code == 0, err
    written = yaml.safe_load(out.read_text())
    assert written["version"] == 1 and [r["n"] for r in written["references"]] == [6]

    slower = add_series(SLOWER, scenario_id="bm6", target_kind="bare-metal")[0]
    same = add_series(SAME, scenario_id="bm6", target_kind="bare-metal")[0]
    code, stdout, _ = run_cli(["compare", str(slower), "--references", str(out), "--db", db,
                               "--json"])
    failed = json.loads(stdout)
    assert (code, failed["verdict"], failed["kind"]) == (3, "FAIL", "run-vs-baseline")
    assert "calibrated reference (2 series, n=6)" in failed["title"]
    assert -11 < failed["checks"][0]["difference_pct"] < -9
    code, stdout, _ = run_cli(["compare", str(same), "--references", str(out), "--db", db,
                               "--json"])
    same_verdict = json.loads(stdout)
    assert (code, same_verdict["verdict"]) == (4, "INCONCLUSIVE")  # exit 4: undecided
    assert "series per side" in same_verdict["checks"][0]["reason"]
    code, stdout, _ = run_cli(["compare", str(same), "--references", str(out), "--db", db])
    printed = " ".join(stdout.split())
    assert code == 4 and "verdict: INCONCLUSIVE" in printed
    assert "system_throughput INCONCLUSIVE: 95% CI" in printed  # why, and what would decide
    assert "series per side" in printed


def test_a_broken_or_unmatched_reference_file_exits_2_naming_it(
        tmp_path: Path, store: ResultStore, add_series: AddSeries) -> None:
    run = add_series(GOLDEN, scenario_id="6", target_kind="vm")[0]
    broken = tmp_path / "broken.yaml"
    broken.write_text("version: 9\nreferences: []\n")
    code, _, err = run_cli(["compare", str(run), "--references", str(broken),
                            "--db", str(store.path)])
    assert code == 2 and "version" in err and str(broken) in err
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({"version": 1, "references": [{
        "target_kind": "bare-metal", "gpu": "A100-80GB", "profile": "1g.10gb",
        "workload": "x", "runtime": "container", "metric": "system_throughput",
        "unit": "samples/s", "mean": 100.0, "stdev": 1.0, "n": 3, "series": 1,
        "platform": {}}]}))
    code, _, err = run_cli(["compare", str(run), "--references", str(other),
                            "--db", str(store.path)])
    assert code == 2 and "no reference for vm / CPU" in " ".join(err.split())
    assert "bare-metal / A100-80GB / 1g.10gb" in " ".join(err.split())


def test_the_host_class_does_not_depend_on_the_repeat_count(store: ResultStore) -> None:
    """One entry per instance: series of 2 and of 3 repeats of one configuration (one
    4g and one 1g instance) are one class, as `vgpu calibrate noise` pools them."""
    def series(repeats: int) -> SeriesData:
        run = Repeat([InstanceResult(
            name=name, status="ok", validity="VALID", throughput=100.0,
            platform=Platform(gpu="A100-80GB", mig_profile=profile))
            for name, profile in (("a", "4g.40gb"), ("b", "1g.10gb"))])
        return load_series(store, record_series(store, [run] * repeats, workload="w").series_id)

    two, three = series(2), series(3)
    assert host_class(two) == host_class(three)
    assert host_class(two)[2] == "1g.10gb+4g.40gb"
