"""Reconcile hand-built desired VMs against the simulator: create, idempotent re-apply,
ownership, destroy, and faults that stop one VM while the others finish."""

from __future__ import annotations

import pytest

from tests.labs.vcsim import VcsimLab, lab_available
from tests.vsphere.applying import MIG_KEYS, apply, desired_vms, state_of
from vgpu.errors import InputError
from vgpu.sim.lab import LabShape
from vgpu.vsphere.apply.execute import Executor
from vgpu.vsphere.connect.connection import connect
from vgpu.vsphere.desired.vm import OwnerMarks, VmDesired
from vgpu.vsphere.plan.diff import Action, Step
from vgpu.vsphere.plan.reconcile import plan_teardown, read_state

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

def test_seven_mig_vms_are_built_as_planned_and_a_second_apply_changes_nothing(
    vcsim_lab: VcsimLab,
) -> None:
    desired = desired_vms(7)
    changes, report = apply(vcsim_lab, desired)
    assert changes.count(Action.CREATE) == 7
    assert report.failed == []

    vms = state_of(vcsim_lab).vms
    for want in desired:
        vm = vms[want.name]
        assert vm.host == "DC0_C0_H0"
        assert vm.vgpus == ("grid_a100d-1-10c",)
        assert vm.firmware == "efi"
        assert vm.memory_reservation_locked is True
        assert (vm.num_cpus, vm.memory_mb) == (32, 65536)
        assert vm.powered_on
        assert want.network is not None and vm.ip == want.network.ip
        for key, value in {**MIG_KEYS, "vgpu.owner": "vgpu", "vgpu.scenario": "8",
                           "vgpu.plan_hash": "h1"}.items():
            assert vm.extra_config[key] == value

    tasks_before = vcsim_lab.recent_tasks()
    again, report = apply(vcsim_lab, desired)
    assert again.count(Action.KEEP) == 7 and again.pending == []
    assert report.tasks == 0
    assert vcsim_lab.recent_tasks() == tasks_before


def test_changed_vm_is_reconfigured_powered_off_then_on(vcsim_lab: VcsimLab) -> None:
    apply(vcsim_lab, desired_vms(2))
    changes, report = apply(vcsim_lab, desired_vms(2, vcpu=16, plan_hash="h2"))
    assert changes.count(Action.CHANGE) == 2
    change = changes.changes[0]
    assert change.steps == [Step.POWER_OFF, Step.RECONFIGURE, Step.POWER_ON, Step.WAIT_IP]
    assert {(f.field, f.current, f.wanted) for f in change.fields} >= {
        ("num_cpus", "32", "16"), ("extraConfig[vgpu.plan_hash]", "h1", "h2")}
    assert report.failed == []
    vms = state_of(vcsim_lab).vms
    assert [vms[n].num_cpus for n in ("s8-1g-1", "s8-1g-2")] == [16, 16]
    assert all(vms[n].powered_on and vms[n].extra_config["vgpu.plan_hash"] == "h2"
               for n in ("s8-1g-1", "s8-1g-2"))


def test_fewer_desired_vms_delete_only_this_scenarios_extra_vms(vcsim_lab: VcsimLab) -> None:
    apply(vcsim_lab, desired_vms(3))
    apply(vcsim_lab, desired_vms(1, scenario="5", first_ip=30), scenario="5")
    changes, report = apply(vcsim_lab, desired_vms(1))
    assert [(c.name, c.action) for c in changes.pending] == [
        ("s8-1g-2", Action.DELETE), ("s8-1g-3", Action.DELETE)]
    assert report.failed == []
    assert set(state_of(vcsim_lab).vms) == {"vgpu-template", "s8-1g-1", "s5-1g-1"}


def test_destroy_removes_owned_vms_and_leaves_a_foreign_vm_on_the_same_host(
    vcsim_lab: VcsimLab,
) -> None:
    vcsim_lab.make_foreign_vm("team-b-notebook", "DC0_C0_H0", ("grid_a100d-2-20c",))
    apply(vcsim_lab, desired_vms(3))
    with connect(vcsim_lab.target()) as session:
        state = read_state(session, vcsim_lab.placement_names())
        teardown = plan_teardown(state, "8")
        assert sorted(c.name for c in teardown.changes) == ["s8-1g-1", "s8-1g-2", "s8-1g-3"]
        assert all(c.steps == [Step.POWER_OFF, Step.DESTROY] for c in teardown.changes)
        report = Executor(state.placement, state.hosts).run(teardown)
    assert report.failed == []
    vms = state_of(vcsim_lab).vms
    assert set(vms) == {"vgpu-template", "team-b-notebook"}
    foreign = vms["team-b-notebook"]
    assert foreign.powered_on and foreign.vgpus == ("grid_a100d-2-20c",)


