"""Which inventory a command uses when none is named (--inventory, $VGPU_INVENTORY,
./vgpu-inventory.yaml, ~/.config/vgpu/inventory.yaml), the line saying so, `vgpu inventory
show` with secrets masked, and `vgpu --help` in the order the work goes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from tests.cli.invoke import run_cli
from vgpu.cli import _register, app
from vgpu.cli.inventory import MASK, masked

REPO = Path(__file__).resolve().parents[2]
SIM = REPO / "inventory" / "sim.yaml"
LOCAL = REPO / "inventory" / "local.yaml"


@pytest.fixture
def lab_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty current folder and home, and no $VGPU_INVENTORY."""
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("VGPU_INVENTORY", raising=False)
    monkeypatch.chdir(work)
    return work


def plan_inventory(args: list[str]) -> tuple[int, str | None, str]:
    code, out, err = run_cli(["plan", "--scenario", "8", "--json", *args])
    return code, json.loads(out)["inventory"] if code == 0 else None, err


def test_the_current_folder_file_is_used_and_named(lab_folder: Path) -> None:
    shutil.copy(SIM, lab_folder / "vgpu-inventory.yaml")
    code, inventory, err = plan_inventory([])
    assert code == 0, err
    assert inventory == "vgpu-inventory.yaml"
    assert "inventory: ./vgpu-inventory.yaml (found in the current folder)" in err


def test_the_user_default_comes_last(lab_folder: Path) -> None:
    config = Path.home() / ".config" / "vgpu"
    config.mkdir(parents=True)
    shutil.copy(SIM, config / "inventory.yaml")
    code, inventory, err = plan_inventory([])
    assert code == 0 and inventory == str(config / "inventory.yaml")
    assert "inventory: ~/.config/vgpu/inventory.yaml (your default)" in err

    shutil.copy(LOCAL, lab_folder / "vgpu-inventory.yaml")  # the folder's file wins
    code, _, err = plan_inventory([])
    assert "(found in the current folder)" in err


