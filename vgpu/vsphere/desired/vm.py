"""What a VM should look like: the vSphere layer's own input, independent of scenario files.

``desired_from_plan`` (vgpu.vsphere.plan.from_plan) builds these from a Plan; tests build them
directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

OWNER_KEY = "vgpu.owner"
OWNER_VALUE = "vgpu"
SCENARIO_KEY = "vgpu.scenario"
PLAN_HASH_KEY = "vgpu.plan_hash"
LAB_KEY = "vgpu.lab"  # the inventory's lab (Inventory.lab_name)
# The VM's own config.instanceUuid, written once it exists: a clone copies the marks but
# gets an instanceUuid of its own, so its copied marks are not ownership.
INSTANCE_KEY = "vgpu.instance_uuid"
# The scenario settings vgpu set on the VM, comma-separated: those a later plan no longer
# sets are cleared (vgpu.vsphere.plan.managed).
MANAGED_KEYS_KEY = "vgpu.managed_keys"


@dataclass(frozen=True)
class PassthroughDevice:
    """A whole GPU given to the VM (DirectPath I/O), named by its host PCI address."""

    pci_id: str
    vendor_id: int
    device_id: int


@dataclass(frozen=True)
class RdmaNicDevice:
    """The host RDMA NIC given to the VM: the whole NIC (passthrough), an SR-IOV virtual
    function of it (sriov) or a PVRDMA adapter (pvrdma) on ``network``."""

    pci_id: str
    kind: str  # passthrough | sriov | pvrdma
    vendor_id: int
    device_id: int
    network: str | None = None  # port group of an sriov or pvrdma adapter

    @property
    def summary(self) -> str:
        """How the VM's device reads back: ``passthrough <pci>``, ``sriov <pci>`` or
        ``pvrdma`` (a PVRDMA adapter names no PCI device)."""
        return "pvrdma" if self.kind == "pvrdma" else f"{self.kind} {self.pci_id}"


@dataclass(frozen=True)
class GuestNetwork:
    """The static address guest customization gives the VM's first NIC."""

    ip: str
    netmask: str = "255.255.255.0"
    gateway: str | None = None
    dns: tuple[str, ...] = ()
    domain: str = "lab.local"


@dataclass(frozen=True)
class OwnerMarks:
    """extraConfig keys that mark a VM as created by vgpu for one lab, scenario and plan
    (no lab mark where ``lab`` is empty)."""

    scenario: str
    plan_hash: str
    lab: str = ""

    def as_extra_config(self) -> dict[str, str]:
        marks = {OWNER_KEY: OWNER_VALUE, SCENARIO_KEY: self.scenario,
                 PLAN_HASH_KEY: self.plan_hash}
        return {**marks, LAB_KEY: self.lab} if self.lab else marks


@dataclass(frozen=True)
class VmDesired:
    """One VM as it should be after ``apply``."""

    name: str
    host: str
    num_cpus: int
    memory_mb: int
    owner: OwnerMarks
    vgpus: tuple[str, ...] = ()  # exact host vGPU type names, e.g. grid_a100d-1-10c
    passthrough: tuple[PassthroughDevice, ...] = ()
    rdma_nic: RdmaNicDevice | None = None
    extra_config: dict[str, str] = field(default_factory=dict)
    network: GuestNetwork | None = None
    port_group: str | None = None  # the network of the first NIC (placement.network)
    firmware: str = "efi"
    memory_reservation_locked: bool = True
    guest_id: str | None = None
    # Where the plan puts its vGPUs (not compared with the VM: ESXi picks the GPU at
    # power-on): the GPUs' PCI ids, and the VM's place in its host's power-on sequence:
    # its first planned GPU's index, then larger MIG vGPUs first (-memory, -compute slices).
    planned_gpus: tuple[str, ...] = ()
    power_on_order: tuple[int, int, int] = (0, 0, 0)

    @property
    def rdma_adapters(self) -> int:
        """Network adapters the RDMA NIC adds (SR-IOV and PVRDMA are ethernet cards)."""
        return 1 if self.rdma_nic is not None and self.rdma_nic.kind != "passthrough" else 0

    def all_extra_config(self) -> dict[str, str]:
        """The VM's own settings, the list of them and the owner marks (marks win on a
        clash)."""
        return {**self.extra_config, **managed_mark(self.extra_config),
                **self.owner.as_extra_config()}


def managed_mark(settings: dict[str, str]) -> dict[str, str]:
    """The ``vgpu.managed_keys`` mark listing ``settings``' keys; none for no settings."""
    return {MANAGED_KEYS_KEY: ",".join(sorted(settings))} if settings else {}
