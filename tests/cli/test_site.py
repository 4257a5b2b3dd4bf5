"""The Site: a command's inventory found, loaded and checked once, each scenario planned
once on it, and the simulator lab plugged in behind vgpu.site.SimulatedLab."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.counting import count_loads_and_plans
from tests.cli.invoke import run_cli
from vgpu import catalog
from vgpu.cli import common
from vgpu.cli.options import COMMAND_INVENTORY
from vgpu.errors import InputError
from vgpu.model.scenario import Scenario
from vgpu.sim.follow import SIM_RUNTIME_NOTE, FollowingLab
from vgpu.sim.state import LabRecord
from vgpu.site import SimulatedLab, Site, open_site

SHIPPED_SIM = catalog.default_inventory_dir() / "sim.yaml"


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    return count_loads_and_plans(monkeypatch)


def test_a_site_resolves_a_shipped_name_and_plans_each_scenario_once(
        counted: dict[str, int]) -> None:
    site = open_site(Path("sim"))
    assert site.inventory_path == SHIPPED_SIM and site.inventory is not None
    assert site.lab is None  # no running `vgpu sim up` lab wrote this file
    sc = catalog.load("5")
    plan = site.plan(sc)
    assert site.plan(sc) is plan
    assert site.plan(sc.model_copy()) is plan  # an equal scenario is the same scenario
    assert plan.inventory == str(SHIPPED_SIM)
    assert [vm.name for vm in plan.vms] == ["s5-1g"]
    host_runtime = sc.model_copy(update={"guest": sc.guest.model_copy(
        update={"runtime": "host"})})
    assert site.plan(host_runtime) is not plan
    assert counted == {"load_inventory": 1, "build_plan": 2}


def test_a_site_without_inventory_is_this_machine() -> None:
    site = open_site(None)
    assert (site.inventory_path, site.inventory, site.lab) == (None, None, None)
    assert not site.found_by_default
    with pytest.raises(InputError, match="provisioning needs one"):
        site.require("provisioning needs one", fix="pass --inventory FILE")


def test_how_the_inventory_was_found_decides_whether_it_was_named() -> None:
    assert Site(how=catalog.FOUND_HERE).found_by_default
    assert Site(how=catalog.FOUND_USER_DEFAULT).found_by_default
    assert not Site(how="--inventory").found_by_default
    assert not Site(how="$VGPU_INVENTORY").found_by_default


@pytest.mark.parametrize(("args", "refused", "plans"), [
    # through the simulator check, the jobs and the local preflight (no driver, token, key)
    (["provision", "-s", "5", "-i", "sim"], "drivers.guest_driver", 1),
    # the plan's warnings and provisioning's inputs share one plan, up to vCenter's password
    (["apply", "-s", "5", "-i", "sim", "--dry-run"], "vcenter.password", 1),
    # through where it runs (no running lab behind sim.yaml) to the checks of --runs
    (["bench", "-s", "6", "-i", "sim", "--runs", "0"], "--runs", 0),
    # a bare-metal apply through its plan to the simulated GPU (MIG mode off)
    (["apply", "-s", "bm8", "-i", "local", "--dry-run"], "--enable-mig", 1),
])
def test_one_command_loads_its_inventory_once_and_plans_a_scenario_once(
        args: list[str], refused: str, plans: int, counted: dict[str, int],
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(catalog.INVENTORY_ENV, "none")
    monkeypatch.delenv("VGPU_VCENTER_PASSWORD", raising=False)
    monkeypatch.setenv("VGPU_GPU_SIMULATOR", "A100-80GB")
    monkeypatch.setenv("VGPU_GPU_SIMULATOR_STATE", str(tmp_path / "gpu-state.json"))
    code, _out, err = run_cli(args)
    assert code == 2, err
    assert refused in err
    assert counted == {"load_inventory": 1, "build_plan": plans}


def test_the_command_site_is_made_once_and_reset_by_the_next_command(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(COMMAND_INVENTORY, "choice",
                        catalog.InventoryChoice(SHIPPED_SIM, catalog.FOUND_HERE))
    monkeypatch.setattr(COMMAND_INVENTORY, "site", None)
    site = common.site_of(SHIPPED_SIM)
    assert common.site_of(SHIPPED_SIM) is site
    assert site.how == catalog.FOUND_HERE and site.found_by_default
    assert common.site_of(None).inventory is None  # another inventory: another Site


def _record(tmp_path: Path) -> LabRecord:
    return LabRecord(pid=1, url="https://127.0.0.1:8989/sdk", inventory=str(SHIPPED_SIM),
                     workdir=str(tmp_path), guests_missing="root (for network namespaces)")


def test_the_simulator_lab_is_a_simulated_lab_for_the_site(tmp_path: Path) -> None:
    lab = FollowingLab(_record(tmp_path))
    assert isinstance(lab, SimulatedLab)
    assert lab.description.startswith("vgpu sim lab: vCenter simulator")


def test_a_lab_without_guests_runs_nothing_on_them(tmp_path: Path) -> None:
    lab = FollowingLab(_record(tmp_path))
    site = Site(inventory_path=SHIPPED_SIM, inventory=open_site(SHIPPED_SIM).inventory,
                lab=lab)
    sc: Scenario = catalog.load("5")
    plan = site.plan(sc)
    assert lab.guests_missing == "root (for network namespaces)"
    assert (lab.docker_host, lab.guest_runtime()) == (None, "host")
    assert lab.runtime_note() == SIM_RUNTIME_NOTE
    assert lab.scenario_guests(plan) == lab.start_for_apply(plan) == []
    assert lab.stop_for_destroy(plan) == []
    assert lab.on_guests(sc).guest.effective_runtime == "host"
