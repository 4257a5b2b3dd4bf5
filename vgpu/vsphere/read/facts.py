"""Read what vCenter has now: hosts (version, GPUs, vGPU types, graphics mode per GPU,
passthrough per GPU, state) and VMs (hardware, vGPUs, extraConfig, guest IP), each kind in
one property-collector call. The host driver (VIB) needs one more call per host
(HostImageConfigManager.FetchSoftwarePackages): ``read_host_drivers`` makes it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from pyVmomi import vim, vmodl

from vgpu.vsphere.connect.connection import Session
from vgpu.vsphere.desired.vm import OWNER_KEY, OWNER_VALUE, SCENARIO_KEY

NVIDIA_VENDOR_ID = 0x10DE
VGPU_MODE_MIG = "multiInstanceGpu"  # HostGraphicsInfo.vgpuMode of a GPU in MIG mode
DISPLAY_CLASS_IDS = {0x0300, 0x0302}  # VGA controller, 3D controller

HOST_PATHS = [
    "name", "runtime.connectionState", "runtime.inMaintenanceMode", "config.product",
    "hardware.pciDevice", "config.sharedPassthruGpuTypes", "config.graphicsConfig",
    "config.graphicsInfo", "config.pciPassthruInfo", "configManager.imageConfigManager",
    "configManager.advancedOption", "configManager.graphicsManager",
    "configManager.serviceSystem", "hardware.systemInfo.uuid", "summary.rebootRequired",
    "runtime.bootTime", "hardware.memorySize", "hardware.cpuInfo",
]
NVIDIA_VIB_VENDORS = {"nvd", "nvidia"}
VM_PATHS = [
    "name", "config.template", "config.extraConfig", "config.hardware.numCPU",
    "config.hardware.memoryMB", "config.hardware.device", "config.firmware",
    "config.memoryReservationLockedToMax", "config.guestId", "config.tools.pendingCustomization",
    "runtime.host", "runtime.powerState", "guest.ipAddress", "config.version",
    "config.instanceUuid", "parent", "config.memoryAllocation.reservation",
    "config.managedBy",
]
# The ESX Agent Manager: the solution that owns vSphere Cluster Services (vCLS) VMs and
# the per-host agent VMs of NSX, vSAN file services or antivirus. Maintenance mode powers
# its VMs off or moves them by itself; they are no one's workload.
EAM_EXTENSION = "com.vmware.vim.eam"
VCLS_FOLDER = "vCLS"
VCLS_AGENT_TYPE = "cluster-agent"


@dataclass(frozen=True)
class GpuDevice:
    pci_id: str
    vendor_id: int
    device_id: int
    name: str


@dataclass(frozen=True)
class PciDevice:
    """Any PCI device of a host, with its passthrough and SR-IOV state."""

    pci_id: str
    vendor_id: int
    device_id: int
    name: str
    passthrough: str | None = None  # as HostFacts.passthrough_per_gpu
    sriov_enabled: bool | None = None  # None: the host reports no SR-IOV info for it
    virtual_functions: int = 0
    parent_bridge: str | None = None  # the PCIe bridge above it (hardware.pciDevice)


@dataclass(frozen=True)
class HeldVgpu:
    """A vGPU device another VM on the host has configured."""

    vm: str
    vgpu_type: str
    powered_on: bool


@dataclass(frozen=True)
class HostDriver:
    """The NVIDIA host driver VIB (the vGPU manager) installed on an ESXi host."""

    name: str
    version: str
    vendor: str

    @property
    def branch(self) -> int | None:
        """The driver's major branch: 535 for 535.161.05-1OEM.800.1.0.20613240."""
        return driver_branch(self.version)


