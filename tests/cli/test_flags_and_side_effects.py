"""Bad flags and bad references: exit 2, the flag or file field named, no traceback, and
no file left behind (not even an empty results database)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.invoke import run_cli

TWO_GPU_BARE_METAL = """\
id: bm-two
name: bm-two
platform: bare-metal
gpu: A100-80GB
vms:
  - {name: a, vgpus: [7g.80gb]}
  - {name: b, vgpus: [7g.80gb]}
workloads: [{model: resnet50}]
"""

UNKNOWN_BASELINE = """\
id: with-unknown-baseline
name: x
platform: bare-metal
gpu: A100-80GB
vms: [{name: a, vgpus: [1g.10gb]}]
workloads: [{model: resnet50}]
baseline: {scenario: no-such-scenario}
"""


@pytest.fixture
def empty_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VGPU_GPU_SIMULATOR_STATE", str(tmp_path / "sim-state.json"))
    return tmp_path


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize(("args", "words"), [
    (["compare", "1", "2"], ["vgpu-results.db --db: no results database here"]),
    (["compare", "1", "2", "--tolerance", "-5"], ["--tolerance"]),
    (["baseline", "list"], ["no results database here"]),
    (["baseline", "set", "1"], ["no results database here"]),
    (["report"], ["no results database here"]),
    (["apply", "--scenario", "8", "--ip-timeout", "-3"], ["--ip-timeout"]),
    (["mig", "status", "--simulator", "Z100"], ["--simulator: 'Z100' is not a GPU model"]),
    (["train", "scaling", "--scenario", "train_bm_1", "--tolerance-pct", "-1"],
     ["--tolerance-pct"]),
])
def test_bad_flag_exits_2_and_writes_nothing(empty_dir: Path, args: list[str],
                                             words: list[str]) -> None:
    code, out, err = run_cli(args)
    assert code == 2, (out, err)
    text = " ".join((out + err).split())
    for word in words:
        assert word in text, text
    assert "Traceback" not in err
    assert _files(empty_dir) == []


def test_unknown_baseline_scenario_blames_the_file_field(empty_dir: Path) -> None:
    scenario = empty_dir / "s.yaml"
    scenario.write_text(UNKNOWN_BASELINE)
    code, _, err = run_cli(["bench", str(scenario), "--with-baseline"])
    assert code == 2, err
    assert f"{scenario} baseline.scenario: no scenario with id 'no-such-scenario'" in err
    assert "--scenario" not in err.split("(fix:")[0]
    assert _files(empty_dir) == ["s.yaml"]


def test_layout_needing_more_gpus_than_here_blames_the_scenario(empty_dir: Path) -> None:
    scenario = empty_dir / "bm.yaml"
    scenario.write_text(TWO_GPU_BARE_METAL)
    code, _, err = run_cli(["mig", "apply", str(scenario), "--simulator", "A100-80GB",
                            "--enable-mig"])
    text = " ".join(err.split())
    assert code == 2, err
    assert f"{scenario} vms: the layout needs 2 GPU(s) (0, 1); this machine has 1 (0)" in text
    assert "--gpu" not in text
    # Nothing applied on GPU 0 either: MIG still off, no instance, no layout state saved.
    code, out, _ = run_cli(["mig", "status", "--simulator", "A100-80GB", "--json"])
    gpu0 = json.loads(out)["gpus"][0]
    assert gpu0["mig_mode"]["current"] is False and gpu0["instances"] == []
    assert _files(empty_dir) == ["bm.yaml", "sim-state.json"]


def test_gpu_flag_naming_an_absent_gpu_blames_the_flag(empty_dir: Path) -> None:
    code, _, err = run_cli(["mig", "apply", "--scenario", "bm5", "--simulator", "A100-80GB",
                            "--gpu", "3", "--enable-mig"])
    assert code == 2, err
    assert "--gpu: this machine has no GPU 3" in " ".join(err.split())
