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

from vgpu.results.records import Metric
from vgpu.results.report import build_report, write_report
from vgpu.results.store import ResultStore

AddSeries = Callable[..., list[int]]

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _populate(add_series: AddSeries) -> None:
    six = [{"4g": 500.0 + d, "2g": 300.0 - d, "1g": 200.0} for d in (0.0, 1.0, -1.0)]
    add_series(six, target_kind="bare-metal", loadgen_scenario="Server")
    add_series([{k: v * 0.995 for k, v in r.items()} for r in six], loadgen_scenario="Server")
    add_series([{"7g": 940.0}, {"7g": 945.0}, {"7g": 950.0}], scenario_id="1")
    for workers, throughput in ((1, 100.0), (2, 195.0), (4, 380.0)):
        add_series([{}] * 2, scenario_id="train", workload=f"train resnet50 x{workers}",
                   kind="training",
                   metrics=[[Metric("throughput", throughput + d, "samples/s"),
                             Metric("workers", workers)] for d in (0.0, 1.0)])


def test_report_has_verdicts_tables_and_embedded_charts(
    tmp_path: Path, store: ResultStore, add_series: AddSeries
) -> None:
    _populate(add_series)
    report = build_report(store)
    html = report.html()
    names = [chart.filename for _h, chart in report.charts]
    assert names == ["throughput_instances.png", "system_throughput_targets.png",
                     "latency_percentiles.png"]  # training workloads differ: no speedup line
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)
    assert len(images) == 3
    assert all(base64.b64decode(i).startswith(b"\x89PNG") for i in images)
    assert "vm-vs-bare-metal" not in html  # titles, not kinds, are shown
    assert "VM vs bare metal, scenario 6" in html and "PASS" in html
    assert "<link" not in html and "<script" not in html  # self-contained
    written = write_report(report, tmp_path / "r.html", tmp_path / "r.md", tmp_path / "png")
    assert {p.name for p in written} == {"r.html", "r.md", *names}
    markdown = (tmp_path / "r.md").read_text()
    assert "| comparison | metric |" in markdown
    assert "![Latency percentiles](png/latency_percentiles.png)" in markdown


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
    _populate(add_series)
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
    add_series(six, scenario_id="6", target_kind="vm", scenario_file=scenario_6)
    add_series([{"7g": 945.0}, {"7g": 946.0}, {"7g": 944.0}], scenario_id="1")
    report = build_report(store)
    html = report.html()
    assert "VM vs bare metal, scenario 6" in html
    gains = next(t for h, t in report.sections if h.startswith("System throughput relative"))
    [row] = gains.rows
    assert row[0] == "6" and row[5] == f"{(1000 / 945 - 1) * 100:+.2f}%"
