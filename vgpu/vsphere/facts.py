"""Read what vCenter has now: hosts (version, GPUs, vGPU types, graphics mode, state) and
VMs (hardware, vGPUs, extraConfig, guest IP), each kind in one property-collector call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyVmomi import vim

from vgpu.vsphere.connection import Session
from vgpu.vsphere.desired import OWNER_KEY, OWNER_VALUE, SCENARIO_KEY

NVIDIA_VENDOR_ID = 0x10DE
DISPLAY_CLASS_IDS = {0x0300, 0x0302}  # VGA controller, 3D controller

HOST_PATHS = [
    "name", "runtime.connectionState", "runtime.inMaintenanceMode", "config.product",
    "hardware.pciDevice", "config.sharedPassthruGpuTypes", "config.graphicsConfig",
    "config.graphicsInfo",
]
VM_PATHS = [
    "name", "config.template", "config.extraConfig", "config.hardware.numCPU",
    "config.hardware.memoryMB", "config.hardware.device", "config.firmware",
    "config.memoryReservationLockedToMax", "config.guestId", "config.tools.pendingCustomization",
    "runtime.host", "runtime.powerState", "guest.ipAddress",
]


@dataclass(frozen=True)
class GpuDevice:
    pci_id: str
    vendor_id: int
    device_id: int
    name: str


@dataclass(frozen=True)
class HeldVgpu:
    """A vGPU device another VM on the host has configured."""

    vm: str
    vgpu_type: str
    powered_on: bool


@dataclass
class HostFacts:
    name: str
    connection_state: str
    in_maintenance: bool
    version: str | None
    build: str | None
    full_name: str | None
    gpus: list[GpuDevice]
    vgpu_types: list[str]
    graphics_default_type: str | None
    graphics_per_gpu: dict[str, str] = field(default_factory=dict)  # pci id -> graphics type
    held_vgpus: list[HeldVgpu] = field(default_factory=list)
    ref: Any = None

    @property
    def usable(self) -> bool:
        return self.connection_state == "connected" and not self.in_maintenance

    def state_problem(self) -> str | None:
        """Why no VM work can be done on this host now, or None."""
        if self.connection_state != "connected":
            return (f"host {self.name} is {self.connection_state}; reconnect it in vCenter "
                    "and run again")
        if self.in_maintenance:
            return (f"host {self.name} is in maintenance mode; exit maintenance mode "
                    "and run again")
        return None


@dataclass
class VmActual:
    name: str
    ref: Any
    host: str | None
    powered_on: bool
    num_cpus: int
    memory_mb: int
    firmware: str
    memory_reservation_locked: bool
    guest_id: str | None
    is_template: bool
    extra_config: dict[str, str]
    vgpus: tuple[str, ...]
    vgpu_devices: tuple[Any, ...]
    passthrough_ids: tuple[str, ...]
    passthrough_devices: tuple[Any, ...]
    ip: str | None
    pending_customization: bool

    @property
    def owned(self) -> bool:
        return self.extra_config.get(OWNER_KEY) == OWNER_VALUE

    @property
    def scenario(self) -> str | None:
        return self.extra_config.get(SCENARIO_KEY)


def _gpus(pci_devices: list[Any]) -> list[GpuDevice]:
    return [
        GpuDevice(pci_id=d.id, vendor_id=d.vendorId & 0xFFFF, device_id=d.deviceId & 0xFFFF,
                  name=d.deviceName or "")
        for d in pci_devices or []
        if (d.vendorId & 0xFFFF) == NVIDIA_VENDOR_ID and (d.classId & 0xFFFF) in DISPLAY_CLASS_IDS
    ]


def extra_config_dict(options: list[Any] | None) -> dict[str, str]:
    """extraConfig as a dict; a key listed twice keeps its last value, as vSphere does."""
    return {opt.key: str(opt.value) for opt in options or []}


def _vm_from_props(ref: Any, props: dict[str, Any], host_names: dict[str, str]) -> VmActual:
    devices = props.get("config.hardware.device") or []
    vgpu_devices = tuple(
        d for d in devices
        if isinstance(d, vim.vm.device.VirtualPCIPassthrough)
        and isinstance(d.backing, vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo)
    )
    passthrough_devices = tuple(
        d for d in devices
        if isinstance(d, vim.vm.device.VirtualPCIPassthrough)
        and isinstance(d.backing, vim.vm.device.VirtualPCIPassthrough.DeviceBackingInfo)
    )
    host = props.get("runtime.host")
    return VmActual(
        name=props.get("name", ref._moId),
        ref=ref,
        host=host_names.get(host._moId) if host is not None else None,
        powered_on=props.get("runtime.powerState") == "poweredOn",
        num_cpus=int(props.get("config.hardware.numCPU") or 0),
        memory_mb=int(props.get("config.hardware.memoryMB") or 0),
        firmware=props.get("config.firmware") or "bios",
        memory_reservation_locked=bool(props.get("config.memoryReservationLockedToMax")),
        guest_id=props.get("config.guestId"),
        is_template=bool(props.get("config.template")),
        extra_config=extra_config_dict(props.get("config.extraConfig")),
        vgpus=tuple(sorted(d.backing.vgpu for d in vgpu_devices)),
        vgpu_devices=vgpu_devices,
        passthrough_ids=tuple(sorted(d.backing.id for d in passthrough_devices)),
        passthrough_devices=passthrough_devices,
        ip=props.get("guest.ipAddress") or None,
        pending_customization=bool(props.get("config.tools.pendingCustomization")),
    )


def host_names(session: Session, root: Any) -> dict[str, str]:
    """Host managed-object id -> host name."""
    return {obj._moId: props["name"]
            for obj, props in session.collect(root, vim.HostSystem, ["name"]) if "name" in props}


def read_vms(session: Session, datacenter: Any) -> dict[str, VmActual]:
    """Every VM and template in the datacenter, by name."""
    names = host_names(session, datacenter.hostFolder)
    vms: dict[str, VmActual] = {}
    for ref, props in session.collect(datacenter.vmFolder, vim.VirtualMachine, VM_PATHS):
        vm = _vm_from_props(ref, props, names)
        vms[vm.name] = vm
    return vms


def read_hosts(session: Session, root: Any, vms: dict[str, VmActual]) -> dict[str, HostFacts]:
    """Facts for every host under ``root`` (a cluster or a datacenter's host folder)."""
    hosts: dict[str, HostFacts] = {}
    for ref, props in session.collect(root, vim.HostSystem, HOST_PATHS):
        product = props.get("config.product")
        graphics = props.get("config.graphicsConfig")
        name = props["name"]
        hosts[name] = HostFacts(
            name=name,
            connection_state=str(props.get("runtime.connectionState") or "unknown"),
            in_maintenance=bool(props.get("runtime.inMaintenanceMode")),
            version=product.version if product else None,
            build=product.build if product else None,
            full_name=product.fullName if product else None,
            gpus=_gpus(props.get("hardware.pciDevice") or []),
            vgpu_types=list(props.get("config.sharedPassthruGpuTypes") or []),
            graphics_default_type=graphics.hostDefaultGraphicsType if graphics else None,
            graphics_per_gpu={g.pciId: g.graphicsType
                              for g in props.get("config.graphicsInfo") or []},
            held_vgpus=[
                HeldVgpu(vm=vm.name, vgpu_type=t, powered_on=vm.powered_on)
                for vm in vms.values() if vm.host == name for t in vm.vgpus
            ],
            ref=ref,
        )
    return hosts
