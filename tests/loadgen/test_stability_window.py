"""The stability window before READY, on a real ONNX Runtime session: it waits for a SUT
that is slow while warming up, and gives up at its bound with a note."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from loadgen.backends.ort import OrtBackend
from loadgen.backends.warming import WarmingBackend
from loadgen.contract import StabilitySpec
from loadgen.models import build_model, read_model_io
from loadgen.qsl import SampleLibrary
from loadgen.runner import run
from loadgen.runrecord import completion_timeline
from loadgen.spec import parse_spec
from loadgen.stability import run_windows, spread_pct
from tests.loadgen.harness_helpers import base_spec

BATCH = 4
EXTRA_PASSES = 3  # a warming batch does four batches' work


@pytest.fixture(scope="module")
def tiny(model_cache: Path) -> tuple[OrtBackend, dict[str, np.ndarray]]:
    path = build_model("resnet50", "tiny", "fp32", str(model_cache))
    library = SampleLibrary(read_model_io(path), seed=1, performance_count=8)
    backend = OrtBackend(str(path), threads=1, device_kind="cpu")
    feeds = library.warmup_feeds(BATCH)
    for _ in range(8):
        backend.infer(feeds)
    yield backend, feeds
    backend.close()


def test_spread_is_max_minus_min_over_the_mean() -> None:
    assert spread_pct([90.0, 100.0, 110.0]) == pytest.approx(20.0)
    assert spread_pct([50.0, 50.0, 50.0]) == 0.0


def test_the_window_waits_for_a_warming_sut(
    tiny: tuple[OrtBackend, dict[str, np.ndarray]],
) -> None:
    backend, feeds = tiny
    window = StabilitySpec(pct=25.0, window_ms=150, max_windows=30)  # room for a busy machine
    [plain_rate] = run_windows(backend, feeds, BATCH, StabilitySpec(
        pct=100.0, window_ms=150, max_windows=1))["windows_samples_per_s"]
    # Enough slow batches to fill about two windows at a quarter of the plain rate.
    slow_batches = max(4, round(2 * plain_rate * 0.15 / BATCH / (1 + EXTRA_PASSES)))
    warming = WarmingBackend(backend, slow_batches, EXTRA_PASSES)
    result = run_windows(warming, feeds, BATCH, window)
    windows = result["windows_samples_per_s"]
    assert result["stable"] is True
    assert len(windows) > 3  # the first three disagreed: it went on
    assert windows[0] < 0.6 * windows[-1]
    assert result["spread_pct"] <= 25.0
    assert result["note"].startswith(f"stable after {len(windows)} windows of 150 ms")
    assert warming.batches > slow_batches  # the fast batches were measured too


def test_the_window_gives_up_at_its_bound_with_a_note(
    tiny: tuple[OrtBackend, dict[str, np.ndarray]],
) -> None:
    backend, feeds = tiny
    result = run_windows(backend, feeds, BATCH,
                         StabilitySpec(pct=1e-6, window_ms=30, max_windows=4))
    assert result["stable"] is False
    assert len(result["windows_samples_per_s"]) == 4
    assert result["note"].startswith("not stable after 4 windows of 30 ms (the bound)")
    assert "the timed run started anyway" in result["note"]


def test_a_run_records_its_window_preload_and_completion_timeline(
    model_cache: Path, tmp_path: Path,
) -> None:
    # a spread bound no three windows can exceed ((max - min) / mean <= 3): this test reads
    # what a run records, and a window a busy machine starves must not make it unstable
    doc = base_spec(model_cache, stability={"pct": 1000, "window_ms": 40, "max_windows": 3})
    record = run(parse_spec(doc, "spec.json", tmp_path), tmp_path / "out")
    assert record["status"] == "ok", record["reason"]
    stability = record["stability"]
    assert stability["stable"] is True and len(stability["windows_samples_per_s"]) == 3
    # both recorded; that LoadGen's load after a preload makes no sample is asserted below
    assert record["qsl_preload_s"] > 0 and record["qsl_load_s"] >= 0
    completions = record["sut"]["completions"]
    assert completions["unix"][0] == record["timed_start_unix"]
    assert completions["unix"][-1] == record["timed_end_unix"]
    assert completions["samples"][-1] == record["sample_count"]
    assert completions["samples"] == sorted(completions["samples"])
    assert json.loads((tmp_path / "out" / "result.json").read_text())["stability"] == stability


def test_preloaded_samples_are_the_ones_made_on_load(
        model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model_io = read_model_io(build_model("resnet50", "tiny", "fp32", str(model_cache)))
    made, preloaded = (SampleLibrary(model_io, seed=3, performance_count=16) for _ in "ab")
    preloaded.preload()
    indices = np.array([5, 0, 11, 3])
    made.load([0, 3, 5, 11])
    made_on_load: list[int] = []
    make = preloaded._make
    monkeypatch.setattr(preloaded, "_make", lambda i: made_on_load.append(i) or make(i))
    preloaded.load([0, 3, 5, 11])
    # after a preload, LoadGen's load only marks rows: no sample made, none copied
    assert made_on_load == [] and preloaded.rows(indices) is indices
    for name, array in made.batch(indices).items():
        np.testing.assert_array_equal(array, preloaded.batch(indices)[name])


def test_a_long_timeline_is_thinned_keeping_its_ends() -> None:
    points = [(100.0 + i, i + 1) for i in range(5000)]
    timeline = completion_timeline(points, 99.5, limit=50)
    assert len(timeline["unix"]) == 51  # the start plus 50 points
    assert timeline["unix"][0] == 99.5 and timeline["samples"][0] == 0.0
    assert timeline["unix"][-1] == 5099.0 and timeline["samples"][-1] == 5000.0
