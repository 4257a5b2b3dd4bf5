"""What each host of the running simulator lab reports now, read through the vSphere API
the way preflight reads any host: the ESXi build it runs, the NVIDIA host driver VIB
installed, a reboot pending, maintenance mode. `vgpu sim status` shows it, so after an
in-place upgrade of one host (`vgpu sim upgrade`) the upgraded host and the others are told
apart."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vgpu.model.load import load_inventory
from vgpu.vsphere.connect.connection import connect
from vgpu.vsphere.connect.from_inventory import placement_from_inventory, target_from_inventory
from vgpu.vsphere.plan.reconcile import read_state
from vgpu.vsphere.read.facts import read_host_drivers


@dataclass(frozen=True)
class HostStatus:
    name: str
    version: str | None
    build: str | None  # the running one
    vib: str | None  # the NVIDIA host driver VIB installed: "name version"
    reboot_pending: bool | None
    in_maintenance: bool

    def line(self) -> str:
        pending = {True: "reboot pending", False: "no reboot pending", None: "reboot ?"}
        return (f"{self.name}  ESXi {self.version or '-'} build {self.build or '-'}  "
                f"host driver VIB {self.vib or '-'}  {pending[self.reboot_pending]}"
                + ("  in maintenance mode" if self.in_maintenance else ""))


def read_host_status(inventory_path: Path) -> list[HostStatus]:
    """Every host of the lab's vCenter, by name (RemoteError when it does not answer)."""
    inventory = load_inventory(inventory_path)
    with connect(target_from_inventory(inventory, inventory_path)) as session:
        hosts = read_state(session, placement_from_inventory(inventory, inventory_path)).hosts
        read_host_drivers(hosts)
    return [HostStatus(name, facts.version, facts.build,
                       f"{facts.host_driver.name} {facts.host_driver.version}"
                       if facts.host_driver else None,
                       facts.reboot_required, facts.in_maintenance)
            for name, facts in sorted(hosts.items())]