def driver_branch(version: str | None) -> int | None:
    """The leading number of an NVIDIA driver version, or None when there is none."""
    match = re.match(r"\s*(\d+)\.", version or "")
    return int(match.group(1)) if match else None


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
    passthrough_per_gpu: dict[str, str] = field(default_factory=dict)  # pci id -> state
    # pci id -> HostGraphicsInfo.vgpuMode (ESXi 8.0 U3+: none, sameSize, mixedSize,
    # multiInstanceGpu); absent where the host does not report it
    vgpu_mode_per_gpu: dict[str, str] = field(default_factory=dict)
    held_vgpus: list[HeldVgpu] = field(default_factory=list)
    host_driver: HostDriver | None = None
    host_driver_note: str | None = None  # why host_driver is None, once it was read
    pci_devices: dict[str, PciDevice] = field(default_factory=dict)  # every one, by PCI id
    ref: Any = None
    image_manager: Any = None
    option_manager: Any = None  # the host's advanced options (configManager.advancedOption)
    graphics_manager: Any = None  # configManager.graphicsManager (UpdateGraphicsConfig)
    graphics_config: Any = None  # config.graphicsConfig as read
    # pci id -> the graphics type in effect (graphicsInfo[].graphicsType): a configured one
    # takes effect when Xorg restarts or the host boots
    graphics_active_per_gpu: dict[str, str] = field(default_factory=dict)
    service_system: Any = None  # configManager.serviceSystem (Xorg among its services)
    # pci id -> names of the powered-on VMs ESXi put on that GPU (graphicsInfo[].vm)
    vms_per_gpu: dict[str, tuple[str, ...]] = field(default_factory=dict)
    hardware_uuid: str | None = None  # hardware.systemInfo.uuid: the same machine over time
    # summary.rebootRequired: something installed (a VIB) runs only after the next boot
    reboot_required: bool | None = None
    boot_time: str | None = None  # runtime.bootTime, ISO 8601 UTC
    memory_bytes: int | None = None  # hardware.memorySize; None: not reported
    cpu_threads: int | None = None  # hardware.cpuInfo.numCpuThreads (logical CPUs)
    cpu_cores: int | None = None  # hardware.cpuInfo.numCpuCores

    @property
    def assignment_policy(self) -> str | None:
        """How ESXi picks a vGPU VM's GPU at power-on: performance (spread) or
        consolidation (fill a GPU first); None when the host does not say."""
        policy = getattr(self.graphics_config, "sharedPassthruAssignmentPolicy", None)
        return str(policy) if policy else None

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
    hardware_version: str | None = None  # vmx-NN
    rdma_devices: tuple[Any, ...] = ()  # RDMA NIC devices: non-NVIDIA passthrough, SR-IOV, PVRDMA
    rdma_nics: tuple[str, ...] = ()  # their summaries, as RdmaNicDevice.summary, sorted
    port_group: str | None = None  # the network of the first NIC (not an RDMA adapter)
    nic_device: Any = None  # that NIC
    instance_uuid: str | None = None  # config.instanceUuid
    folder: str | None = None  # the managed-object id of the folder it is in (parent)
    # Why the VM is not vgpu's although it may carry the owner mark (another lab's, a
    # copy, outside the lab's folder or cluster: vgpu.vsphere.read.ownership); None: the mark says
    disowned: str | None = None
    memory_reserved_mb: int = 0  # config.memoryAllocation.reservation
    # NVIDIA GPUs held through Dynamic DirectPath (VirtualPCIPassthroughDynamicBackingInfo):
    # the PCI ids ESXi assigned (assignedId, while powered on), sorted
    dynamic_passthrough_ids: tuple[str, ...] = ()
    dynamic_unassigned: int = 0  # such devices with no GPU assigned yet (powered off)
    # config.managedBy as "extensionKey/type" (com.vmware.vim.eam/cluster-agent for vCLS)
    managed_by: str | None = None
    folder_name: str | None = None  # the name of the folder it is in, where read

    @property
    def system_role(self) -> str | None:
        """What the VM is when vSphere itself runs it, else None: "vCLS" (vSphere Cluster
        Services, up to 3 per cluster since 7.0 U1) or "agent VM" (one per host, run by the
        ESX Agent Manager for NSX, vSAN file services, antivirus). Maintenance mode stops
        or moves such VMs by itself: they are never shut down by vgpu or counted as
        another team's workload."""
        extension, _, kind = (self.managed_by or "").partition("/")
        if self.folder_name == VCLS_FOLDER or (extension == EAM_EXTENSION
                                              and kind == VCLS_AGENT_TYPE):
            return "vCLS"
        if extension == EAM_EXTENSION:
            return "agent VM"
        return None

    @property
    def reserved_memory_mb(self) -> int:
        """The memory the VM holds on its host while powered on: all of it when its
        reservation is locked to its size (vGPU VMs), else its reservation."""
        return self.memory_mb if self.memory_reservation_locked else self.memory_reserved_mb

    @property
    def owned(self) -> bool:
        return self.disowned is None and self.extra_config.get(OWNER_KEY) == OWNER_VALUE

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
    """extraConfig as a dict; a key listed twice keeps its last value, as vSphere does, and
    a key whose value is empty is absent (setting an empty value removes a key)."""
    values = {opt.key: str(opt.value) for opt in options or []}
    return {k: v for k, v in values.items() if v != ""}


