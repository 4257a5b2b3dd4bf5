"""Build the pyvmomi specs apply sends: clone, reconfigure and guest customization."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from pyVmomi import vim

from vgpu.vsphere.desired.vm import GuestNetwork, PassthroughDevice, RdmaNicDevice, VmDesired
from vgpu.vsphere.plan.managed import extra_config_update
from vgpu.vsphere.read.facts import VmActual, rdma_summary

# Temporary negative keys tell vSphere "new device"; it assigns the real ones.
NEW_DEVICE_KEY_BASE = -1000


def option_values(settings: dict[str, str]) -> list[Any]:
    return [vim.option.OptionValue(key=k, value=v) for k, v in sorted(settings.items())]


def nic_backing(network: Any) -> Any:
    """A NIC's backing for a network object: a distributed port group takes a port
    connection on its switch, an NSX network its id, a standard port group its name."""
    if isinstance(network, vim.dvs.DistributedVirtualPortgroup):
        return vim.vm.device.VirtualEthernetCard.DistributedVirtualPortBackingInfo(
            port=vim.dvs.PortConnection(
                portgroupKey=network.key,
                switchUuid=network.config.distributedVirtualSwitch.uuid))
    if isinstance(network, vim.OpaqueNetwork):
        return vim.vm.device.VirtualEthernetCard.OpaqueNetworkBackingInfo(
            opaqueNetworkId=network.summary.opaqueNetworkId,
            opaqueNetworkType=network.summary.opaqueNetworkType)
    return vim.vm.device.VirtualEthernetCard.NetworkBackingInfo(
        deviceName=network.name, network=network)


def nic_change(nic: Any, backing: Any) -> Any:
    """Put the VM's first NIC (``nic``, as read from the VM or its template) on ``backing``;
    add a VMXNET3 adapter there when the VM has none."""
    if nic is None:
        return vim.vm.device.VirtualDeviceSpec(
            operation=vim.vm.device.VirtualDeviceSpec.Operation.add,
            device=vim.vm.device.VirtualVmxnet3(
                key=NEW_DEVICE_KEY_BASE - 300, backing=backing,
                connectable=vim.vm.device.VirtualDevice.ConnectInfo(
                    startConnected=True, allowGuestControl=True)))
    nic.backing = backing
    return vim.vm.device.VirtualDeviceSpec(
        operation=vim.vm.device.VirtualDeviceSpec.Operation.edit, device=nic)


def clone_nic_change(template_nic: Any, backing: Any) -> Any:
    """nic_change for a clone spec: the template's NIC without its MAC address (unless the
    template fixes it by hand), so each clone gets a MAC of its own."""
    if template_nic is not None and str(template_nic.addressType or "").lower() != "manual":
        template_nic.macAddress = None
    return nic_change(template_nic, backing)


def clone_spec(want: VmDesired, pool: Any, datastore: Any, host: Any,
               nic: Any | None = None) -> Any:
    """Clone powered off onto the planned host, carrying the owner marks from the start so a
    VM whose later steps fail is still recognised (and finished) by the next run. ``nic``:
    the device change that puts the first NIC on the planned network (nic_change)."""
    return vim.vm.CloneSpec(
        location=vim.vm.RelocateSpec(pool=pool, datastore=datastore, host=host),
        powerOn=False,
        template=False,
        config=vim.vm.ConfigSpec(extraConfig=option_values(want.owner.as_extra_config()),
                                 deviceChange=[nic] if nic is not None else []),
    )


def _vgpu_device_changes(want: VmDesired, have: VmActual | None) -> list[Any]:
    changes: list[Any] = []
    missing = Counter(want.vgpus)
    for device in have.vgpu_devices if have else ():
        if missing[device.backing.vgpu] > 0:
            missing[device.backing.vgpu] -= 1
        else:
            changes.append(vim.vm.device.VirtualDeviceSpec(
                operation=vim.vm.device.VirtualDeviceSpec.Operation.remove, device=device))
    for vgpu_type in sorted(missing.elements()):
        backing = vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo(vgpu=vgpu_type)
        changes.append(vim.vm.device.VirtualDeviceSpec(
            operation=vim.vm.device.VirtualDeviceSpec.Operation.add,
            device=vim.vm.device.VirtualPCIPassthrough(
                key=NEW_DEVICE_KEY_BASE - len(changes), backing=backing)))
    return changes


def _passthrough_backing(device: PassthroughDevice | RdmaNicDevice, system_id: str) -> Any:
    # deviceId is the hex string vSphere lists in QueryConfigTarget().pciPassthrough.
    return vim.vm.device.VirtualPCIPassthrough.DeviceBackingInfo(
        id=device.pci_id, deviceId=format(device.device_id, "x"), systemId=system_id,
        vendorId=device.vendor_id, deviceName="")


def _passthrough_changes(want: VmDesired, have: VmActual | None,
                         system_ids: dict[str, str]) -> list[Any]:
    wanted = {d.pci_id: d for d in want.passthrough}
    changes: list[Any] = []
    present: set[str] = set()
    for device in have.passthrough_devices if have else ():
        if device.backing.id in wanted:
            present.add(device.backing.id)
        else:
            changes.append(vim.vm.device.VirtualDeviceSpec(
                operation=vim.vm.device.VirtualDeviceSpec.Operation.remove, device=device))
    for pci_id in sorted(set(wanted) - present):
        changes.append(vim.vm.device.VirtualDeviceSpec(
            operation=vim.vm.device.VirtualDeviceSpec.Operation.add,
            device=vim.vm.device.VirtualPCIPassthrough(
                key=NEW_DEVICE_KEY_BASE - 100 - len(changes),
                backing=_passthrough_backing(wanted[pci_id], system_ids.get(pci_id, "")))))
    return changes


def _network_backing(nic: RdmaNicDevice) -> Any:
    return vim.vm.device.VirtualEthernetCard.NetworkBackingInfo(deviceName=nic.network or "")


def rdma_nic_device(nic: RdmaNicDevice, system_id: str, key: int) -> Any:
    """The VM device for the RDMA NIC: DirectPath I/O of the whole NIC, an SR-IOV virtual
    function of it, or a PVRDMA adapter (RoCE v2)."""
    if nic.kind == "passthrough":
        return vim.vm.device.VirtualPCIPassthrough(
            key=key, backing=_passthrough_backing(nic, system_id))
    if nic.kind == "sriov":
        return vim.vm.device.VirtualSriovEthernetCard(
            key=key, backing=_network_backing(nic), allowGuestOSMtuChange=True,
            sriovBacking=vim.vm.device.VirtualSriovEthernetCard.SriovBackingInfo(
                physicalFunctionBacking=_passthrough_backing(nic, system_id)))
    return vim.vm.device.VirtualVmxnet3Vrdma(key=key, backing=_network_backing(nic),
                                             deviceProtocol="rocev2")


def _rdma_changes(want: VmDesired, have: VmActual | None,
                  system_ids: dict[str, str]) -> list[Any]:
    """Keep the VM's RDMA NIC device when it is the wanted one; remove any other."""
    wanted = want.rdma_nic.summary if want.rdma_nic else None
    changes: list[Any] = []
    kept = False
    for device in have.rdma_devices if have else ():
        if not kept and rdma_summary(device) == wanted:
            kept = True
        else:
            changes.append(vim.vm.device.VirtualDeviceSpec(
                operation=vim.vm.device.VirtualDeviceSpec.Operation.remove, device=device))
    if want.rdma_nic is not None and not kept:
        nic = want.rdma_nic
        changes.append(vim.vm.device.VirtualDeviceSpec(
            operation=vim.vm.device.VirtualDeviceSpec.Operation.add,
            device=rdma_nic_device(nic, system_ids.get(nic.pci_id, ""),
                                   NEW_DEVICE_KEY_BASE - 200 - len(changes))))
    return changes


