from __future__ import annotations

import base64
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image as mpimg

from tests.results.series import QUIET
from vgpu import catalog
from vgpu.results.store.records import Metric
from vgpu.results.store.result_store import ResultStore
from vgpu.results.store.series import SYSTEM_THROUGHPUT, WORST_P99, load_series, series_of_run
from vgpu.results.verdict.judge import judge_against_baseline
from vgpu.results.verdict.noise_store import class_key
from vgpu.results.views.report import Note, Table, build_report, write_report

AddSeries = Callable[..., list[int]]

ROOT = Path(__file__).resolve().parents[3]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _populate(store: ResultStore, add_series: AddSeries) -> None:
    six = [{"4g": 500.0 + d, "2g": 300.0 - d, "1g": 200.0} for d in (0.0, 1.0, -1.0)]
    add_series(six, target_kind="bare-metal", loadgen_scenario="SingleStream")
    vm = add_series([{k: v * 0.995 for k, v in r.items()} for r in six],
                    loadgen_scenario="SingleStream")
    # the VM class's noise calibrated quiet, for each metric judged (a latency has its
    # own): the verdict rests on the repeats alone
    for metric in (SYSTEM_THROUGHPUT, WORST_P99):
        store.save_noise(class_key(load_series(store, series_of_run(store, vm[0]))),
                         metric, QUIET, [], {})
    add_series([{"7g": 940.0}, {"7g": 945.0}, {"7g": 950.0}], scenario_id="1")
    for workers, throughput in ((1, 100.0), (2, 195.0), (4, 380.0)):
        add_series([{}] * 2, scenario_id="train", workload=f"train resnet50 x{workers}",
                   kind="training",
                   metrics=[[Metric("throughput", throughput + d, "samples/s"),
                             Metric("workers", workers)] for d in (0.0, 1.0)])


def test_report_has_verdicts_tables_and_embedded_charts(
    tmp_path: Path, store: ResultStore, add_series: AddSeries
) -> None:
    _populate(store, add_series)
    report = build_report(store)
    html = report.html()
    names = [chart.filename for _h, chart in report.charts]
    # One panel per workload (no telemetry recorded; the training workloads differ: no
    # speedup line).
    assert names == ["verdict_ratios.png", "workload_resnet50_tiny_onnxruntime_Offline_1.png"]
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)
    assert len(images) == len(names)
    assert all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    assert "vm-vs-bare-metal" not in html  # titles, not kinds, are shown
    assert "VM vs bare metal, scenario 6" in html and "PASS" in html
    heading, verdicts = report.sections[0]
    assert heading == "Verdict: VM vs bare metal" and isinstance(verdicts, Table)
    # Scenario 6 VM vs bare metal: 995/1000 of the system throughput, within 2%; scenario
    # 1 has no bare-metal series.
    row, alone = verdicts.rows
    assert alone[:4] == ["1", "resnet50/tiny onnxruntime Offline", "vm",
                         "no bare-metal run stored"] and alone[9] == "no verdict"
    assert row[:4] == ["6", "resnet50/tiny onnxruntime Offline", "vm", "6 bare-metal"]
    assert row[4:10] == ["995", "1,000", "0.995", "[0.994, 0.996]", ">= 0.980", "PASS"]
    assert re.search(r"\d\.\d+e[+-]\d", html) is None  # never 1.521e+04
    assert "<link" not in html and "<script" not in html  # self-contained
    written = write_report(report, tmp_path / "r.html", tmp_path / "r.md", tmp_path / "png")
    assert {p.name for p in written} == {"r.html", "r.md", *names}
    markdown = (tmp_path / "r.md").read_text()
    assert "| comparison | metric |" in markdown
    assert "![Verdict figure: throughput ratio, 95% CI and tolerance band]" \
        "(png/verdict_ratios.png)" in markdown


def test_training_speedup_chart_from_generic_metrics(
    store: ResultStore, add_series: AddSeries
) -> None:
    for workers, throughput in ((1, 100.0), (2, 195.0), (4, 380.0)):
        add_series([{}] * 2, scenario_id="train", workload="train resnet50", kind="training",
                   target_kind="vm",
                   metrics=[[Metric("throughput", throughput + d, "samples/s"),
                             Metric("workers", workers)] for d in (0.0, 1.0)])
    report = build_report(store)
    assert [chart.filename for _h, chart in report.charts] == ["training_speedup.png"]


@pytest.mark.browser
def test_report_renders_in_headless_chromium(
    tmp_path: Path, store: ResultStore, add_series: AddSeries
) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (scripts/setup.sh --test installs it)")
    _populate(store, add_series)
    html_path = tmp_path / "report.html"
    write_report(build_report(store), html_path)
    shot = tmp_path / "shot.png"
    subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
         f"--screenshot={shot}", "--window-size=1200,2000", html_path.as_uri()],
        check=True, timeout=120, capture_output=True,
    )
    pixels = mpimg.imread(shot)[:, :, :3]
    assert pixels.shape[:2] == (2000, 1200)
    assert float(pixels.var()) > 0.01
    colours = {tuple(c) for c in (pixels.reshape(-1, 3)[::97] * 255).astype(np.uint8)}
    assert len(colours) > 20