def _is_gpu_passthrough(device: Any) -> bool:
    vendor = (device.backing.vendorId or 0) & 0xFFFF
    return vendor in (0, NVIDIA_VENDOR_ID)


def _dynamic_gpu_devices(devices: list[Any]) -> list[Any]:
    """Dynamic DirectPath devices that allow an NVIDIA GPU (or name no vendor)."""
    return [d for d in devices if isinstance(d, vim.vm.device.VirtualPCIPassthrough)
            and isinstance(d.backing, vim.vm.device.VirtualPCIPassthrough.DynamicBackingInfo)
            and any((a.vendorId or 0) & 0xFFFF in (0, NVIDIA_VENDOR_ID)
                    for a in d.backing.allowedDevice or [])]


def rdma_summary(device: Any) -> str:
    """An RDMA NIC device as RdmaNicDevice.summary names it."""
    if isinstance(device, vim.vm.device.VirtualVmxnet3Vrdma):
        return "pvrdma"
    if isinstance(device, vim.vm.device.VirtualSriovEthernetCard):
        sriov = device.sriovBacking
        function = sriov.physicalFunctionBacking if sriov else None
        return f"sriov {function.id if function else '?'}"
    return f"passthrough {device.backing.id}"


def _rdma_devices(devices: list[Any]) -> tuple[Any, ...]:
    return tuple(
        d for d in devices
        if isinstance(d, vim.vm.device.VirtualVmxnet3Vrdma | vim.vm.device.VirtualSriovEthernetCard)
        or (isinstance(d, vim.vm.device.VirtualPCIPassthrough)
            and isinstance(d.backing, vim.vm.device.VirtualPCIPassthrough.DeviceBackingInfo)
            and not _is_gpu_passthrough(d)))


def first_nic(devices: list[Any]) -> Any:
    """The VM's first network adapter that is not an RDMA adapter (SR-IOV, PVRDMA)."""
    return next((d for d in devices if isinstance(d, vim.vm.device.VirtualEthernetCard)
                 and not isinstance(d, vim.vm.device.VirtualSriovEthernetCard
                                    | vim.vm.device.VirtualVmxnet3Vrdma)), None)


def nic_network(nic: Any, networks: dict[str, str]) -> str | None:
    """The name of the network a NIC is on: a standard port group, a distributed port group
    (by its key, which vCenter also uses as its managed-object id) or an NSX network."""
    backing = nic.backing if nic is not None else None
    if isinstance(backing, vim.vm.device.VirtualEthernetCard.NetworkBackingInfo):
        ref = backing.network
        return networks.get(ref._moId, backing.deviceName) if ref is not None \
            else backing.deviceName
    if isinstance(backing, vim.vm.device.VirtualEthernetCard.DistributedVirtualPortBackingInfo):
        key = backing.port.portgroupKey if backing.port else None
        return networks.get(key or "", key)
    if isinstance(backing, vim.vm.device.VirtualEthernetCard.OpaqueNetworkBackingInfo):
        return backing.opaqueNetworkId
    return None