def test_environment_beats_folder_and_flag_beats_environment(
    lab_folder: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    shutil.copy(LOCAL, lab_folder / "vgpu-inventory.yaml")
    monkeypatch.setenv("VGPU_INVENTORY", str(SIM))
    code, inventory, err = plan_inventory([])
    assert code == 0 and inventory == str(SIM)
    assert f"inventory: {SIM} ($VGPU_INVENTORY)" in err

    code, inventory, err = plan_inventory(["-i", "local"])
    assert code == 2  # scenario 8 needs vSphere hosts, which the local inventory lacks
    assert f"inventory: {LOCAL} (--inventory)" in err


def test_nothing_found_plans_without_and_says_where_it_looked(lab_folder: Path) -> None:
    code, inventory, err = plan_inventory([])
    assert code == 0 and inventory is None
    assert ("inventory: none found (looked for --inventory, $VGPU_INVENTORY, "
            "./vgpu-inventory.yaml, ~/.config/vgpu/inventory.yaml)") in err


def test_bench_without_any_inventory_says_it_runs_here(lab_folder: Path) -> None:
    # --runs 0 is refused after the options are read: nothing runs, the line is there.
    code, _, err = run_cli(["bench", "--scenario", "8", "--runs", "0"])
    assert code == 2
    assert "inventory: none found" in err and "running on this machine" in err


def test_none_in_the_environment_turns_the_defaults_off(
    lab_folder: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    shutil.copy(SIM, lab_folder / "vgpu-inventory.yaml")
    monkeypatch.setenv("VGPU_INVENTORY", "none")
    code, inventory, err = plan_inventory([])
    assert code == 0 and inventory is None and "none found" in err


@pytest.mark.parametrize("args, env, field", [
    (["-i", "no-such.yaml"], None, "command line --inventory"),
    ([], "no-such.yaml", "environment VGPU_INVENTORY"),
])
def test_a_named_inventory_that_is_missing_exits_2(
    lab_folder: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], env: str | None,
    field: str,
) -> None:
    shutil.copy(SIM, lab_folder / "vgpu-inventory.yaml")  # never a silent fallback
    if env:
        monkeypatch.setenv("VGPU_INVENTORY", env)
    code, _, err = plan_inventory(args)
    assert code == 2
    assert f"{field}: inventory no-such.yaml does not exist" in err
    assert "fix: give an existing inventory file or one of the shipped names" in err


@pytest.mark.parametrize("command", [["preflight"], ["destroy", "--scenario", "8"],
                                     ["inventory", "show"]])
def test_commands_that_need_an_inventory_say_how_to_give_one(
    lab_folder: Path, command: list[str],
) -> None:
    code, out, err = run_cli(command)
    assert code == 2 and out == ""
    assert "needs an inventory and none was given or found" in err
    assert "set $VGPU_INVENTORY, or run `vgpu sim up` here" in err


def test_every_inventory_option_shares_the_one_resolution() -> None:
    _register()
    root = typer.main.get_command(app)
    found: list[str] = []

    def walk(command: object, path: str) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")
        for param in getattr(command, "params", []):
            if param.name == "inventory":
                found.append(path)
                assert param.callback is not None, path
                assert param.callback.__qualname__.startswith("inventory_option"), path

    walk(root, "vgpu")
    assert {"vgpu plan", "vgpu apply", "vgpu bench", "vgpu preflight", "vgpu destroy",
            "vgpu provision", "vgpu mig apply", "vgpu train run",
            "vgpu inventory show"} <= set(found)


def test_show_masks_inline_secrets_and_keeps_references() -> None:
    data = {"vcenter": {"password": {"env": "VGPU_VCENTER_PASSWORD"}, "user": "admin"},
            "ssh": {"sudo_password": "hunter2", "key_file": "~/.ssh/id"},
            "drivers": {"licence_token": "lab.tok"}, "api_token": "abc", "secret": 42}
    assert masked(data) == {
        "vcenter": {"password": {"env": "VGPU_VCENTER_PASSWORD"}, "user": "admin"},
        "ssh": {"sudo_password": MASK, "key_file": "~/.ssh/id"},
        "drivers": {"licence_token": "lab.tok"}, "api_token": MASK, "secret": MASK}


def test_show_prints_the_resolved_inventory_without_the_password(
    lab_folder: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    shutil.copy(SIM, lab_folder / "vgpu-inventory.yaml")
    monkeypatch.setenv("VGPU_VCENTER_PASSWORD", "s3cret-value")
    code, out, err = run_cli(["inventory", "show"])
    assert code == 0, err
    assert out.startswith("# vgpu-inventory.yaml\n")
    assert "password: {env: VGPU_VCENTER_PASSWORD}" in out
    assert "s3cret-value" not in out + err
    assert "name: DC0_C0_H3" in out


def test_help_lists_the_commands_in_flow_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    code, out, _ = run_cli(["--help"])
    assert code == 0
    panels = re.findall(r"^╭─ (\w+) ", out, flags=re.MULTILINE)
    assert panels == ["Options", "Lab", "Build", "Measure", "Results", "Devices", "More"]
    commands = re.findall(r"^│ ([a-z][a-z-]*) ", out, flags=re.MULTILINE)
    flow = ["sim", "inventory", "preflight", "scenarios", "plan", "apply", "provision",
            "destroy", "bench", "train", "results", "compare", "report", "baseline", "mig"]
    assert [c for c in commands if c in flow] == flow
    assert commands.index("mig") < commands.index("version")
    assert "--install-completion" in out and "--show-completion" in out


def test_shell_completion_script_completes_vgpu() -> None:
    script = Path(sys.executable).parent / "vgpu"  # the console script pip installed
    if not script.exists():
        pytest.skip("vgpu is not installed as a console script in this environment")
    run = subprocess.run([str(script), "--show-completion", "bash"], capture_output=True,
                         text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert "complete -o default -F _vgpu_completion vgpu" in run.stdout
    assert "_VGPU_COMPLETE=complete_bash" in run.stdout