def test_vm_series_meets_its_bare_metal_twin_and_scenario_gains_are_tabled(
    store: ResultStore, add_series: AddSeries
) -> None:
    six = [{"4g": 500.0 + d, "2g": 300.0, "1g": 200.0} for d in (0.0, 1.0, -1.0)]
    scenario_6 = str(ROOT / "scenarios" / "mig_4g_2g_1g.yaml")  # baseline: scenario bm6
    add_series(six, scenario_id="bm6", target_kind="bare-metal")
    vm = add_series(six, scenario_id="6", target_kind="vm", scenario_file=scenario_6)
    add_series([{"7g": 945.0}, {"7g": 946.0}, {"7g": 944.0}], scenario_id="1")
    # as `vgpu bench` does when the series ends: its reference chosen and stored
    judge_against_baseline(store, catalog.load("6"),
                           load_series(store, series_of_run(store, vm[0])))
    report = build_report(store)
    html = report.html()
    assert "VM vs bare metal, scenario 6" in html
    gains = next(t for h, t in report.sections if h.startswith("System throughput relative"))
    [row] = gains.rows
    assert row[0] == "6" and row[5] == f"{(1000 / 945 - 1) * 100:+.2f}%"


def test_a_vm_series_without_bare_metal_says_so_in_words(
    store: ResultStore, add_series: AddSeries
) -> None:
    add_series([{"vm-a": 15210.4}, {"vm-a": 15230.0}], workload="resnet50 Offline")
    add_series([{"vm-a": 1521.0}, {"vm-a": 1530.0}], workload="bert Offline")
    report = build_report(store)
    _heading, verdicts = report.sections[0]
    assert isinstance(verdicts, Table)
    assert [row[9] for row in verdicts.rows] == ["no verdict", "no verdict"]
    assert all(row[3] == "no bare-metal run stored" for row in verdicts.rows)
    notes = {h: s.text for h, s in report.sections if isinstance(s, Note)}
    assert notes["Verdict figure"].startswith("Nothing to draw: no series has a bare-metal")
    assert {"resnet50 Offline: no bare-metal run", "bert Offline: no bare-metal run"} <= set(notes)
    charts = [chart.filename for _h, chart in report.charts]
    assert "verdict_ratios.png" not in charts  # no single bar drawn
    assert [c for c in charts if c.startswith("workload_")] == [
        "workload_resnet50_Offline_1.png", "workload_bert_Offline_3.png"]  # one per model
    statistics = next(s for h, s in report.sections if h.startswith("Statistics"))
    assert isinstance(statistics, Table)
    assert statistics.rows[0][7] == "15,220"  # mean samples/s, never 1.522e+04


def test_an_empty_store_reports_no_verdict_in_words(store: ResultStore) -> None:
    heading, note = build_report(store).sections[0]
    assert heading == "Verdict: VM vs bare metal" and isinstance(note, Note)
    assert note.text.startswith("No verdict: no VM series and no bare-metal series")


def test_the_report_shows_the_latest_series_and_their_references_not_the_history(
        store: ResultStore, add_series: AddSeries, monkeypatch: pytest.MonkeyPatch) -> None:
    from vgpu.results.store import series as series_module

    loaded: list[str] = []
    real_load = series_module.load_series

    def counting_load(opened: ResultStore, series_id: str):  # type: ignore[no-untyped-def]
        loaded.append(series_id)
        return real_load(opened, series_id)

    monkeypatch.setattr(series_module, "load_series", counting_load)
    rates = [{"4g": 500.0 + d, "1g": 200.0} for d in (0.0, 1.0, -1.0)]
    # eight older pairs, then the latest: the workload's panel shows its latest six
    for scale in (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.995):
        add_series(rates, target_kind="bare-metal")
        last_vm = add_series([{k: v * scale for k, v in r.items()} for r in rates])
    for metric in (SYSTEM_THROUGHPUT, WORST_P99):
        store.save_noise(class_key(load_series(store, series_of_run(store, last_vm[0]))),
                         metric, QUIET, [], {})
    loaded.clear()
    report = build_report(store)
    sections = dict(report.sections)
    assert len(set(loaded)) == 6  # the latest VM series, its reference, 4 more of the panel
    row, = sections["Verdict: VM vs bare metal"].rows  # type: ignore[union-attr]
    assert row[6] == "0.995" and row[9] == "PASS"  # the latest pair, not an older one
    runs = sections["Runs of the series shown"]
    assert isinstance(runs, Table) and len(runs.rows) == 18
    older = sections["Older series"]
    assert isinstance(older, Note) and "holds 18 series; this report shows 6" in older.text
    everything = dict(build_report(store, history=True).sections)
    assert "Older series" not in everything
    assert len(everything["All runs"].rows) == 54  # type: ignore[union-attr]