def _vm_from_props(ref: Any, props: dict[str, Any], host_names: dict[str, str],
                   networks: dict[str, str] | None = None,
                   folders: dict[str, str] | None = None) -> VmActual:
    devices = props.get("config.hardware.device") or []
    nic = first_nic(devices)
    vgpu_devices = tuple(
        d for d in devices
        if isinstance(d, vim.vm.device.VirtualPCIPassthrough)
        and isinstance(d.backing, vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo)
    )
    passthrough_devices = tuple(
        d for d in devices
        if isinstance(d, vim.vm.device.VirtualPCIPassthrough)
        and isinstance(d.backing, vim.vm.device.VirtualPCIPassthrough.DeviceBackingInfo)
        and _is_gpu_passthrough(d)
    )
    rdma_devices = _rdma_devices(devices)
    dynamic = _dynamic_gpu_devices(devices)
    host = props.get("runtime.host")
    managed = props.get("config.managedBy")
    parent = props.get("parent")
    return VmActual(
        name=props.get("name", ref._moId),
        ref=ref,
        host=host_names.get(host._moId) if host is not None else None,
        powered_on=props.get("runtime.powerState") == "poweredOn",
        num_cpus=int(props.get("config.hardware.numCPU") or 0),
        memory_mb=int(props.get("config.hardware.memoryMB") or 0),
        firmware=props.get("config.firmware") or "bios",
        hardware_version=props.get("config.version"),
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
        rdma_devices=rdma_devices,
        rdma_nics=tuple(sorted(rdma_summary(d) for d in rdma_devices)),
        port_group=nic_network(nic, networks or {}),
        nic_device=nic,
        instance_uuid=props.get("config.instanceUuid") or None,
        folder=parent._moId if parent is not None else None,
        folder_name=(folders or {}).get(parent._moId) if parent is not None else None,
        managed_by=f"{managed.extensionKey}/{managed.type or ''}" if managed else None,
        memory_reserved_mb=int(props.get("config.memoryAllocation.reservation") or 0),
        dynamic_passthrough_ids=tuple(sorted(d.backing.assignedId for d in dynamic
                                             if d.backing.assignedId)),
        dynamic_unassigned=sum(not d.backing.assignedId for d in dynamic),
    )


def host_names(session: Session, root: Any) -> dict[str, str]:
    """Host managed-object id -> host name."""
    return {obj._moId: props["name"]
            for obj, props in session.collect(root, vim.HostSystem, ["name"]) if "name" in props}


def network_names(session: Session, datacenter: Any) -> dict[str, str]:
    """Network managed-object id -> name (standard, distributed and NSX port groups)."""
    return {obj._moId: props["name"] for obj, props
            in session.collect(datacenter.networkFolder, vim.Network, ["name"])
            if "name" in props}


def read_vm_list(session: Session, datacenter: Any) -> list[VmActual]:
    """Every VM and template in the datacenter (names repeat across folders)."""
    names = host_names(session, datacenter.hostFolder)
    networks = network_names(session, datacenter)
    folders = folder_names(session, datacenter)
    return [_vm_from_props(ref, props, names, networks, folders)
            for ref, props in session.collect(datacenter.vmFolder, vim.VirtualMachine, VM_PATHS)]


def folder_names(session: Session, datacenter: Any) -> dict[str, str]:
    """VM folder managed-object id -> name (the ``vCLS`` folder among them)."""
    return {obj._moId: props["name"] for obj, props
            in session.collect(datacenter.vmFolder, vim.Folder, ["name"]) if "name" in props}


