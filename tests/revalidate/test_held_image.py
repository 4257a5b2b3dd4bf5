"""Everything but the upgrade held fixed: the harness image a baseline ran is read back
from its stored platform records (reference and the ID docker reported), a revalidation
holds it (unless asked to rebuild), an image the new guest driver cannot run is refused
before anything changes, and the verdict says whether the image was held or what changed
with it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from tests.cli.invoke import run_cli
from tests.results.series import Repeat, record_series
from vgpu.container.images import HeldImage, driver_at_least, ngc_base_for_cuda
from vgpu.errors import InputError
from vgpu.results.store.records import InstanceResult, Platform
from vgpu.results.store.result_store import ResultStore
from vgpu.revalidate.image import (
    BaselineImage,
    baseline_image,
    image_notes,
    refuse_unrunnable,
    verdict_image_notes,
)

ROOT = Path(__file__).resolve().parents[2]
IMAGE_X = "sha256:" + "a" * 64
IMAGE_Y = "sha256:" + "b" * 64
BASELINE = Platform(host="DC0_C0_H0", runtime="container", container_image="vgpu-harness:0.9",
                    container_image_id=IMAGE_X, cuda_version="12.8", cudnn_version="9.7.1",
                    ort_package="onnxruntime-gpu", ort_version="1.21.0",
                    harness_version="0.9")


def _record(store: ResultStore, series: str, platform: Platform) -> int:
    instances = [InstanceResult(name=f"s6-{n}", status="ok", throughput=100.0,
                                platform=platform) for n in ("4g", "2g")]
    [run_id] = record_series(store, [Repeat(instances)], series_id=series,
                             scenario_name="six", workload="resnet50-offline",
                             platform=platform).run_ids
    return run_id


def test_the_baseline_image_is_read_from_its_stored_platform(tmp_path: Path) -> None:
    with ResultStore.open(tmp_path / "r.db") as store:
        run = _record(store, "base", BASELINE)
        store.set_baseline(run, "pre-upgrade@DC0_C0_H0:6:resnet50-offline")
        _record(store, "venv", replace(BASELINE, runtime="host", container_image=None,
                                       container_image_id=None))
        store.set_baseline(store.runs(series_id="venv")[0].id, "pre-upgrade:6:resnet50-offline")
        found = baseline_image(store, "pre-upgrade@DC0_C0_H0", "6")
        assert found is not None
        assert found.image == HeldImage("vgpu-harness:0.9", IMAGE_X)
        assert found.platform.cuda_version == "12.8"
        assert baseline_image(store, "pre-upgrade", "6") is None  # ran in the host venv
        assert baseline_image(store, "pre-upgrade@DC0_C0_H0", "8") is None


def test_an_image_whose_cuda_the_new_guest_driver_cannot_run_is_refused() -> None:
    image = BaselineImage("6", HeldImage("vgpu-harness:0.9", IMAGE_X), BASELINE)
    with pytest.raises(InputError) as refused:
        refuse_unrunnable([image], "550.90.07", "lab.yaml")
    [problem] = refused.value.problems
    assert (problem.file, problem.field) == ("lab.yaml", "drivers.guest_driver")
    assert problem.message == (
        f"scenario 6's baseline ran harness image vgpu-harness:0.9 ({IMAGE_X}), built on "
        "CUDA 12.8, which needs NVIDIA driver 570.124.06 or newer; the guests get driver "
        "550.90.07, under which that image cannot run")
    assert problem.fix is not None and problem.fix.startswith(
        "rebuild the harness image for the new driver")
    refuse_unrunnable([image], "570.124.06", "lab.yaml")  # the minimum itself runs it
    refuse_unrunnable([image], "580.65.06", "lab.yaml")
    refuse_unrunnable([image], None, "lab.yaml")  # no guest driver known: nothing to judge
    cpu = BaselineImage("6", image.image, replace(BASELINE, cuda_version=None))
    refuse_unrunnable([cpu], "535.104.05", "lab.yaml")  # ONNX Runtime's CPU build


def test_driver_versions_compare_by_number() -> None:
    assert driver_at_least("550.127.05", "550.54.15")
    assert not driver_at_least("550.54.14", "550.54.15")
    assert driver_at_least("570.124.06-1OEM.800.1.0.20613240", "570.124.06")
    base = ngc_base_for_cuda("12.4.131")
    assert base is not None and base.min_driver == "550.54.15"
    assert ngc_base_for_cuda("11.8") is None


def test_the_verdict_says_the_image_was_held_or_what_changed_with_it() -> None:
    assert image_notes(BASELINE, [BASELINE]) == [
        f"harness image held fixed: vgpu-harness:0.9 {IMAGE_X}, the baseline's"]
    rebuilt = replace(BASELINE, container_image="vgpu-harness:1.0", container_image_id=IMAGE_Y,
                      cuda_version="12.4", ort_version="1.20.1", harness_version="1.0")
    assert image_notes(BASELINE, [rebuilt]) == [
        f"harness image changed: vgpu-harness:0.9 {IMAGE_X} -> vgpu-harness:1.0 {IMAGE_Y}; "
        "with it: CUDA 12.8 -> 12.4; ONNX Runtime 1.21.0 -> 1.20.1; harness 0.9 -> 1.0"]
    same_parts = replace(BASELINE, container_image_id=IMAGE_Y)
    assert image_notes(BASELINE, [same_parts])[0].endswith(
        "with it: no recorded component (CUDA, cuDNN, TensorRT, ONNX Runtime, harness) "
        "changed")
    assert image_notes(replace(BASELINE, container_image_id=None), [rebuilt]) == []


def test_verdict_notes_come_from_the_stored_runs(tmp_path: Path) -> None:
    with ResultStore.open(tmp_path / "r.db") as store:
        base = _record(store, "base", BASELINE)
        _record(store, "after", replace(BASELINE, container_image_id=IMAGE_Y,
                                        cuda_version="12.4"))
        [note] = verdict_image_notes(store, base, "after")
    assert note.startswith(f"harness image changed: vgpu-harness:0.9 {IMAGE_X} -> ")
    assert note.endswith("with it: CUDA 12.8 -> 12.4")


def test_the_cli_refuses_an_unrunnable_baseline_image_before_anything_changes(
        tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "inventory" / "sim.yaml").read_text(encoding="utf-8"))
    data["drivers"] = {"guest_driver_version": "550.90.07"}
    inventory = tmp_path / "lab.yaml"
    inventory.write_text(yaml.safe_dump(data), encoding="utf-8")
    db = tmp_path / "r.db"
    with ResultStore.open(db) as store:
        run = _record(store, "base", BASELINE)
        store.set_baseline(run, "pre-upgrade:6:resnet50-offline")
    state, facts = tmp_path / "state", tmp_path / "facts"
    code, out, err = run_cli(["revalidate", "-i", str(inventory), "--db", str(db),
                              "--state-dir", str(state), "--facts-dir", str(facts),
                              "--no-report", "--yes"])
    text = " ".join((out + err).split())
    assert code == 2, text
    assert f"harness image vgpu-harness:0.9 ({IMAGE_X}), built on CUDA 12.8, which needs " \
        "NVIDIA driver 570.124.06 or newer; the guests get driver 550.90.07" in text
    assert "command line --rebuild-image: without it each scenario runs the harness image " \
        "its baseline ran (fix: pass --rebuild-image to build the image for the new guest " \
        "driver)" in text
    assert not state.exists() and not facts.exists()  # nothing run, nothing written
    with ResultStore.open(db) as store:
        assert len(store.runs()) == 1
