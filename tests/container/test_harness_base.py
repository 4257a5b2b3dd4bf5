"""The guests' harness image is built FROM the NGC release whose CUDA the guest driver
branch runs natively (R535 -> CUDA 12.2, R550 -> 12.4, R570 -> 12.8), chosen from the
inventory's guest driver version; an unknown branch is refused at plan time with the file,
the field and the fix; the scenario's guest.base_image still wins. And `p2p: true` on VMs
with MIG-backed vGPUs is a warning (they have no P2P), in `vgpu plan` and its JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.invoke import run_cli
from vgpu import catalog
from vgpu.container.images import (
    DEFAULT_BASE_IMAGE,
    NGC_BASES,
    UnknownDriverBranch,
    driver_branch,
    ngc_base_for_driver,
)
from vgpu.errors import PlanError
from vgpu.model.inventory import Drivers
from vgpu.model.load import load_inventory
from vgpu.model.scenario import Scenario
from vgpu.planner import build_plan
from vgpu.provision.adapter import jobs_from_plan

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "inventory" / "sim.yaml"


@pytest.mark.parametrize(("driver", "cuda", "image"), [
    ("535.161.08", "12.2", "nvcr.io/nvidia/pytorch:23.10-py3"),
    ("535.54.03", "12.2", "nvcr.io/nvidia/pytorch:23.10-py3"),
    ("550.127.05", "12.4", "nvcr.io/nvidia/pytorch:24.05-py3"),
    ("570.124.06", "12.8", "nvcr.io/nvidia/pytorch:25.03-py3"),
])
def test_each_known_branch_gets_its_ngc_release(driver: str, cuda: str, image: str) -> None:
    base = ngc_base_for_driver(driver)
    assert (base.cuda, base.image) == (cuda, image)


def test_every_base_needs_no_newer_driver_than_its_branch() -> None:
    for base in NGC_BASES:
        assert driver_branch(base.min_driver) == base.branch


@pytest.mark.parametrize(("driver", "says"), [
    ("580.65.06", "branch R580, for which vgpu knows no NGC base image (known: R535 -> "
                  "CUDA 12.2"),
    ("470.256.02", "branch R470"),
    ("latest", "'latest' is not an NVIDIA driver version"),
])
def test_an_unknown_branch_is_refused_clearly(driver: str, says: str) -> None:
    with pytest.raises(UnknownDriverBranch, match=says.replace("(", r"\(")):
        ngc_base_for_driver(driver)


def with_driver(tmp_path: Path, **drivers: str) -> Path:
    """The simulator lab's inventory with these guest driver settings."""
    lines = "".join(f"  {key}: {value}\n" for key, value in drivers.items())
    path = tmp_path / "inventory.yaml"
    path.write_text(SIM.read_text(encoding="utf-8") + f"drivers:\n{lines}", encoding="utf-8")
    return path


def scenario_jobs_base(scenario: Scenario, inventory_path: Path, tmp_path: Path) -> set[str]:
    inventory = load_inventory(inventory_path)
    plan = build_plan(scenario, inventory)
    return {job.requirements.image.base_image for job in
            jobs_from_plan(plan, scenario, inventory, inventory_dir=tmp_path)
            if job.requirements.image is not None}


def test_guests_build_from_the_base_of_their_driver_branch(tmp_path: Path) -> None:
    inventory = with_driver(tmp_path, guest_driver="files/NVIDIA-Linux-x86_64-550.127.05-grid.run")
    assert load_inventory(inventory).drivers == Drivers(
        guest_driver="files/NVIDIA-Linux-x86_64-550.127.05-grid.run")
    scenario = catalog.load("6")
    assert scenario_jobs_base(scenario, inventory, tmp_path) == {
        "nvcr.io/nvidia/pytorch:24.05-py3"}
    plan = build_plan(scenario, load_inventory(inventory))
    assert plan.harness_base == ("nvcr.io/nvidia/pytorch:24.05-py3 (guest driver 550.127.05: "
                                 "R550, CUDA 12.4)")
    explicit = scenario.model_copy(update={"guest": scenario.guest.model_copy(
        update={"base_image": "registry.lab/pytorch:24.05-py3"})})
    assert scenario_jobs_base(explicit, inventory, tmp_path) == {"registry.lab/pytorch:24.05-py3"}