def read_vms(session: Session, datacenter: Any) -> dict[str, VmActual]:
    """Every VM and template in the datacenter, by name."""
    return {vm.name: vm for vm in read_vm_list(session, datacenter)}


def _graphics_per_gpu(props: dict[str, Any]) -> dict[str, str]:
    """PCI id -> graphics type: the configured one (graphicsConfig.deviceType) where set,
    else the active one (graphicsInfo)."""
    out = {g.pciId: g.graphicsType for g in props.get("config.graphicsInfo") or []}
    graphics = props.get("config.graphicsConfig")
    for device in (graphics.deviceType if graphics else None) or []:
        out[device.deviceId] = device.graphicsType
    return out


def _vms_per_gpu(props: dict[str, Any], vms: dict[str, VmActual]) -> dict[str, tuple[str, ...]]:
    """PCI id -> the VMs ESXi lists on that GPU (powered-on vGPU VMs), by name."""
    names = {vm.ref._moId: vm.name for vm in vms.values() if vm.ref is not None}
    return {g.pciId: tuple(names.get(ref._moId, ref._moId) for ref in g.vm or [])
            for g in props.get("config.graphicsInfo") or []}


def vgpu_modes(graphics_info: list[Any] | None) -> dict[str, str]:
    """PCI id -> the GPU's vGPU mode (none, sameSize, mixedSize or multiInstanceGpu), for
    the GPUs whose graphics info has one: ESXi 8.0 U3 and later report it per GPU."""
    return {g.pciId: str(g.vgpuMode) for g in graphics_info or []
            if getattr(g, "vgpuMode", None)}


def _passthrough_state(info: Any) -> str:
    if info.passthruActive:
        return "active"
    if info.passthruEnabled:
        return "enabled, reboot pending"
    return "capable, off" if info.passthruCapable else "not capable"


def _passthrough_per_gpu(props: dict[str, Any], gpus: list[GpuDevice]) -> dict[str, str]:
    wanted = {g.pci_id for g in gpus}
    return {info.id: _passthrough_state(info)
            for info in props.get("config.pciPassthruInfo") or [] if info.id in wanted}


def _pci_devices(props: dict[str, Any]) -> dict[str, PciDevice]:
    """Every PCI device of the host with its passthrough and SR-IOV state."""
    infos = {info.id: info for info in props.get("config.pciPassthruInfo") or []}
    out: dict[str, PciDevice] = {}
    for d in props.get("hardware.pciDevice") or []:
        info = infos.get(d.id)
        sriov = info if isinstance(info, vim.host.SriovInfo) else None
        out[d.id] = PciDevice(
            pci_id=d.id, vendor_id=d.vendorId & 0xFFFF, device_id=d.deviceId & 0xFFFF,
            name=d.deviceName or "", passthrough=_passthrough_state(info) if info else None,
            sriov_enabled=bool(sriov.sriovEnabled) if sriov else None,
            virtual_functions=int(sriov.numVirtualFunction or 0) if sriov else 0,
            parent_bridge=getattr(d, "parentBridge", None) or None)
    return out


