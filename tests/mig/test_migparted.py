"""NVIDIA mig-parted configs: every bare-metal scenario exported and read back gives the same
slices; a scenario may name a mig-parted config instead of its vms; bad files and layouts
that do not fit exit 2 naming file, field and fix."""

from __future__ import annotations

import ctypes.util
import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.cli.invoke import run_cli
from vgpu.model.load import load_scenario
from vgpu.nvml.simulator import SimulatedGpuBackend
from vgpu.planner import build_plan

REPO = Path(__file__).resolve().parents[2]
BM_SCENARIOS = sorted((REPO / "scenarios").glob("bm*.yaml"))


def gpu_layouts(plan_json: dict[str, object]) -> Counter[tuple[str, tuple[str, ...]]]:
    """Each used GPU as (mode, sorted slice profiles): the layout without GPU numbering."""
    out: Counter[tuple[str, tuple[str, ...]]] = Counter()
    for g in plan_json["gpus"]:  # type: ignore[attr-defined]
        if g["mode"] != "unused":
            out[(g["mode"], tuple(sorted(s["profile"] for s in g["slices"])))] += 1
    return out


def export(args: list[str]) -> str:
    code, out, err = run_cli(["mig", "export", "--format", "mig-parted", *args])
    assert code == 0, err
    return out


def scenario_from_config(original: Path, parted: Path, config: str, folder: Path) -> Path:
    data = yaml.safe_load(original.read_text())
    del data["vms"]
    data["mig_parted"] = {"file": parted.name, "config": config}
    path = folder / f"{original.stem}_parted.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize("scenario", BM_SCENARIOS, ids=lambda p: p.stem)
def test_export_then_import_gives_the_same_slices(scenario: Path, tmp_path: Path) -> None:
    text = export([str(scenario)])
    sc = load_scenario(scenario)
    config = f"vgpu-{sc.id}"
    parsed = yaml.safe_load(text)
    assert parsed["version"] == "v1" and list(parsed["mig-configs"]) == [config]
    parted = tmp_path / "parted.yaml"
    parted.write_text(text)

    again = scenario_from_config(scenario, parted, config, tmp_path)
    original_plan = json.loads(build_plan(sc).model_dump_json())
    imported = load_scenario(again)
    imported_plan = json.loads(build_plan(imported).model_dump_json())

    assert gpu_layouts(imported_plan) == gpu_layouts(original_plan)
    assert sorted(v for vm in imported.vms for v in vm.vgpus * vm.count) == \
        sorted(v for vm in sc.vms for v in vm.vgpus * vm.count)
    # ... and the imported scenario exports to the same config.
    assert yaml.safe_load(export([str(again), "--config", config])) == parsed


def test_bm6_config_is_what_mig_parted_reads(tmp_path: Path) -> None:
    assert yaml.safe_load(export(["--scenario", "bm6"])) == {
        "version": "v1",
        "mig-configs": {"vgpu-bm6": [{"devices": [0], "mig-enabled": True,
                                      "mig-devices": {"4g.40gb": 1, "2g.20gb": 1,
                                                      "1g.10gb": 1}}]}}
    assert yaml.safe_load(export(["--scenario", "bm_pt4"]))["mig-configs"] == {
        "vgpu-bm_pt4": [{"devices": [0, 1, 2, 3], "mig-enabled": False}]}


PARTED = """version: v1
mig-configs:
  all-1g:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  mixed:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
    - devices: [1]
      mig-enabled: false
  too-many:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2, "2g.20gb": 1}
"""
SCENARIO = """id: mp1
name: from mig-parted
platform: bare-metal
gpu: A100-80GB
mig_parted: {file: parted.yaml, config: CONFIG}
workloads: [{model: resnet50}]
"""


def write_lab(folder: Path, config: str, parted: str = PARTED,
              scenario: str = SCENARIO) -> Path:
    (folder / "parted.yaml").write_text(parted)
    path = folder / "scenario.yaml"
    path.write_text(scenario.replace("CONFIG", config))
    return path


def test_plan_shows_the_layout_the_config_means(tmp_path: Path) -> None:
    code, out, err = run_cli(["plan", str(write_lab(tmp_path, "mixed")), "--json"])
    assert code == 0, err
    plan = json.loads(out)
    assert gpu_layouts(plan) == {("mig", ("3g.40gb", "3g.40gb")): 1, ("passthrough", ()): 1}
    starts = sorted(v["start"] for vm in plan["vms"] for v in vm["vgpus"] if v["kind"] == "mig")
    assert starts == [0, 4]
    assert [vm["name"] for vm in plan["vms"]] == ["mp1-3g.40gb-1", "mp1-3g.40gb-2",
                                                  "mp1-passthrough-1"]
    assert any("mig-parted config 'mixed' in parted.yaml" in n for n in plan["notes"])

    code, out, _ = run_cli(["plan", str(write_lab(tmp_path, "all-1g"))])
    assert code == 0
    assert "host-1 GPU 0 A100-80GB board A100D (mig): " + ", ".join(
        f"mp1-1g.10gb-{n}" for n in range(1, 8)) in out


