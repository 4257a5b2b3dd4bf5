"""Compare desired VMs with what vCenter has and list what apply/destroy would do (pure)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from vgpu.vsphere.desired.vm import (
    INSTANCE_KEY,
    LAB_KEY,
    MANAGED_KEYS_KEY,
    OWNER_KEY,
    PLAN_HASH_KEY,
    SCENARIO_KEY,
    VmDesired,
)
from vgpu.vsphere.plan.managed import extra_config_update
from vgpu.vsphere.plan.specs import pci_device_changes
from vgpu.vsphere.read.facts import VmActual

MARK_KEYS = {OWNER_KEY, SCENARIO_KEY, PLAN_HASH_KEY, LAB_KEY, INSTANCE_KEY, MANAGED_KEYS_KEY}


class Action(StrEnum):
    CREATE = "create"
    CHANGE = "change"
    KEEP = "keep"
    DELETE = "delete"


class Step(StrEnum):
    """The vCenter operations apply may run for one VM, in the order it runs them."""

    POWER_OFF = "shut down"  # the guest first, then a hard power-off (vgpu.vsphere.apply.power)
    CLONE = "clone"
    RELOCATE = "relocate"
    RECONFIGURE = "reconfigure"
    CUSTOMIZE = "customize"
    POWER_ON = "power on"
    WAIT_IP = "wait for IP"
    DESTROY = "destroy"


@dataclass(frozen=True)
class FieldChange:
    field: str
    current: str
    wanted: str


@dataclass
class VmChange:
    name: str
    action: Action
    desired: VmDesired | None = None
    actual: VmActual | None = None
    fields: list[FieldChange] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)


@dataclass(frozen=True)
class Conflict:
    """A VM name the plan wants that an unowned (or other scenario's) VM already uses."""

    name: str
    reason: str


@dataclass
class ChangeSet:
    changes: list[VmChange]
    conflicts: list[Conflict] = field(default_factory=list)

    def count(self, action: Action) -> int:
        return sum(1 for c in self.changes if c.action is action)

    @property
    def pending(self) -> list[VmChange]:
        return [c for c in self.changes if c.action is not Action.KEEP]

    def summary(self) -> str:
        return ", ".join(f"{self.count(a)} to {a.value}" for a in Action)


def _text(values: Iterable[str]) -> str:
    items = list(values)
    return ", ".join(items) if items else "none"


def hardware_changes(want: VmDesired, have: VmActual) -> list[FieldChange]:
    """Settings that need a ReconfigVM_Task (and a powered-off VM)."""
    fields: list[FieldChange] = []

    def check(name: str, current: object, wanted: object) -> None:
        if current != wanted:
            fields.append(FieldChange(name, str(current), str(wanted)))

    check("num_cpus", have.num_cpus, want.num_cpus)
    check("memory_mb", have.memory_mb, want.memory_mb)
    check("firmware", have.firmware, want.firmware)
    check("memory_reservation_locked", have.memory_reservation_locked,
          want.memory_reservation_locked)
    if want.guest_id is not None:
        check("guest_id", have.guest_id, want.guest_id)
    if have.vgpus != tuple(sorted(want.vgpus)):
        fields.append(FieldChange("vgpus", _text(have.vgpus), _text(sorted(want.vgpus))))
    wanted_pci = tuple(sorted(d.pci_id for d in want.passthrough))
    if have.passthrough_ids != wanted_pci:
        fields.append(FieldChange("passthrough", _text(have.passthrough_ids), _text(wanted_pci)))
    wanted_nic = (want.rdma_nic.summary,) if want.rdma_nic else ()
    if have.rdma_nics != wanted_nic:
        fields.append(FieldChange("rdma_nic", _text(have.rdma_nics), _text(wanted_nic)))
    return fields


def network_changes(want: VmDesired, have: VmActual) -> list[FieldChange]:
    """The first NIC on another network than the planned one: a reconfigure moves it, on a
    running VM too."""
    if want.port_group is None or have.port_group == want.port_group:
        return []
    return [FieldChange("network", have.port_group or "(no NIC)", want.port_group)]


def extra_config_changes(want: VmDesired, have: VmActual) -> list[FieldChange]:
    """Settings to set (pciPassthru<N> by the VM's device order) and settings vgpu set
    earlier that the plan no longer has, to clear (vgpu.vsphere.plan.managed)."""
    update = extra_config_update(want, have, pci_device_changes(want, have))
    return [FieldChange(f"extraConfig[{key}]", have.extra_config.get(key, "(unset)"),
                        value or "(unset)")
            for key, value in sorted(update.items())]


def plan_vm(want: VmDesired, have: VmActual | None) -> VmChange:
    """What to do so that ``have`` becomes ``want``."""
    if have is None:
        steps = [Step.CLONE, Step.RECONFIGURE]
        if want.network:
            steps += [Step.CUSTOMIZE]
        steps += [Step.POWER_ON]
        if want.network:
            steps += [Step.WAIT_IP]
        return VmChange(want.name, Action.CREATE, desired=want, steps=steps)

    fields: list[FieldChange] = []
    steps: list[Step] = []
    needs_off = False
    if have.host != want.host:
        fields.append(FieldChange("host", str(have.host), want.host))
        steps.append(Step.RELOCATE)
        needs_off = True
    hardware = hardware_changes(want, have)
    extra = extra_config_changes(want, have)
    network = network_changes(want, have)
    fields += hardware + extra + network
    if hardware or extra or network:
        steps.append(Step.RECONFIGURE)
    # Owner marks can change on a running VM; everything else takes effect at power-on.
    if hardware or any(f.field[len("extraConfig["):-1] not in MARK_KEYS for f in extra):
        needs_off = True

    ip_wrong = want.network is not None and have.ip != want.network.ip
    if ip_wrong:
        assert want.network is not None
        fields.append(FieldChange("ip", str(have.ip), want.network.ip))
        # A customization already pending (customized, never powered on) applies at power-on.
        if not (have.pending_customization and not have.powered_on and not needs_off):
            steps.append(Step.CUSTOMIZE)
            needs_off = True

    will_be_off = needs_off or not have.powered_on
    if will_be_off:
        if not have.powered_on:
            fields.append(FieldChange("power", "off", "on"))
        steps.append(Step.POWER_ON)
        if want.network:
            steps.append(Step.WAIT_IP)
    if needs_off and have.powered_on:
        steps.insert(0, Step.POWER_OFF)

    action = Action.CHANGE if steps else Action.KEEP
    return VmChange(want.name, action, desired=want, actual=have, fields=fields, steps=steps)


def plan_changes(
    desired: list[VmDesired], actual: dict[str, VmActual], scenario: str,
) -> ChangeSet:
    """The change set for ``apply``: create/change/keep every desired VM and delete this
    scenario's owned VMs that are no longer desired. Unowned name clashes are conflicts."""
    changes: list[VmChange] = []
    conflicts: list[Conflict] = []
    wanted_names = {d.name for d in desired}
    for want in desired:
        have = actual.get(want.name)
        if have is not None and not have.owned:
            why = have.disowned or "it was not created by vgpu (no vgpu.owner mark)"
            conflicts.append(Conflict(want.name, f"a VM of this name exists and {why}"))
            continue
        if have is not None and have.scenario != scenario:
            conflicts.append(Conflict(want.name, f"a VM of this name belongs to scenario "
                                                 f"'{have.scenario}'"))
            continue
        changes.append(plan_vm(want, have))
    for have in sorted(actual.values(), key=lambda v: v.name):
        if have.owned and have.scenario == scenario and have.name not in wanted_names:
            changes.append(plan_removal(have))
    return ChangeSet(changes=changes, conflicts=conflicts)


def plan_removal(have: VmActual) -> VmChange:
    steps = [Step.POWER_OFF, Step.DESTROY] if have.powered_on else [Step.DESTROY]
    return VmChange(have.name, Action.DELETE, actual=have, steps=steps)


def plan_destroy(actual: dict[str, VmActual], scenario: str) -> ChangeSet:
    """Every owned VM of ``scenario``, to delete. Unowned VMs are never listed."""
    owned = [v for v in sorted(actual.values(), key=lambda v: v.name)
             if v.owned and v.scenario == scenario]
    return ChangeSet(changes=[plan_removal(v) for v in owned])