def _host_from_props(ref: Any, props: dict[str, Any], vms: dict[str, VmActual]) -> HostFacts:
    product = props.get("config.product")
    graphics = props.get("config.graphicsConfig")
    name = props["name"]
    gpus = _gpus(props.get("hardware.pciDevice") or [])
    cpu_info = props.get("hardware.cpuInfo")
    return HostFacts(
        name=name,
        connection_state=str(props.get("runtime.connectionState") or "unknown"),
        in_maintenance=bool(props.get("runtime.inMaintenanceMode")),
        version=product.version if product else None,
        build=product.build if product else None,
        full_name=product.fullName if product else None,
        gpus=gpus,
        vgpu_types=list(props.get("config.sharedPassthruGpuTypes") or []),
        graphics_default_type=graphics.hostDefaultGraphicsType if graphics else None,
        graphics_per_gpu=_graphics_per_gpu(props),
        passthrough_per_gpu=_passthrough_per_gpu(props, gpus),
        vgpu_mode_per_gpu=vgpu_modes(props.get("config.graphicsInfo")),
        held_vgpus=[
            HeldVgpu(vm=vm.name, vgpu_type=t, powered_on=vm.powered_on)
            for vm in vms.values() if vm.host == name for t in vm.vgpus
        ],
        pci_devices=_pci_devices(props),
        ref=ref,
        image_manager=props.get("configManager.imageConfigManager"),
        option_manager=props.get("configManager.advancedOption"),
        graphics_manager=props.get("configManager.graphicsManager"),
        graphics_config=graphics,
        graphics_active_per_gpu={g.pciId: str(g.graphicsType)
                                 for g in props.get("config.graphicsInfo") or []
                                 if g.graphicsType},
        service_system=props.get("configManager.serviceSystem"),
        vms_per_gpu=_vms_per_gpu(props, vms),
        hardware_uuid=props.get("hardware.systemInfo.uuid") or None,
        reboot_required=_optional_bool(props.get("summary.rebootRequired")),
        boot_time=iso_utc(props.get("runtime.bootTime")),
        memory_bytes=_optional_int(props.get("hardware.memorySize")),
        cpu_threads=_optional_int(getattr(cpu_info, "numCpuThreads", None)),
        cpu_cores=_optional_int(getattr(cpu_info, "numCpuCores", None)),
    )


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _optional_bool(value: Any) -> bool | None:
    return None if value is None else bool(value)


def iso_utc(moment: Any) -> str | None:
    """A datetime vCenter returned, as ISO 8601 UTC to the second ("2026-11-26T08:00:00Z")."""
    if moment is None:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return str(moment.strftime("%Y-%m-%dT%H:%M:%SZ"))


def read_hosts(session: Session, root: Any, vms: dict[str, VmActual]) -> dict[str, HostFacts]:
    """Facts for every host under ``root`` (a cluster or a datacenter's host folder)."""
    hosts: dict[str, HostFacts] = {}
    for ref, props in session.collect(root, vim.HostSystem, HOST_PATHS):
        facts = _host_from_props(ref, props, vms)
        hosts[facts.name] = facts
    return hosts


def nvidia_driver(packages: list[Any]) -> HostDriver | None:
    """The NVIDIA host driver among a host's software packages (VIBs), or None."""
    for package in packages:
        vendor = str(package.vendor or "")
        name = str(package.name or "")
        if vendor.lower() in NVIDIA_VIB_VENDORS and "driver" in name.lower():
            return HostDriver(name=name, version=str(package.version or ""), vendor=vendor)
    return None


def read_host_driver(facts: HostFacts) -> None:
    """Fill ``facts.host_driver`` from the host's installed VIBs, or say in
    ``host_driver_note`` why it could not be read."""
    if facts.connection_state != "connected":
        facts.host_driver_note = f"not read: the host is {facts.connection_state}"
        return
    if facts.image_manager is None:
        facts.host_driver_note = "not read: the host has no image config manager"
        return
    try:
        packages = facts.image_manager.FetchSoftwarePackages() or []
    except vmodl.MethodFault as exc:
        kind = type(exc).__name__.rsplit(".", 1)[-1]
        facts.host_driver_note = (f"not read: FetchSoftwarePackages is unsupported here "
                                  f"({kind}: {exc.msg or 'no message'})")
        return
    facts.host_driver = nvidia_driver(packages)
    if facts.host_driver is None:
        facts.host_driver_note = (f"no NVIDIA driver VIB among the host's {len(packages)} "
                                  "software packages")


def read_host_drivers(hosts: dict[str, HostFacts]) -> None:
    """One FetchSoftwarePackages call per host (apply does not need it; preflight does)."""
    for facts in hosts.values():
        read_host_driver(facts)
