"""The report, the bench summary, the export and `vgpu results --run` on runs the real
harness measured: `vgpu bench --scenario 1` on this machine (its bare-metal twin bm1
benched and stored first), two workloads of different models, four repeats each. The HTML
report is opened in headless Chromium: a screenshot that is not blank and a DOM whose
verdict table holds one row per scenario and workload."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib import image as mpimg

from tests.bench.conftest import RAN_AND_STORED
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import all_series
from vgpu.results.views import format as fmt
from vgpu.results.views.report import automatic_judgements, build_report, write_report

# side: the browser test runs in the suite's side process, and the module's real benches
# are made once, there, instead of once in each process
pytestmark = [pytest.mark.slow, pytest.mark.side]
VGPU = [sys.executable, "-m", "vgpu"]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WORKLOADS = ("resnet50-offline", "bert-offline")
# 4 repeats: a half-second Offline run ends INVALID (before LoadGen's minimum duration)
# when a busy machine runs it faster than its probe's headroom; with 2, one INVALID left a
# series without a check beside the whole suite
REPEATS = 4
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


@dataclass
class Benched:
    folder: Path
    env: dict[str, str]
    summary: str

    @property
    def db(self) -> Path:
        return self.folder / "vgpu-results.db"

    def vgpu(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*VGPU, *args], cwd=self.folder, env=self.env,
                              capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def benched(tmp_path_factory: pytest.TempPathFactory) -> Benched:
    folder = tmp_path_factory.mktemp("real-runs")
    env = {**os.environ, "VGPU_HARNESS_CACHE": str(tmp_path_factory.mktemp("models")),
           "VGPU_INVENTORY": "none", "COLUMNS": "220"}
    done = Benched(folder, env, "")
    quick = ("--runs", str(REPEATS), "--duration", "0.5", "--no-report",
             *(arg for w in WORKLOADS for arg in ("--workload", w)))
    # the twin first, stored: scenario 1 is judged against it (no warm-up runs, where
    # running it interleaved adds one a side; that design has tests of its own)
    twin = done.vgpu("bench", "--scenario", "bm1", *quick)
    assert twin.returncode in RAN_AND_STORED, twin.stderr
    bench = done.vgpu("bench", "--scenario", "1", *quick)
    assert bench.returncode in RAN_AND_STORED, bench.stderr  # 3: a FAIL, still stored
    done.summary = bench.stdout
    return done


def _result_jsons(store: ResultStore, workload: str) -> list[dict[str, Any]]:
    """The result.json files the harness wrote for the VM-scenario runs of ``workload``."""
    found = []
    for run in store.runs(scenario_id="1"):
        if run.workload.startswith(workload):
            for stored in store.instances(run.id):
                path = Path(stored.result.log_dir or "") / "result.json"
                found.append(json.loads(path.read_text()))
    return found


def test_bench_summary_has_a_telemetry_table_per_workload(benched: Benched) -> None:
    with ResultStore.open_existing(benched.db) as store:
        records = {w: _result_jsons(store, w) for w in WORKLOADS}
    lines = benched.summary.splitlines()
    for workload, results in records.items():
        cpu = [r["telemetry"]["host"]["process_cpu_percent_mean"] for r in results]
        peak = max(r["telemetry"]["host"]["process_cpu_percent_max"] for r in results)
        # scenario 1's table: the last one printed for the workload
        title = max(i for i, line in enumerate(lines)
                    if line.startswith(f"{workload}: telemetry (mean / max)"))
        row = next(line for line in lines[title:] if "s1-7g" in line)
        assert f"{fmt.number(sum(cpu) / len(cpu))} / {fmt.number(peak)}" in row
        assert "no GPU (CPU run)" in row
    assert "e+0" not in benched.summary


class _Dom(HTMLParser):
    """The h2 headings, the tables by id (rows of cell texts) and the images."""

    def __init__(self) -> None:
        super().__init__()
        self.headings: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.images = 0
        self._table: str | None = None
        self._text: list[str] | None = None
        self._in_h2 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._table = dict(attrs).get("id") or f"table{len(self.tables)}"
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag == "td":
            self._text = []
        elif tag == "h2":
            self._in_h2, self._text = True, []
        elif tag == "img":
            self.images += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._table is not None and self._text is not None:
            self.tables[self._table][-1].append("".join(self._text))
            self._text = None
        elif tag == "h2" and self._text is not None:
            self.headings.append("".join(self._text))
            self._in_h2, self._text = False, None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)


def _chromium(folder: Path, html_path: Path, *mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={folder / 'chromium-profile'}", *mode,
         html_path.as_uri()], check=True, timeout=120, capture_output=True, text=True)


def _assert_not_blank(shot: Path) -> None:
    pixels = mpimg.imread(shot)[:, :, :3]
    assert pixels.shape[:2] == (2200, 1400)
    flat = pixels.reshape(-1, 3)
    assert len(np.unique((flat[::53] * 255).astype(np.uint8), axis=0)) > 20  # not one colour
    assert float(pixels.var()) > 0.01


@pytest.mark.browser
def test_report_verdict_first_in_headless_chromium(benched: Benched) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (scripts/setup.sh --test installs it)")
    with ResultStore.open_existing(benched.db) as store:
        report = build_report(store)
        judged = {j.candidate.workload.split(" (")[0]: j.comparison
                  for j in automatic_judgements(all_series(store), 0.02, store) if j.candidate}
    html_path = benched.folder / "report.html"
    write_report(report, html_path)
    shot = benched.folder / "report.png"
    _chromium(benched.folder, html_path, f"--screenshot={shot}", "--window-size=1400,2200")
    print(f"report screenshot: {shot}")
    _assert_not_blank(shot)
    dom = _Dom()
    dom.feed(_chromium(benched.folder, html_path, "--dump-dom").stdout)
    assert dom.headings[0] == "Verdict: VM vs bare metal"
    order = [next(i for i, h in enumerate(dom.headings) if h.startswith(prefix))
             for prefix in ("Verdict figure", "Workload resnet50-offline",
                            "Workload bert-offline", "Platform of the latest series",
                            "Telemetry per instance", "LoadGen validity",
                            "Runs of the series shown")]
    assert order == sorted(order)
    rows = {row[1]: row for row in dom.tables["verdict"][1:]}
    assert set(rows) == set(WORKLOADS)
    for workload, row in rows.items():
        check = judged[workload].checks[0]
        assert row[0] == "1" and row[3] == "bm1 bare-metal"
        assert row[6] == fmt.ratio(check.ratio) and row[8] == ">= 0.980"
        assert row[9] == judged[workload].verdict
        assert row[9] in ("PASS", "FAIL", "INCONCLUSIVE")
    assert {row[6] for row in dom.tables["validity"][1:]} <= {"VALID", "INVALID"}
    assert dom.images == len(report.charts) >= 4  # verdict, two workloads, telemetry


def test_results_run_reads_a_run_back(benched: Benched) -> None:
    with ResultStore.open_existing(benched.db) as store:
        run = store.runs(scenario_id="1")[-1]
        [stored] = store.instances(run.id)
    record = json.loads((Path(stored.result.log_dir or "") / "result.json").read_text())
    host = record["telemetry"]["host"]
    shown = benched.vgpu("results", "--run", str(run.id))
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert f"run {run.id}: scenario 1" in out and "s1-7g" in out
    assert stored.result.validity in out
    for reason in stored.result.validity_reasons:
        assert reason[:40] in out.replace("\n", " ")
    assert fmt.number(stored.result.throughput) in out
    assert fmt.duration_ns(stored.result.latency_ns["p50"]) in out
    assert fmt.duration_ns(stored.result.latency_ns["p99"]) in out
    cpu = f"{fmt.number(host['process_cpu_percent_mean'])} / " \
          f"{fmt.number(host['process_cpu_percent_max'])}"
    assert cpu in out
    assert "ONNX Runtime" in out and "CPUExecutionProvider" in out
    missing = benched.vgpu("results", "--run", "9999")
    assert missing.returncode == 2 and "no run 9999" in missing.stderr


def test_csv_export_carries_the_harness_telemetry(benched: Benched) -> None:
    exported = benched.vgpu("results", "--export", "csv")
    assert exported.returncode == 0, exported.stderr
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    with ResultStore.open_existing(benched.db) as store:
        for row in rows:
            [stored] = [s for s in store.instances(int(row["run_id"]))
                        if s.result.name == row["instance"]]
            host = stored.result.result["telemetry"]["host"]
            assert float(row["process_cpu_pct_mean"]) == host["process_cpu_percent_mean"]
            assert float(row["process_cpu_pct_max"]) == host["process_cpu_percent_max"]
            assert row["gpu_util_mean"] == "" and row["power_w_mean"] == ""
            assert "gpu_util: no GPU (CPU run)" in row["telemetry_notes"]
    assert len(rows) == 2 * len(WORKLOADS) * REPEATS  # bm1 and 1, each repeat, one instance