def test_a_config_that_does_not_fit_is_refused_with_the_nearest_layouts(
    tmp_path: Path,
) -> None:
    code, out, err = run_cli(["plan", str(write_lab(tmp_path, "too-many"))])
    assert code == 2 and out == ""
    assert f"{tmp_path / 'parted.yaml'}:16 mig-configs.too-many[0].mig-devices" in err
    assert "config 'too-many' does not fit one A100-80GB" in err
    assert "needs 8 compute slices; one A100-80GB has 7" in err
    assert "nearest valid layouts: " in err and "3g.40gb + 3g.40gb (drop 2g.20gb)" in err


@pytest.mark.parametrize("parted, config, expected", [
    (PARTED.replace("v1", "v2"), "mixed",
     "version: version is 'v2'; vgpu reads mig-parted version v1 (fix: set version: v1)"),
    (PARTED, "nope", "mig-configs: no config named 'nope' (fix: use one of: all-1g, mixed, "
     "too-many)"),
    (PARTED.replace('"3g.40gb": 2', '"9g.90gb": 1'), "mixed",
     "mig-configs.mixed[0].mig-devices.9g.90gb: '9g.90gb' is not a MIG profile of A100-80GB"),
    (PARTED.replace("mig-enabled: false", "mig-enable: false"), "mixed",
     "mig-configs.mixed[1].mig-enable: unknown key 'mig-enable' (fix: valid keys here: "
     "devices, mig-enabled, mig-devices, device-filter)"),
    (PARTED.replace("devices: [1]", "devices: [0]"), "mixed",
     "mig-configs.mixed: GPU 0 is named by more than one entry"),
    ("- not a mapping\n", "mixed", "parted.yaml:1: the top level must be a mapping"),
])
def test_bad_mig_parted_files_exit_2_with_file_field_and_fix(
    tmp_path: Path, parted: str, config: str, expected: str,
) -> None:
    code, out, err = run_cli(["plan", str(write_lab(tmp_path, config, parted))])
    assert code == 2 and out == ""
    assert str(tmp_path / "parted.yaml") in err
    assert expected in err


@pytest.mark.parametrize("scenario, expected", [
    (SCENARIO.replace("parted.yaml", "gone.yaml"),
     "mig_parted.file: gone.yaml does not exist (fix: give the mig-parted file's path "
     "relative to the scenario file)"),
    (SCENARIO + "vms: [{name: a, vgpus: [1g.10gb]}]\n",
     "mig_parted: both 'vms' and 'mig_parted' are given"),
    (SCENARIO.replace("bare-metal", "vsphere"),
     "mig_parted: mig_parted describes a bare-metal host's GPUs (fix: set platform: "
     "bare-metal"),
    (SCENARIO.replace("config: CONFIG", "config: mixed, gpu: 2"),
     "mig_parted.gpu: unknown key 'gpu'"),
])
def test_bad_mig_parted_references_exit_2_naming_the_scenario(
    tmp_path: Path, scenario: str, expected: str,
) -> None:
    path = write_lab(tmp_path, "mixed", scenario=scenario)
    code, _, err = run_cli(["plan", str(path)])
    assert code == 2
    assert str(path) in err and expected in err


def test_export_refuses_a_vsphere_scenario_and_an_unknown_format() -> None:
    code, _, err = run_cli(["mig", "export", "--scenario", "8"])
    assert code == 2 and "export its bare-metal twin" in err
    code, _, err = run_cli(["mig", "export", "--scenario", "bm8", "--format", "yaml"])
    assert code == 2 and "'yaml' is not an export format" in err


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None,
                    reason="gpu: a real NVIDIA driver is present")
def test_current_layout_exports_what_mig_apply_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = tmp_path / "simgpu.json"
    monkeypatch.setenv("VGPU_GPU_SIMULATOR", "A100-80GB,A100-80GB")
    monkeypatch.setenv("VGPU_GPU_SIMULATOR_STATE", str(state))
    monkeypatch.setenv("VGPU_STATE_DIR", str(tmp_path / "state"))
    SimulatedGpuBackend(["A100-80GB", "A100-80GB"], state_file=state, mig_enabled=True)
    code, _, err = run_cli(["mig", "apply", "--scenario", "bm6", "--gpu", "1"])
    assert code == 0, err

    current = yaml.safe_load(export(["current"]))
    assert current["mig-configs"] == {"current": [
        {"devices": [0], "mig-enabled": True, "mig-devices": {}},
        {"devices": [1], "mig-enabled": True,
         "mig-devices": {"4g.40gb": 1, "2g.20gb": 1, "1g.10gb": 1}}]}
    assert yaml.safe_load(export(["--scenario", "current", "--config", "lab"]))[
        "mig-configs"]["lab"] == current["mig-configs"]["current"]
