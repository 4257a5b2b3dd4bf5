"""ATS (Address Translation Services) on the RDMA NICs, as NVIDIA AI Enterprise documents
it: the ConnectX firmware setting (`mlxconfig -d <device> set ATS_ENABLED=true`), a host
reboot, and ACS set on the PCIe bridges between the GPUs and the NIC.

These run on the ESXi host, which vgpu does not log in to, and the vSphere API shows no NIC
firmware setting. So the step is named and checked here from what can be known: the
scenario's command (``vm_settings.ats[].nic_firmware``), filled with the inventory's
``rdma_nics[].mlx_device``, for every NIC the plan gives a VM; the bridges above that NIC
and the VM's GPUs, read from the host's PCI devices; and whether the inventory records the
step done (``rdma_nics[].ats_firmware: enabled``). Pure: the caller passes the bridges."""

from __future__ import annotations

from dataclasses import dataclass

from vgpu.model.inventory import Inventory, RdmaNic
from vgpu.model.plan import Plan
from vgpu.model.scenario import NicFirmwareStep, Scenario

RECORD_FIX = "then record `ats_firmware: enabled` on the NIC in the inventory's rdma_nics"


@dataclass(frozen=True)
class NicFirmwareTodo:
    """The ATS firmware step for one NIC the plan uses."""

    setting: str
    host: str
    nic: str
    step: NicFirmwareStep
    mlx_device: str | None
    done: bool
    bridges: tuple[str, ...] = ()

    @property
    def command(self) -> str | None:
        if self.mlx_device is None:
            return None
        return self.step.command.format(device=self.mlx_device)

    def what_to_do(self) -> str:
        """The commands and the reboot, in the order they are done."""
        if self.command is None:
            return (f"the inventory names no mlx_device for NIC {self.nic} of {self.host}: "
                    "add rdma_nics[].mlx_device (the name `mst status` shows on the host) so "
                    f"vgpu can say the command ({self.step.command})")
        parts = [f"run on {self.host} `{self.command}`"]
        if self.step.reboot:
            parts.append("reboot the host")
        parts.append(self._acs())
        return "; ".join(parts)

    def _acs(self) -> str:
        where = ", ".join(self.bridges) if self.bridges else \
            "the PCIe bridges above the NIC and the VM's GPUs (preflight names them)"
        if self.step.bridge_command is None:
            return f"set ACS on {where} as the platform documents"
        if not self.bridges:
            return f"set ACS on {where} with `{self.step.bridge_command}`"
        return "set ACS: " + ", ".join(
            f"`{self.step.bridge_command.format(bridge=b)}`" for b in self.bridges)

    def describe(self) -> str:
        head = f"ATS setting {self.setting}, NIC {self.nic} on {self.host}"
        if self.done:
            return (f"{head}: recorded done in the inventory (`{self.command}`); vgpu cannot "
                    "read NIC firmware through vSphere")
        return f"{head}: {self.what_to_do()}; {RECORD_FIX}"


def _inventory_nic(inventory: Inventory, host: str, pci: str) -> RdmaNic | None:
    for h in inventory.hosts:
        if h.name == host:
            return next((n for n in h.rdma_nics if n.pci_id == pci), None)
    return None


def nic_firmware_todos(scenario: Scenario, inventory: Inventory, plan: Plan,
                       bridges: dict[tuple[str, str], tuple[str, ...]] | None = None,
                       ) -> list[NicFirmwareTodo]:
    """One entry per ATS firmware step and NIC the plan gives a VM; ``bridges`` maps
    (host, NIC) to the bridges above it and its VMs' GPUs, where the caller read them."""
    steps = [(a.name, a.nic_firmware) for a in scenario.vm_settings.ats if a.nic_firmware]
    nics = sorted({(vm.host, vm.rdma_nic.pci_id) for vm in plan.vms if vm.rdma_nic})
    todos: list[NicFirmwareTodo] = []
    for name, step in steps:
        for host, pci in nics:
            nic = _inventory_nic(inventory, host, pci)
            todos.append(NicFirmwareTodo(
                setting=name, host=host, nic=pci, step=step,
                mlx_device=nic.mlx_device if nic else None,
                done=bool(nic and nic.mlx_device and nic.ats_firmware == "enabled"),
                bridges=(bridges or {}).get((host, pci), ())))
    return todos
