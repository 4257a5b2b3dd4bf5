"""`vgpu bench` on this machine, end to end: real harness processes, real LoadGen and
ONNX Runtime (tiny models, short runs), the real SQLite store and report."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import xmlschema

from tests.bench.conftest import VGPU, exit_of_json, vgpu_env
from tests.bench.recording import Scenario6Recording as Recording
from tests.cli.counting import count_loads_and_plans
from tests.cli.invoke import run_cli
from vgpu.catalog import INVENTORY_ENV
from vgpu.exitcodes import EXIT_NO_REFERENCE, exit_for
from vgpu.results.store.result_store import ResultStore

pytestmark = pytest.mark.slow
JUNIT_XSD = Path(__file__).parent.parent / "results" / "junit.xsd"
PLANNED = {"s6-4g": "4g.40gb", "s6-2g": "2g.20gb", "s6-1g": "1g.10gb"}


def _vgpu(folder: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*VGPU, *args], cwd=folder, env=vgpu_env(cache), capture_output=True,
                          text=True, timeout=300, check=False)


def test_scenario_6_runs_three_instances_stored_with_summary_and_report(
    scenario6_recording: Recording,
) -> None:
    out = json.loads(scenario6_recording.again.stdout)
    assert [t["instance"] for t in out["targets"]] == ["s6-4g", "s6-2g", "s6-1g"]
    assert all(t["device"].startswith("CPU, no MIG slice (planned ") for t in out["targets"])
    assert any("no GPU or MIG slice is used" in note for note in out["notes"])
    [workload] = out["workloads"]
    assert workload["failure"] is None
    assert workload["workload"].startswith("resnet50-offline (resnet50/tiny fp16 Offline")
    assert set(workload["calibrated_qps"]) == {"s6-4g", "s6-2g", "s6-1g"}
    system = workload["statistics"]["system_throughput"]
    # The statistics hold the VALID repeats. A half-second run on a busy machine can miss
    # LoadGen's rules: it is left out, named with its reasons, never averaged in.
    left_out = {r["run_id"] for r in workload["invalid_runs"]}
    assert all(r["reasons"] for r in workload["invalid_runs"])
    assert system["n"] == workload["valid_repeats"] == 2 - len(left_out) >= 1
    assert system["mean"] > 0
    if system["n"] == 2:
        assert system["ci95_low"] < system["mean"] < system["ci95_high"]
        per_repeat = [sum(v["values"][i] for v in workload["instances"].values())
                      for i in (0, 1)]
        assert system["values"] == pytest.approx(per_repeat)
    assert all(0 <= skew < 1.0 for skew in workload["sync_skew_s"])

    with ResultStore.open_existing(scenario6_recording.store) as store:
        runs = store.runs(series_id=workload["series_id"])
        assert [(r.status, r.repeat_index) for r in runs] == [("ok", 0), ("ok", 1)]
        assert runs[0].scenario_revision is not None  # the catalogue file is in git
        for run in runs:
            instances = store.instances(run.id)
            assert [i.result.name for i in instances] == ["s6-4g", "s6-2g", "s6-1g"]
            for inst in instances:
                assert inst.result.device_kind == "cpu"
                planned = PLANNED[inst.result.name]
                assert inst.result.device_note == f"CPU, no MIG slice (planned {planned})"
                assert inst.result.throughput and inst.result.throughput > 0
                assert inst.result.latency_ns["p50"] <= inst.result.latency_ns["p99"]
                log_dir = Path(inst.result.log_dir or "")
                assert (log_dir / "mlperf_log_detail.txt").exists()
                assert json.loads((log_dir / "result.json").read_text())["status"] == "ok"
            run_level = [m.name for m in store.metrics(run.id) if m.instance is None]
            assert "other_cpu_share" in run_level
            assert len(run_level) == len(set(run_level)), run_level  # each stored once
    html = (scenario6_recording.folder / "vgpu-report.html").read_text()
    assert html.count("data:image/png;base64,") >= 2


def test_scenario_6_is_judged_against_its_bare_metal_baseline(
    scenario6_recording: Recording,
) -> None:
    workload = scenario6_recording.workload(scenario6_recording.again)
    assert workload["baseline"] == "scenario bm6"
    assert workload["verdict"] in ("PASS", "FAIL", "INCONCLUSIVE")
    assert [c["metric"] for c in workload["checks"]] == ["system_throughput"]
    assert scenario6_recording.again.returncode == exit_for(workload["verdict"])


def test_results_baseline_and_compare_commands(scenario6_recording: Recording,
                                               tmp_path: Path) -> None:
    folder = tmp_path
    scenario6_recording.copy_store(folder)
    listing = scenario6_recording.vgpu(folder, "results", "--export", "csv")
    assert listing.returncode == 0
    rows = listing.stdout.strip().splitlines()
    assert len(rows) == 1 + 6 * 3  # header + (4 interleaved + 2) runs x 3 instances
    with ResultStore.open(folder / "vgpu-results.db") as store:
        bm_run = store.runs(scenario_id="bm6")[0].id
    six_run = scenario6_recording.workload(scenario6_recording.again)["run_ids"][0]
    named = scenario6_recording.vgpu(folder, "baseline", "set", str(bm_run), "--name", "bm6-cpu")
    assert named.returncode == 0 and "bm6-cpu" in named.stdout
    junit = folder / "verdict.xml"
    compared = scenario6_recording.vgpu(folder, "compare", str(six_run), "--baseline", "bm6-cpu",
                     "--junit", str(junit), "--json", "--tolerance", "50")
    verdict = json.loads(compared.stdout)
    assert verdict["kind"] == "run-vs-baseline"
    assert compared.returncode == exit_for(verdict["verdict"])
    xmlschema.XMLSchema(JUNIT_XSD).validate(str(junit))
    report = scenario6_recording.vgpu(folder, "report", "--out", "r.html", "--markdown", "r.md")
    assert report.returncode == 0, report.stderr
    assert (folder / "r-png" / "verdict_ratios.png").exists()


def test_bench_interleaves_the_missing_twin_and_with_baseline_runs_it_again(
    scenario6_recording: Recording, tmp_path: Path
) -> None:
    first = scenario6_recording.interleaved
    assert "No stored run of scenario bm6" in " ".join(first.stderr.split())
    [workload] = json.loads(first.stdout)["workloads"]
    assert workload["baseline"] == "scenario bm6, run interleaved with this one"
    assert workload["verdict"] in ("PASS", "FAIL", "INCONCLUSIVE")
    assert workload["checks"][0]["design"] == "interleaved"
    assert first.returncode == exit_for(workload["verdict"])
    again = scenario6_recording.again  # the twin is stored now
    assert again.returncode == exit_of_json(again.stdout), again.stderr
    assert "bm6" not in again.stderr
    scenario6_recording.copy_store(tmp_path)  # the runs below go to a copy
    args = ("bench", "--scenario", "6", "--workload", "resnet50-offline", "--duration", "0.5",
            "--json", "--no-report")
    forced = scenario6_recording.vgpu(tmp_path, *args, "--runs", "1", "--with-baseline")
    assert forced.returncode == exit_of_json(forced.stdout), forced.stderr
    [workload] = json.loads(forced.stdout)["workloads"]
    assert workload["baseline"] == "scenario bm6, run interleaved with this one"
    both = scenario6_recording.vgpu(tmp_path, *args, "--with-baseline", "--no-baseline")
    assert both.returncode == 2 and "contradict" in both.stderr
    skipped = scenario6_recording.vgpu(tmp_path, *args, "--runs", "1", "--no-baseline",
                    "--db", "other.db")
    assert skipped.returncode == 5, skipped.stderr  # nothing to judge against
    assert json.loads(skipped.stdout)["workloads"][0]["verdict"] is None
    with ResultStore.open(tmp_path / "vgpu-results.db") as store:
        # ABBA blocks: bm6 6 | 6 bm6; then 6 alone, twice (twin stored); forced (--runs 1,
        # so one complete pair): bm6 6 | 6 bm6; the warm-up runs are not stored
        assert [r.scenario_id for r in store.runs()] == ["bm6", "6", "6", "bm6", "6", "6",
                                                         "bm6", "6", "6", "bm6"]
    with ResultStore.open(tmp_path / "other.db") as store:
        assert [r.scenario_id for r in store.runs()] == ["6"]


def test_with_baseline_needs_a_baseline_scenario(tmp_path: Path, harness_cache: Path) -> None:
    run = _vgpu(tmp_path, harness_cache, "bench", "--scenario", "bm6", "--with-baseline")
    assert run.returncode == 2
    assert "baseline.scenario: --with-baseline needs a baseline scenario" in run.stderr
    if (tmp_path / "vgpu-results.db").exists():
        with ResultStore.open(tmp_path / "vgpu-results.db") as store:
            assert store.runs() == []


def test_a_bench_on_an_inventory_loads_it_once(tmp_path: Path, harness_cache: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The command's Site carries the inventory through where the run goes, the request,
    the twin's plan and the targets (four loads of the file before the Site)."""
    counted = count_loads_and_plans(monkeypatch)
    monkeypatch.setenv("VGPU_HARNESS_CACHE", str(harness_cache))
    monkeypatch.setenv(INVENTORY_ENV, "none")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(["bench", "--scenario", "bm6", "--inventory", "local",
                              "--workload", "resnet50-offline", "--runs", "1",
                              "--duration", "0.2", "--no-baseline", "--no-report", "--json",
                              "--db", str(tmp_path / "r.db")])
    assert code == EXIT_NO_REFERENCE, err  # bm6 names no baseline: nothing to judge
    assert counted["load_inventory"] == 1
    [workload] = json.loads(out)["workloads"]
    assert "no baseline" in workload["baseline"]  # bm6 names none
    with ResultStore.open(tmp_path / "r.db") as store:
        assert [r.scenario_id for r in store.runs()] == ["bm6"]
