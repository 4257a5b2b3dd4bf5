"""What apply would do for one VM, decided from desired and actual state alone (pure)."""

from __future__ import annotations

from dataclasses import replace

from vgpu.vsphere.desired.vm import GuestNetwork, OwnerMarks, VmDesired
from vgpu.vsphere.plan.diff import Action, Step, plan_changes, plan_destroy, plan_vm
from vgpu.vsphere.read.facts import VmActual

MARKS = OwnerMarks("8", "hash-1")


def want(**overrides: object) -> VmDesired:
    base = VmDesired(name="vm-1", host="h0", num_cpus=8, memory_mb=16384, owner=MARKS,
                     vgpus=("grid_a100d-1-10c",), extra_config={"pciPassthru.use64bitMMIO": "TRUE"},
                     network=GuestNetwork(ip="10.0.0.5"))
    return replace(base, **overrides)  # type: ignore[arg-type]


def have(**overrides: object) -> VmActual:
    base = VmActual(
        name="vm-1", ref=None, host="h0", powered_on=True, num_cpus=8, memory_mb=16384,
        firmware="efi", memory_reservation_locked=True, guest_id="ubuntu64Guest",
        is_template=False,
        extra_config={"pciPassthru.use64bitMMIO": "TRUE",
                      "vgpu.managed_keys": "pciPassthru.use64bitMMIO", **MARKS.as_extra_config()},
        vgpus=("grid_a100d-1-10c",), vgpu_devices=(), passthrough_ids=(),
        passthrough_devices=(), ip="10.0.0.5", pending_customization=False)
    return replace(base, **overrides)  # type: ignore[arg-type]


def test_matching_vm_is_kept_with_no_steps() -> None:
    change = plan_vm(want(), have())
    assert change.action is Action.KEEP and change.steps == [] and change.fields == []


def test_new_vm_is_cloned_configured_customized_and_started() -> None:
    change = plan_vm(want(), None)
    assert change.action is Action.CREATE
    assert change.steps == [Step.CLONE, Step.RECONFIGURE, Step.CUSTOMIZE, Step.POWER_ON,
                            Step.WAIT_IP]
    assert plan_vm(want(network=None), None).steps == [Step.CLONE, Step.RECONFIGURE,
                                                      Step.POWER_ON]


def test_hardware_change_on_a_running_vm_powers_it_off_first() -> None:
    change = plan_vm(want(vgpus=("grid_a100d-2-20c",), memory_mb=32768), have())
    assert change.steps == [Step.POWER_OFF, Step.RECONFIGURE, Step.POWER_ON, Step.WAIT_IP]
    assert {(f.field, f.current, f.wanted) for f in change.fields} == {
        ("vgpus", "grid_a100d-1-10c", "grid_a100d-2-20c"), ("memory_mb", "16384", "32768")}


def test_only_a_new_plan_hash_is_written_without_a_power_cycle() -> None:
    change = plan_vm(want(owner=OwnerMarks("8", "hash-2")), have())
    assert change.steps == [Step.RECONFIGURE]
    assert [(f.field, f.current, f.wanted) for f in change.fields] == [
        ("extraConfig[vgpu.plan_hash]", "hash-1", "hash-2")]


def test_wrong_host_means_relocation_while_powered_off() -> None:
    change = plan_vm(want(host="h1"), have())
    assert change.steps == [Step.POWER_OFF, Step.RELOCATE, Step.POWER_ON, Step.WAIT_IP]


def test_wrong_ip_is_customized_again_unless_a_customization_is_pending() -> None:
    assert plan_vm(want(), have(ip="10.0.0.9")).steps == [
        Step.POWER_OFF, Step.CUSTOMIZE, Step.POWER_ON, Step.WAIT_IP]
    pending = have(ip=None, powered_on=False, pending_customization=True)
    assert plan_vm(want(), pending).steps == [Step.POWER_ON, Step.WAIT_IP]


def test_vgpu_order_does_not_matter() -> None:
    two = ("grid_a100d-1-10c", "grid_a100d-2-20c")
    assert plan_vm(want(vgpus=two), have(vgpus=tuple(sorted(two)))).action is Action.KEEP
    assert plan_vm(want(vgpus=tuple(reversed(two))), have(vgpus=tuple(sorted(two)))).action \
        is Action.KEEP


def test_unowned_or_other_scenario_name_clashes_are_conflicts_not_changes() -> None:
    foreign = have(extra_config={})
    other = have(name="vm-2", extra_config={**MARKS.as_extra_config(), "vgpu.scenario": "6"})
    result = plan_changes([want(), want(name="vm-2")], {"vm-1": foreign, "vm-2": other}, "8")
    assert result.changes == []
    assert [(c.name, "vgpu.owner" in c.reason or "scenario '6'" in c.reason)
            for c in result.conflicts] == [("vm-1", True), ("vm-2", True)]


def test_destroy_lists_only_this_scenarios_owned_vms() -> None:
    vms = {
        "mine": have(name="mine"),
        "mine-off": have(name="mine-off", powered_on=False),
        "other-scenario": have(name="other-scenario",
                               extra_config={**MARKS.as_extra_config(), "vgpu.scenario": "1"}),
        "foreign": have(name="foreign", extra_config={}),
    }
    result = plan_destroy(vms, "8")
    assert [(c.name, c.steps) for c in result.changes] == [
        ("mine", [Step.POWER_OFF, Step.DESTROY]), ("mine-off", [Step.DESTROY])]