def test_name_clash_with_an_unmarked_vm_is_refused_before_any_change(
    vcsim_lab: VcsimLab,
) -> None:
    vcsim_lab.make_foreign_vm("s8-1g-2", "DC0_C0_H0")
    tasks_before = vcsim_lab.recent_tasks()
    with pytest.raises(InputError) as caught:
        apply(vcsim_lab, desired_vms(3))
    assert "VM s8-1g-2" in str(caught.value)
    assert "not created by vgpu" in str(caught.value)
    assert vcsim_lab.recent_tasks() == tasks_before
    assert "s8-1g-1" not in state_of(vcsim_lab).vms


def test_vgpu_type_the_host_does_not_offer_is_an_input_error(vcsim_lab: VcsimLab) -> None:
    wrong = [VmDesired(name="x", host="DC0_C0_H0", num_cpus=2, memory_mb=2048,
                       owner=OwnerMarks("8", "h"), vgpus=("grid_a100-1-5c",))]
    with pytest.raises(InputError, match=r"does not offer vGPU type grid_a100-1-5c; it offers: "
                                         r"grid_a100d-7-80c"):
        apply(vcsim_lab, wrong)


def test_refused_reconfigure_stops_that_vm_only_and_a_rerun_converges(
    vcsim_lab: VcsimLab,
) -> None:
    # The simulator, like vCenter, refuses a reconfigure with an unknown guest OS id.
    broken = desired_vms(4, guest_ids={1: "no-such-guest-os"})
    _, report = apply(vcsim_lab, broken)
    assert [o.name for o in report.failed] == ["s8-1g-2"]
    error = report.failed[0].error or ""
    assert "reconfigure of VM s8-1g-2 failed: InvalidArgument" in error
    assert "guestId" in error
    vms = state_of(vcsim_lab).vms
    assert all(vms[n].powered_on for n in ("s8-1g-1", "s8-1g-3", "s8-1g-4"))
    half_done = vms["s8-1g-2"]
    assert half_done.owned and not half_done.powered_on and half_done.vgpus == ()

    fixed = desired_vms(4, guest_ids={1: "ubuntu64Guest"})
    changes, report = apply(vcsim_lab, fixed)
    assert [(c.name, c.action) for c in changes.pending] == [("s8-1g-2", Action.CHANGE)]
    assert changes.pending[0].steps == [Step.RECONFIGURE, Step.CUSTOMIZE, Step.POWER_ON,
                                        Step.WAIT_IP]
    assert report.failed == []
    vm = state_of(vcsim_lab).vms["s8-1g-2"]
    assert vm.powered_on and vm.ip == "127.0.0.12" and vm.vgpus == ("grid_a100d-1-10c",)
    final, _ = apply(vcsim_lab, fixed)
    assert final.pending == []


def test_host_in_maintenance_fails_its_vms_and_the_others_finish(vcsim_lab: VcsimLab) -> None:
    vcsim_lab.set_maintenance("DC0_C0_H1", True)
    desired = desired_vms(4, hosts=("DC0_C0_H0", "DC0_C0_H1"))
    _, report = apply(vcsim_lab, desired)
    assert sorted(o.name for o in report.failed) == ["s8-1g-2", "s8-1g-4"]
    assert all("DC0_C0_H1 is in maintenance mode" in (o.error or "") for o in report.failed)
    assert all(o.tasks == 0 for o in report.failed)
    assert {"s8-1g-1", "s8-1g-3"} <= set(state_of(vcsim_lab).vms)

    vcsim_lab.set_maintenance("DC0_C0_H1", False)
    changes, report = apply(vcsim_lab, desired)
    assert sorted(c.name for c in changes.pending) == ["s8-1g-2", "s8-1g-4"]
    assert report.failed == []
    vms = state_of(vcsim_lab).vms
    assert vms["s8-1g-4"].host == "DC0_C0_H1" and vms["s8-1g-4"].powered_on


def test_planned_address_used_by_another_scenarios_vm_is_refused(vcsim_lab: VcsimLab) -> None:
    apply(vcsim_lab, desired_vms(1, scenario="5"), scenario="5")
    tasks_before = vcsim_lab.recent_tasks()
    with pytest.raises(InputError, match=r"VM s8-1g-1 ip.*address 127.0.0.11 is already used "
                                         r"by VM s5-1g-1"):
        apply(vcsim_lab, desired_vms(2))
    assert vcsim_lab.recent_tasks() == tasks_before


def test_disconnected_host_fails_its_vms_and_the_others_finish() -> None:
    with VcsimLab(LabShape(hosts=2, disconnected=(1,))) as lab:
        _, report = apply(lab, desired_vms(2, hosts=("DC0_C0_H0", "DC0_C0_H1")))
        assert [o.name for o in report.failed] == ["s8-1g-2"]
        assert "host DC0_C0_H1 is disconnected; reconnect it in vCenter" in (
            report.failed[0].error or "")
        assert state_of(lab).vms["s8-1g-1"].powered_on
        hosts = state_of(lab).hosts
        assert (hosts["DC0_C0_H0"].usable, hosts["DC0_C0_H1"].usable) == (True, False)
