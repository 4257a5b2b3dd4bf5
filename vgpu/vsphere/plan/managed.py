"""The extraConfig settings vgpu manages on a VM: what the scenario sets, with the per-device
keys (``pciPassthru<N>.cfg.enable_uvm``) numbered by the VM's own PCI passthrough devices, and
what must be cleared because the scenario no longer sets it (the ``vgpu.managed_keys`` mark
lists what vgpu set last time; a key set to an empty value is removed by vSphere)."""

from __future__ import annotations

import re
from typing import Any

from pyVmomi import vim

from vgpu.vsphere.desired.vm import MANAGED_KEYS_KEY, VmDesired, managed_mark
from vgpu.vsphere.read.facts import VmActual

UVM_KEY = re.compile(r"pciPassthru(\d+)\.cfg\.enable_uvm")
REMOVE = vim.vm.device.VirtualDeviceSpec.Operation.remove
ADD = vim.vm.device.VirtualDeviceSpec.Operation.add


def managed_keys(extra_config: dict[str, str]) -> set[str]:
    """The keys the VM's ``vgpu.managed_keys`` mark lists."""
    return {k for k in extra_config.get(MANAGED_KEYS_KEY, "").split(",") if k}


def _pci_devices(have: VmActual | None) -> list[Any]:
    if have is None:
        return []
    nics = [d for d in have.rdma_devices if isinstance(d, vim.vm.device.VirtualPCIPassthrough)]
    devices = [*have.vgpu_devices, *have.passthrough_devices, *nics]
    return sorted(devices, key=lambda d: d.key)


def pci_order_after(have: VmActual | None, device_changes: list[Any]) -> list[Any]:
    """The VM's PCI passthrough devices once ``device_changes`` (specs.pci_device_changes) are
    made: the kept ones in their order, then the added ones in the order they are added."""
    removed = {id(c.device) for c in device_changes if c.operation == REMOVE}
    kept = [d for d in _pci_devices(have) if id(d) not in removed]
    added = [c.device for c in device_changes if c.operation == ADD
             and isinstance(c.device, vim.vm.device.VirtualPCIPassthrough)]
    return kept + added


def device_ordered(settings: dict[str, str], after: list[Any]) -> dict[str, str]:
    """``settings`` with the plan's ``pciPassthru<N>.cfg.enable_uvm`` keys (numbered over the
    scenario's requests) renumbered over the VM's PCI passthrough devices: one per vGPU."""
    uvm = {k: v for k, v in settings.items() if UVM_KEY.fullmatch(k)}
    if not uvm:
        return settings
    value = next(iter(uvm.values()))
    out = {k: v for k, v in settings.items() if k not in uvm}
    for index, device in enumerate(after):
        if isinstance(device.backing, vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo):
            out[f"pciPassthru{index}.cfg.enable_uvm"] = value
    return out


def wanted_extra_config(want: VmDesired, have: VmActual | None,
                        device_changes: list[Any]) -> dict[str, str]:
    """Every extraConfig key and value the VM should have: its settings by device order,
    the list of them and the owner marks."""
    settings = device_ordered(want.extra_config, pci_order_after(have, device_changes))
    return {**settings, **managed_mark(settings), **want.owner.as_extra_config()}


def stale_keys(have: VmActual | None, wanted: dict[str, str]) -> list[str]:
    """Keys vgpu set on the VM earlier that ``wanted`` no longer has, and are still there."""
    if have is None:
        return []
    listed = managed_keys(have.extra_config) | {MANAGED_KEYS_KEY}
    return sorted(k for k in listed if k not in wanted and k in have.extra_config)


def extra_config_update(want: VmDesired, have: VmActual | None,
                        device_changes: list[Any]) -> dict[str, str]:
    """What to send: the keys whose value differs, and the stale keys as empty values
    (vSphere removes a key set to an empty value)."""
    wanted = wanted_extra_config(want, have, device_changes)
    current = have.extra_config if have else {}
    update = {k: v for k, v in wanted.items() if current.get(k) != v}
    update.update({k: "" for k in stale_keys(have, wanted)})
    return update
