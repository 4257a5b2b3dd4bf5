"""A shared vCenter: another lab's VMs of the same names in another folder and cluster, and
a clone of a vgpu VM (which carries every mark), are never changed or deleted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyVmomi import vim

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from tests.vsphere.applying import apply, desired_vms
from vgpu.model.load import load_inventory
from vgpu.vsphere.apply.execute import Executor
from vgpu.vsphere.connect.connection import Session, connect, resolve_placement
from vgpu.vsphere.connect.tasks import wait_for_task
from vgpu.vsphere.desired.instances import InstanceRecord, record_path
from vgpu.vsphere.desired.vm import INSTANCE_KEY
from vgpu.vsphere.plan.reconcile import plan_teardown, read_state
from vgpu.vsphere.read.facts import VmActual, extra_config_dict, read_vm_list

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

REPO = Path(__file__).resolve().parents[3]
SCENARIO_8 = str(REPO / "scenarios" / "mig_7x1g.yaml")
OTHER_FOLDER, OTHER_CLUSTER, OTHER_HOST = "team-b", "DC0_C1", "team-b-esx-1"


def _other_lab_place(session: Session, lab: VcsimLab) -> tuple[Any, Any, Any, Any]:
    """Another lab's folder, cluster and host in the same datacenter (made as an admin
    would), and the template to clone from."""
    placement = resolve_placement(session, lab.placement_names())
    dc = placement.datacenter
    folder = dc.vmFolder.CreateFolder(OTHER_FOLDER)
    cluster = dc.hostFolder.CreateClusterEx(name=OTHER_CLUSTER, spec=vim.cluster.ConfigSpecEx())
    host = wait_for_task(cluster.AddHost_Task(
        spec=vim.host.ConnectSpec(hostName=OTHER_HOST, userName="root", password="x"),
        asConnected=True), "add host")
    return folder, cluster, host, placement.template


def clone(session: Session, source: Any, name: str, folder: Any, pool: Any, host: Any,
          extra: dict[str, str]) -> Any:
    """Clone ``source`` carrying ``extra`` as its extraConfig (vCenter copies the source's
    extraConfig into a clone; the simulator copies only the spec's), and power it on."""
    spec = vim.vm.CloneSpec(
        location=vim.vm.RelocateSpec(pool=pool, host=host), powerOn=False,
        config=vim.vm.ConfigSpec(extraConfig=[vim.option.OptionValue(key=k, value=v)
                                              for k, v in extra.items()]))
    vm = wait_for_task(source.CloneVM_Task(folder=folder, name=name, spec=spec), f"clone {name}")
    if vm.runtime.host._moId != host._moId:
        wait_for_task(vm.RelocateVM_Task(spec=vim.vm.RelocateSpec(host=host, pool=pool)),
                      f"relocate {name}")
    wait_for_task(vm.PowerOnVM_Task(), f"power on {name}")
    return vm


def every_vm(lab: VcsimLab) -> list[VmActual]:
    with connect(lab.target()) as session:
        dc = resolve_placement(session, lab.placement_names()).datacenter
        return read_vm_list(session, dc)


def test_other_labs_vms_of_the_same_names_and_a_debug_clone_are_never_touched(
    vcsim_lab: VcsimLab, tmp_path: Path,
) -> None:
    inventory_path = vcsim_lab.write_inventory(tmp_path / "inv.yaml")
    lab_name = load_inventory(inventory_path).lab_name
    inventory = str(inventory_path)
    # Another lab with the same inventory name: the very same marks, other folder/cluster.
    marks = {"vgpu.owner": "vgpu", "vgpu.scenario": "8", "vgpu.plan_hash": "theirs",
             "vgpu.lab": lab_name}
    with connect(vcsim_lab.target()) as session:
        folder, cluster, host, template = _other_lab_place(session, vcsim_lab)
        for name in ("s8-1g-1", "s8-1g-2"):
            clone(session, template, name, folder, cluster.resourcePool, host, marks)

    code, out, err = run_cli(["apply", "--no-provision", SCENARIO_8, "-i", inventory, "--yes"])
    assert code == 0, err
    assert "7 to create, 0 to change, 0 to keep, 0 to delete" in out

    with connect(vcsim_lab.target()) as session:
        placement = resolve_placement(session, vcsim_lab.placement_names())
        ours = read_state(session, vcsim_lab.placement_names(lab=lab_name)).vms["s8-1g-1"]
        assert ours.extra_config["vgpu.lab"] == lab_name
        assert ours.extra_config[INSTANCE_KEY] == ours.instance_uuid
        clone(session, ours.ref, "s8-1g-1-debugcopy", placement.folder,
              placement.resource_pool, placement.hosts[ours.host], ours.extra_config)

    code, out, err = run_cli(["apply", "--no-provision", SCENARIO_8, "-i", inventory, "--yes"])
    assert code == 0, err
    assert "0 to create, 0 to change, 7 to keep, 0 to delete" in out

    code, out, err = run_cli(["destroy", "--scenario", "8", "-i", inventory, "--yes"])
    assert code == 0, err
    assert "7 to delete" in out and "debugcopy" not in out

    left = {(vm.name, vm.folder): vm for vm in every_vm(vcsim_lab)}
    names = sorted(name for name, _ in left)
    assert names == ["s8-1g-1", "s8-1g-1-debugcopy", "s8-1g-2", "vgpu-template"]
    for vm in left.values():
        if vm.name.startswith("s8-"):
            assert vm.powered_on, vm.name
    theirs = [vm for vm in left.values() if vm.name in ("s8-1g-1", "s8-1g-2")]
    assert all(vm.host == OTHER_HOST and vm.extra_config["vgpu.plan_hash"] == "theirs"
               for vm in theirs)


def test_the_created_vms_instance_uuid_is_recorded_and_a_copy_is_not_owned(
    vcsim_lab: VcsimLab,
) -> None:
    apply(vcsim_lab, desired_vms(1))
    with connect(vcsim_lab.target()) as session:
        state = read_state(session, vcsim_lab.placement_names())
        mine = state.vms["s8-1g-1"]
        assert mine.owned and mine.disowned is None
        assert InstanceRecord("").uuids() == {mine.instance_uuid}
        assert record_path("").is_file()
        copy = clone(session, mine.ref, "s8-1g-1-copy", state.placement.folder,
                     state.placement.resource_pool, state.placement.hosts[mine.host],
                     mine.extra_config)
        # Even the instance mark was copied, so the record is not needed to tell: the
        # copy's own instanceUuid differs.
        assert extra_config_dict(copy.config.extraConfig)[INSTANCE_KEY] == mine.instance_uuid
        state = read_state(session, vcsim_lab.placement_names())
        assert not state.vms["s8-1g-1-copy"].owned
        assert "is a copy of a vgpu VM" in str(state.vms["s8-1g-1-copy"].disowned)
        teardown = plan_teardown(state, "8")
        assert [c.name for c in teardown.changes] == ["s8-1g-1"]
        assert Executor(state.placement, state.hosts).run(teardown).failed == []
    assert InstanceRecord("").uuids() == set()
