"""DRS and GPU VMs on the simulator lab: with DRS placing VMs at power-on (the lab's
`drs_initial_placement`), apply gives each GPU VM a manual per-VM DRS override so it stays
on its planned host, and a VM that DRS moved anyway fails with the fix."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.model.load import load_inventory, load_scenario
from vgpu.sim.lab import LabShape
from vgpu.vsphere.apply.execute import Executor
from vgpu.vsphere.connect.connection import connect, resolve_placement
from vgpu.vsphere.plan.reconcile import read_state
from vgpu.vsphere.plan.workflow import prepare_apply

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

REPO = Path(__file__).resolve().parents[3]
SCENARIO_6 = REPO / "scenarios" / "mig_4g_2g_1g.yaml"
VMS = ("s6-4g", "s6-2g", "s6-1g")


def overrides(lab: VcsimLab) -> dict[str, tuple[bool | None, str]]:
    """VM name -> (enabled, behavior) of the cluster's per-VM DRS overrides."""
    with connect(lab.target()) as session:
        cluster = resolve_placement(session, lab.placement_names()).cluster
        return {o.key.name: (o.enabled, o.behavior)
                for o in cluster.configurationEx.drsVmConfig or []}


def hosts_of(lab: VcsimLab) -> dict[str, str | None]:
    with connect(lab.target()) as session:
        vms = read_state(session, lab.placement_names()).vms
    return {name: vms[name].host for name in VMS if name in vms}


def test_apply_pins_gpu_vms_with_a_manual_drs_override(tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=2, drs_initial_placement=True)) as lab:
        inventory = lab.write_inventory(tmp_path / "inv.yaml")
        code, out, err = run_cli(["apply", "--no-provision", str(SCENARIO_6), "-i",
                                  str(inventory), "--yes"])
        assert code == 0, err + out
        assert hosts_of(lab) == dict.fromkeys(VMS, "DC0_C0_H0")
        assert overrides(lab) == dict.fromkeys(VMS, (True, "manual"))


def test_a_gpu_vm_drs_moved_at_power_on_fails_with_the_fix(tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=2, drs_initial_placement=True)) as lab:
        inventory = lab.write_inventory(tmp_path / "inv.yaml")
        with connect(lab.target()) as session:
            prep = prepare_apply(session, load_scenario(SCENARIO_6), load_inventory(inventory),
                                 inventory)
            # No cluster to set overrides on: DRS places the VMs as it likes.
            placement = dataclasses.replace(prep.state.placement, cluster=None)
            report = Executor(placement, prep.state.hosts).run(prep.changes)
        moved = {o.name: o.error for o in report.failed}
        assert list(moved) == ["s6-2g"]  # the first stays (a tie), the second is moved
        assert moved["s6-2g"] == (
            "VM s6-2g was moved to host DC0_C0_H1 at power-on (DRS), not its planned "
            "DC0_C0_H0: give it a manual DRS override (cluster > Configure > VM Overrides) "
            "or set DRS to manual, power it off and run `vgpu apply` again")