def _network_changes(want: VmDesired, have: VmActual | None, backing: Any | None) -> list[Any]:
    """The first NIC moved to the planned network (a fresh clone got it in the clone)."""
    if have is None or backing is None or want.port_group in (None, have.port_group):
        return []
    return [nic_change(have.nic_device, backing)]


def pci_device_changes(want: VmDesired, have: VmActual | None,
                       system_ids: dict[str, str] | None = None) -> list[Any]:
    """The vGPU, GPU passthrough and RDMA NIC devices to remove and add, in the order the
    reconfigure sends them."""
    ids = system_ids or {}
    return (_vgpu_device_changes(want, have) + _passthrough_changes(want, have, ids)
            + _rdma_changes(want, have, ids))


def reconfigure_spec(want: VmDesired, have: VmActual | None,
                     system_ids: dict[str, str] | None = None,
                     network_backing: Any | None = None) -> Any | None:
    """Only what differs from ``have`` (everything for a fresh clone, ``have=None``);
    None when nothing differs. ``system_ids`` maps passthrough PCI addresses (GPUs and the
    RDMA NIC) to the host system id their backing needs; ``network_backing`` is the planned
    network's NIC backing (nic_backing)."""
    spec = vim.vm.ConfigSpec()
    changed = False
    if have is None or have.num_cpus != want.num_cpus:
        spec.numCPUs, changed = want.num_cpus, True
    if have is None or have.memory_mb != want.memory_mb:
        spec.memoryMB, changed = want.memory_mb, True
    if have is None:
        # A clone of an EFI template is EFI already (refused otherwise); an existing VM's
        # firmware is never switched: its guest would not boot.
        spec.firmware, changed = want.firmware, True
    if have is None or have.memory_reservation_locked != want.memory_reservation_locked:
        spec.memoryReservationLockedToMax, changed = want.memory_reservation_locked, True
    if want.guest_id is not None and (have is None or have.guest_id != want.guest_id):
        spec.guestId, changed = want.guest_id, True
    pci = pci_device_changes(want, have, system_ids)
    extra = extra_config_update(want, have, pci)
    if extra:
        spec.extraConfig, changed = option_values(extra), True
    devices = pci + _network_changes(want, have, network_backing)
    if devices:
        spec.deviceChange, changed = devices, True
    return spec if changed else None


