"""vGPU VMs boot with EFI, and a guest installed under BIOS does not boot once its VM is
switched to EFI: apply refuses a BIOS template (and never switches an existing VM) before
anything changes, and preflight names the template's firmware."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyVmomi import vim

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.sim.lab import LabShape
from vgpu.vsphere.connect.connection import connect
from vgpu.vsphere.connect.tasks import wait_for_task
from vgpu.vsphere.plan.reconcile import read_state
from vgpu.vsphere.read.facts import VmActual

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

REPO = Path(__file__).resolve().parents[3]
SCENARIO_8 = str(REPO / "scenarios" / "mig_7x1g.yaml")
SCENARIO_1 = str(REPO / "scenarios" / "mig_1x7g.yaml")


def flat(text: str) -> str:
    """Output with rich's line wrapping undone (where it wraps depends on the path length)."""
    return " ".join(text.split())


def vms_of(lab: VcsimLab) -> dict[str, VmActual]:
    with connect(lab.target()) as session:
        return read_state(session, lab.placement_names()).vms


def test_apply_refuses_a_bios_template_before_anything_changes(tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=1, template_firmware="bios")) as lab:
        inventory = str(lab.write_inventory(tmp_path / "inv.yaml"))
        tasks = lab.recent_tasks()
        code, out, err = run_cli(["apply", "--no-provision", SCENARIO_8, "-i", inventory,
                                  "--yes"])
        assert code == 2, err
        assert (f"{inventory} placement.template: template 'vgpu-template' has bios firmware"
                in flat(err))
        assert "does not boot once switched to EFI (fix: make an EFI template" in flat(err)
        assert set(vms_of(lab)) == {"vgpu-template"}
        assert lab.recent_tasks() == tasks

        code, out, err = run_cli(["preflight", "-i", inventory, "--scenario", "8", "--json",
                                  "--results-dir", str(tmp_path / "preflight")])
        assert code == 1
        checks = {c["name"]: c for c in json.loads(out)["scenario_checks"]}
        assert checks["template firmware"]["ok"] is False
        assert checks["template firmware"]["detail"].startswith("vgpu-template: bios;")
        code, out, err = run_cli(["preflight", "-i", inventory,
                                  "--results-dir", str(tmp_path / "preflight")])
        assert "template vgpu-template: bios firmware (the VMs boot with EFI)" in flat(out)


def test_an_existing_vm_is_never_switched_to_efi(vcsim_lab: VcsimLab, tmp_path: Path) -> None:
    inventory = str(vcsim_lab.write_inventory(tmp_path / "inv.yaml"))
    code, out, err = run_cli(["preflight", "-i", inventory, "--scenario", "1", "--json",
                              "--results-dir", str(tmp_path / "preflight")])
    checks = {c["name"]: c for c in json.loads(out)["scenario_checks"]}
    assert checks["template firmware"] == {
        "name": "template firmware", "ok": True,
        "detail": "vgpu-template: EFI (clones boot with EFI)"}
    code, out, err = run_cli(["apply", "--no-provision", SCENARIO_1, "-i", inventory, "--yes"])
    assert code == 0, err
    with connect(vcsim_lab.target()) as session:
        vm = read_state(session, vcsim_lab.placement_names()).vms["s1-7g"]
        assert vm.firmware == "efi"
        # Someone switches it to BIOS by hand (powered off, as vSphere requires).
        wait_for_task(vm.ref.PowerOffVM_Task(), "power off")
        wait_for_task(vm.ref.ReconfigVM_Task(spec=vim.vm.ConfigSpec(firmware="bios")), "bios")

    code, out, err = run_cli(["apply", "--no-provision", SCENARIO_1, "-i", inventory, "--yes"])
    assert code == 2, err
    assert "VM s1-7g: has bios firmware, the plan wants efi; vgpu does not switch" in flat(err)
    assert vms_of(vcsim_lab)["s1-7g"].firmware == "bios"
