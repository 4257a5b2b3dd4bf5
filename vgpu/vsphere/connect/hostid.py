"""A host's identity: its hardware UUID (hardware.systemInfo.uuid) stays when the host is
reinstalled and added to vCenter again under another name; the name is only a label."""

from __future__ import annotations

from pathlib import Path

from pyVmomi import vim

from vgpu.model.inventory import Inventory
from vgpu.vsphere.connect.connection import connect, resolve_placement
from vgpu.vsphere.connect.from_inventory import placement_from_inventory, target_from_inventory


def host_uuid(inventory: Inventory, inventory_path: Path, host: str) -> str | None:
    """The hardware UUID vCenter reports for ``host`` now; None when it has no such host."""
    with connect(target_from_inventory(inventory, inventory_path)) as session:
        placement = resolve_placement(session, placement_from_inventory(inventory,
                                                                        inventory_path))
        for _ref, props in session.collect(placement.datacenter.hostFolder, vim.HostSystem,
                                          ["name", "hardware.systemInfo.uuid"]):
            if props.get("name") == host:
                return props.get("hardware.systemInfo.uuid") or None
    return None
