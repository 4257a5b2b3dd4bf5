"""`vgpu report` shows exactly the verdicts `vgpu bench` printed for the same runs: real
benches on this machine (real harness, LoadGen and ONNX Runtime, tiny model, short runs)
through the CLI, then the report rendered from the store. Two references: the bare-metal
twin bm6 (run interleaved with scenario 6, then stored and judged against: the session's
recording, tests/bench/recording.py), and a named baseline (`vgpu baseline set`) that a
scenario file names with its own tolerances."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.bench.conftest import RAN_AND_STORED
from tests.bench.recording import Scenario6Recording
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import all_series
from vgpu.results.views.report import Table, automatic_judgements, build_report

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
# 5 repeats: a half-second Offline run ends before LoadGen's minimum duration (INVALID)
# when the machine runs it more than the probe's 1.5x headroom faster than it probed, which
# a busy 2-core machine does; a series left with one VALID repeat has no check to show
# (seen twice beside the whole suite with 2 and 3 repeats)
QUICK = ("--workload", "resnet50-offline", "--runs", "5", "--duration", "0.5", "--json",
         "--no-report")


@dataclass
class Benched:
    folder: Path
    outputs: dict[str, dict[str, Any]]  # scenario id -> `vgpu bench --json` of its latest
    interleaved: dict[str, Any]  # scenario 6's first bench: its twin ran interleaved


def _named_baseline_scenario(folder: Path) -> Path:
    """Scenario 6 under another id, judged against the named baseline 'lab' with a
    throughput band of its own."""
    data = yaml.safe_load((ROOT / "scenarios" / "mig_4g_2g_1g.yaml").read_text())
    data.update(id="named6", name="named-baseline-6",
                baseline={"reference_run": "lab"},
                tolerances={"throughput_pct": 40, "latency_pct": 50})
    path = folder / "named6.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def benched(scenario6_recording: Scenario6Recording,
            tmp_path_factory: pytest.TempPathFactory) -> Benched:
    """The recording's store copied, its twin named 'lab', then the named scenario benched
    against it."""
    folder = tmp_path_factory.mktemp("bench-report")
    recorded = scenario6_recording
    with ResultStore.open_existing(recorded.copy_store(folder)) as store:
        bare_metal = next(r for r in store.runs(status="ok") if r.target_kind == "bare-metal")
    named = recorded.vgpu(folder, "baseline", "set", str(bare_metal.id), "--name", "lab")
    assert named.returncode == 0, named.stderr
    against_named = recorded.vgpu(folder, "bench", str(_named_baseline_scenario(folder)),
                                  *QUICK)
    assert against_named.returncode in RAN_AND_STORED, against_named.stderr  # 3: FAIL, still stored
    outputs = {"6": json.loads(recorded.again.stdout),
               "named6": json.loads(against_named.stdout)}
    return Benched(folder, outputs, json.loads(recorded.interleaved.stdout))


def _report_verdicts(folder: Path) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Scenario id -> the report's verdict and (metric, verdict) of each check. The
    checks table lists the comparisons in the order of the verdict table's rows."""
    with ResultStore.open_existing(folder / "vgpu-results.db") as store:
        sections = dict(build_report(store).sections)
    verdicts, checks = sections["Verdict: VM vs bare metal"], \
        sections["Every check of the compared series"]
    assert isinstance(verdicts, Table) and isinstance(checks, Table)
    by_title: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for row in checks.rows:
        by_title[row[0]].append((row[1], row[7]))
    judged = [row for row in verdicts.rows if row[9] != "no verdict"]
    assert len(judged) == len(by_title)
    return {row[0]: (row[9], checks_of) for row, checks_of in
            zip(judged, by_title.values(), strict=True)}


def _bench_verdict(output: dict[str, Any]) -> tuple[str, list[tuple[str, str]]]:
    [workload] = output["workloads"]
    return workload["verdict"], [(c["metric"], c["verdict"]) for c in workload["checks"]]


def test_the_report_shows_the_verdicts_bench_printed(benched: Benched) -> None:
    shown = _report_verdicts(benched.folder)
    printed = {scenario: _bench_verdict(out) for scenario, out in benched.outputs.items()}
    assert all(verdict in ("PASS", "FAIL", "INCONCLUSIVE") for verdict, _ in printed.values())
    assert {s: shown.get(s) for s in printed} == printed


def test_each_verdict_names_the_reference_its_run_stored(benched: Benched) -> None:
    [twin] = benched.interleaved["workloads"]
    [named] = benched.outputs["named6"]["workloads"]
    assert twin["checks"][0]["design"] == "interleaved"
    assert named["baseline"] == "baseline 'lab'"
    # the named scenario's own band, not the report's --tolerance
    assert named["checks"][0]["band_pct"]["lower"] == pytest.approx(-40.0)
    with ResultStore.open_existing(benched.folder / "vgpu-results.db") as store:
        interleaved = store.series_reference(twin["series_id"])
        by_name = store.series_reference(named["series_id"])
    assert interleaved is not None and by_name is not None
    assert (interleaved.relation, interleaved.kind) == ("interleaved-twin", "vm-vs-bare-metal")
    assert (by_name.relation, by_name.tolerance) == ("named-baseline", pytest.approx(0.4))
    assert by_name.reference_series == interleaved.reference_series  # the twin, named 'lab'


def test_the_interleaved_verdict_is_judged_again_as_bench_printed_it(benched: Benched) -> None:
    """The report judges each scenario's latest series (scenario 6's is judged against the
    stored twin); its judgement of the series before, the one with the twin interleaved,
    is the verdict bench printed for it."""
    later = {out["workloads"][0]["series_id"] for out in benched.outputs.values()}
    with ResultStore.open_existing(benched.folder / "vgpu-results.db") as store:
        earlier = [s for s in all_series(store) if s.series_id not in later]
        [judged] = [j for j in automatic_judgements(earlier, 0.02, store)
                    if j.candidate is not None and j.candidate.scenario_id == "6"]
    shown = judged.comparison.verdict, [(c.metric, c.verdict) for c in judged.comparison.checks]
    assert shown == _bench_verdict(benched.interleaved)
    assert judged.reference is not None and judged.reference.scenario_id == "bm6"
