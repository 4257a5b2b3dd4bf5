"""placement.network is where the VMs' first NIC goes: the clone spec puts the template's
NIC on it (a standard or a distributed port group), apply re-reads it, and a VM moved to
another network is moved back by the next apply."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pyVmomi import vim

from tests.cli.invoke import run_cli
from tests.labs.fixtures import lab_fixture
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.sim.lab import DV_PORT_GROUP, NETWORK, PORT_GROUP, LabShape
from vgpu.vsphere.connect.connection import connect
from vgpu.vsphere.connect.tasks import wait_for_task
from vgpu.vsphere.plan.reconcile import read_state
from vgpu.vsphere.read.facts import VmActual

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

REPO = Path(__file__).resolve().parents[3]
SCENARIO_1 = str(REPO / "scenarios" / "mig_1x7g.yaml")
SCENARIO_8 = str(REPO / "scenarios" / "mig_7x1g.yaml")


lab = lab_fixture(lambda: VcsimLab(LabShape(hosts=1)))


def inventory_on(lab: VcsimLab, network: str, path: Path) -> str:
    data = lab.inventory_data()
    data["placement"]["network"] = network  # type: ignore[index]

    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def the_vm(lab: VcsimLab) -> VmActual:
    with connect(lab.target()) as session:
        return read_state(session, lab.placement_names()).vms["s1-7g"]


def test_the_clones_are_on_the_planned_standard_port_group_each_with_its_own_mac(
    lab: VcsimLab, tmp_path: Path,
) -> None:
    inventory = inventory_on(lab, PORT_GROUP, tmp_path / "inv.yaml")
    code, _out, err = run_cli(["apply", "--no-provision", SCENARIO_8, "-i", inventory, "--yes"])
    assert code == 0, err
    with connect(lab.target()) as session:
        vms = read_state(session, lab.placement_names()).vms
    clones = [vms[f"s8-1g-{n}"] for n in range(1, 8)]
    assert {vm.port_group for vm in clones} == {PORT_GROUP}
    assert all(isinstance(vm.nic_device.backing,
                          vim.vm.device.VirtualEthernetCard.NetworkBackingInfo) for vm in clones)
    assert all(vm.powered_on for vm in clones) and clones[0].ip == "127.0.0.11"
    macs = {vm.nic_device.macAddress for vm in clones}
    assert len(macs) == 7 and vms["vgpu-template"].nic_device.macAddress not in macs
    assert vms["vgpu-template"].port_group == NETWORK  # the template itself is untouched


def test_a_distributed_port_group_and_a_vm_moved_off_it_is_moved_back(
    lab: VcsimLab, tmp_path: Path,
) -> None:
    inventory = inventory_on(lab, DV_PORT_GROUP, tmp_path / "inv.yaml")
    code, out, err = run_cli(["apply", "--no-provision", SCENARIO_1, "-i", inventory, "--yes"])
    assert code == 0, err
    vm = the_vm(lab)
    assert vm.port_group == DV_PORT_GROUP
    backing = vm.nic_device.backing
    assert isinstance(backing,
                      vim.vm.device.VirtualEthernetCard.DistributedVirtualPortBackingInfo)

    with connect(lab.target()) as session:  # someone moves it to the standard network
        vm = read_state(session, lab.placement_names()).vms["s1-7g"]
        nic = vm.nic_device
        nic.backing = vim.vm.device.VirtualEthernetCard.NetworkBackingInfo(deviceName=NETWORK)
        wait_for_task(vm.ref.ReconfigVM_Task(spec=vim.vm.ConfigSpec(deviceChange=[
            vim.vm.device.VirtualDeviceSpec(operation="edit", device=nic)])), "move NIC")
    assert the_vm(lab).port_group == NETWORK

    code, out, err = run_cli(["apply", "--no-provision", SCENARIO_1, "-i", inventory,
                              "--dry-run"])
    assert code == 0, err
    assert f"network: {NETWORK} -> {DV_PORT_GROUP}" in out
    assert "power off" not in out  # a NIC moves on a running VM
    code, out, err = run_cli(["apply", "--no-provision", SCENARIO_1, "-i", inventory, "--yes"])
    assert code == 0, err
    assert the_vm(lab).port_group == DV_PORT_GROUP
    code, out, err = run_cli(["apply", "--no-provision", SCENARIO_1, "-i", inventory, "--yes"])
    assert code == 0, err
    assert "0 to create, 0 to change, 1 to keep, 0 to delete" in out