def guest_hostname(vm_name: str) -> str:
    """A valid DNS label from a VM name."""
    label = re.sub(r"[^A-Za-z0-9-]", "-", vm_name).strip("-")[:63]
    return label or "vgpu-vm"


def customization_spec(vm_name: str, network: GuestNetwork, dhcp_adapters: int = 0) -> Any:
    """The static address for the VM's first NIC; ``dhcp_adapters`` further NICs (an SR-IOV
    or PVRDMA RDMA adapter) take DHCP: vCenter wants one setting per NIC."""
    adapter = vim.vm.customization.IPSettings(
        ip=vim.vm.customization.FixedIp(ipAddress=network.ip),
        subnetMask=network.netmask,
        gateway=[network.gateway] if network.gateway else [],
        dnsServerList=list(network.dns),
        dnsDomain=network.domain,
    )
    return vim.vm.customization.Specification(
        identity=vim.vm.customization.LinuxPrep(
            hostName=vim.vm.customization.FixedName(name=guest_hostname(vm_name)),
            domain=network.domain,
        ),
        globalIPSettings=vim.vm.customization.GlobalIPSettings(
            dnsServerList=list(network.dns), dnsSuffixList=[network.domain]),
        nicSettingMap=[vim.vm.customization.AdapterMapping(adapter=adapter)] + [
            vim.vm.customization.AdapterMapping(adapter=vim.vm.customization.IPSettings(
                ip=vim.vm.customization.DhcpIpGenerator()))
            for _ in range(dhcp_adapters)],
    )
