"""The Plan: a scenario expanded against an inventory into concrete VMs, GPU placements,
VM settings, guest steps and the benchmark matrix. Pure data, JSON-serialisable; every
later stage (vSphere apply, provisioning, bench) reads it instead of re-deriving."""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, Field

GpuMode = Literal["mig", "timesliced", "passthrough", "unused"]


class PlannedVgpu(BaseModel):
    kind: Literal["mig", "timesliced", "passthrough"]
    label: str = Field(description="1g.10gb, A100D-20C or passthrough")
    vgpu_type: str | None = Field(None, description="NVIDIA's vGPU type, e.g. A100D-1-10C")
    gpu_index: int
    pci_id: str | None = None
    start: int | None = Field(None, description="MIG: first memory slice")
    compute_slices: int | None = None
    memory_slices: int | None = None


class PlannedRdmaNic(BaseModel):
    """The host RDMA NIC a VM gets (scenario network.rdma roce or ib)."""

    pci_id: str
    kind: Literal["passthrough", "sriov", "pvrdma"]
    model: str | None = None
    network: str | None = Field(None, description="port group of an sriov/pvrdma adapter")

    def describe(self) -> str:
        return f"{self.kind} {self.pci_id}" + (f" ({self.model})" if self.model else "")


class PlannedVM(BaseModel):
    name: str
    group: str
    host: str
    vcpu: int
    memory_mb: int
    firmware: Literal["efi"] = "efi"
    memory_reservation_locked: bool = True
    vgpus: list[PlannedVgpu] = Field(default_factory=list)
    extra_config: dict[str, str] = Field(default_factory=dict)
    ip: str | None = None
    rdma_nic: PlannedRdmaNic | None = None


class PlannedSlice(BaseModel):
    owner: str = Field(description="VM name, or 'held by <vm>' for instances of others")
    profile: str
    start: int
    memory_slices: int
    compute_slices: int
    foreign: bool = False


class PlannedGpu(BaseModel):
    host: str
    index: int
    model: str
    pci_id: str | None = None
    board: str | None = Field(None, description="vGPU board code of this GPU's form factor, "
                              "e.g. A100D (PCIe) or A100DX (HGX)")
    mode: GpuMode
    slices: list[PlannedSlice] = Field(default_factory=list)
    timesliced_type: str | None = None
    tenants: list[str] = Field(default_factory=list)


class BenchItem(BaseModel):
    workload: str
    kind: Literal["inference", "training"]
    instances: list[str]
    repeats: int


class Plan(BaseModel):
    scenario_id: str
    scenario_name: str
    scenario_file: str | None
    platform: Literal["vsphere", "bare-metal"]
    gpu_model: str
    inventory: str | None
    hosts: list[str]
    vms: list[PlannedVM]
    gpus: list[PlannedGpu]
    guest_steps: list[str]
    bench: list[BenchItem]
    notes: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)  # settings that have no effect
    harness_base: str | None = None  # what the guests' harness image is built FROM, and why
    plan_hash: str = ""

    def compute_hash(self) -> str:
        """Stable hash of what apply would build (VMs and their settings), so a VM can be
        told apart as current or stale."""
        # A VM without an RDMA NIC hashes as it did before the field existed.
        body = json.dumps([vm.model_dump(mode="json", exclude=None if vm.rdma_nic else
                                         {"rdma_nic"}) for vm in self.vms], sort_keys=True)
        return hashlib.sha256(f"{self.scenario_id}\n{body}".encode()).hexdigest()[:16]

    def vm(self, name: str) -> PlannedVM:
        for vm in self.vms:
            if vm.name == name:
                return vm
        raise KeyError(name)