def test_without_a_known_driver_version_the_default_base_is_used(tmp_path: Path) -> None:
    assert scenario_jobs_base(catalog.load("6"), SIM, tmp_path) == {DEFAULT_BASE_IMAGE}


def test_vgpu_plan_refuses_an_unknown_branch_naming_file_field_and_fix(tmp_path: Path) -> None:
    inventory = with_driver(tmp_path, guest_driver_version="580.65.06")
    code, out, err = run_cli(["plan", "--scenario", "6", "-i", str(inventory)])
    assert code == 2, out + err
    text = " ".join(err.split())
    assert f"{inventory} drivers.guest_driver_version: guest driver 580.65.06 is branch R580" \
        in text
    assert "fix: set guest.base_image in the scenario" in text


def test_p2p_on_mig_backed_vgpus_is_a_warning_in_plan_output() -> None:
    code, out, err = run_cli(["plan", "--scenario", "mig_1x2g"])
    assert code == 0, err
    text = " ".join(out.split())
    assert "warning: " in text
    assert "vm_settings.p2p: true does nothing for" in text
    assert "MIG-backed vGPUs have no P2P or NVLink" in text
    code, out, _ = run_cli(["plan", "--scenario", "mig_1x2g", "--json"])
    [warning] = json.loads(out)["warnings"]
    assert "mig_1x2g.yaml vm_settings.p2p" in warning


def test_p2p_on_passthrough_gpus_is_no_warning() -> None:
    scenario = catalog.load("train_1vm_2gpu")
    assert scenario.vm_settings.p2p
    assert build_plan(scenario).warnings == []
    mig = catalog.load("6")
    assert mig.vm_settings.p2p and build_plan(mig).warnings
    no_p2p = mig.model_copy(update={"vm_settings": mig.vm_settings.model_copy(
        update={"p2p": False})})
    assert build_plan(no_p2p).warnings == []


def test_an_unknown_branch_fails_the_plan_not_just_the_output(tmp_path: Path) -> None:
    inventory = load_inventory(with_driver(tmp_path, guest_driver_version="580.65.06"))
    with pytest.raises(PlanError) as refused:
        build_plan(catalog.load("6"), inventory)
    [problem] = refused.value.problems
    assert problem.field == "drivers.guest_driver_version"


CLOSED_VCENTER = """\
name: closed
vcenter: {host: 127.0.0.1, port: 9, user: u, password: {env: VGPU_TEST_PW}}
placement: {datacenter: DC, datastore: DS, network: N, template: t}
hosts:
  - name: esx1
    gpus: [{model: A100-80GB, count: 1}]
network:
  ip_pool: {start: 127.0.0.11, end: 127.0.0.40, netmask: 255.0.0.0, gateway: 127.0.0.1}
ssh: {user: vgpu}
"""


def test_apply_shows_the_p2p_warning_and_refuses_an_unknown_branch_before_vcenter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The inventory's vCenter is a closed port: reaching it would be exit 1."""
    monkeypatch.setenv("VGPU_TEST_PW", "x")
    inventory = tmp_path / "inv.yaml"
    inventory.write_text(CLOSED_VCENTER)
    code, out, err = run_cli(["apply", "--scenario", "5", "-i", str(inventory), "--dry-run",
                              "--no-provision"])
    assert code == 1, (out, err)  # the warning came first; then the closed port
    assert "warning: " in out and "p2p: true does nothing for s5-1g" in " ".join(out.split())
    inventory.write_text(CLOSED_VCENTER + "drivers: {guest_driver_version: 580.65.06}\n")
    code, out, err = run_cli(["apply", "--scenario", "5", "-i", str(inventory), "--yes",
                              "--no-provision"])
    assert code == 2, (out, err)
    assert "drivers.guest_driver_version: guest driver 580.65.06 is branch R580" in \
        " ".join(err.split())
