"""The reconfigure spec apply sends: only what differs, vGPU devices added and removed by
type (pure: pyVmomi data objects, no server)."""

from __future__ import annotations

from dataclasses import replace

from pyVmomi import vim

from vgpu.vsphere.desired.vm import GuestNetwork, OwnerMarks, VmDesired
from vgpu.vsphere.plan.specs import customization_spec, guest_hostname, reconfigure_spec
from vgpu.vsphere.read.facts import VmActual

ADD = vim.vm.device.VirtualDeviceSpec.Operation.add
REMOVE = vim.vm.device.VirtualDeviceSpec.Operation.remove


def vgpu_device(key: int, vgpu_type: str) -> vim.vm.device.VirtualPCIPassthrough:
    return vim.vm.device.VirtualPCIPassthrough(
        key=key, backing=vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo(vgpu=vgpu_type))


WANT = VmDesired(name="vm-1", host="h0", num_cpus=8, memory_mb=16384,
                 owner=OwnerMarks("8", "h"), vgpus=("grid_a100d-1-10c", "grid_a100d-2-20c"),
                 extra_config={"pciPassthru.use64bitMMIO": "TRUE"})


def actual(devices: tuple[vim.vm.device.VirtualPCIPassthrough, ...]) -> VmActual:
    return VmActual(
        name="vm-1", ref=None, host="h0", powered_on=False, num_cpus=8, memory_mb=16384,
        firmware="efi", memory_reservation_locked=True, guest_id=None, is_template=False,
        extra_config={**WANT.all_extra_config()},
        vgpus=tuple(sorted(d.backing.vgpu for d in devices)), vgpu_devices=devices,
        passthrough_ids=(), passthrough_devices=(), ip=None, pending_customization=False)


def test_a_fresh_clone_gets_every_setting() -> None:
    spec = reconfigure_spec(WANT, None)
    assert (spec.numCPUs, spec.memoryMB, spec.firmware) == (8, 16384, "efi")
    assert spec.memoryReservationLockedToMax is True
    assert {o.key: o.value for o in spec.extraConfig} == WANT.all_extra_config()
    added = [(c.operation, c.device.backing.vgpu) for c in spec.deviceChange]
    assert added == [(ADD, "grid_a100d-1-10c"), (ADD, "grid_a100d-2-20c")]
    assert len({c.device.key for c in spec.deviceChange}) == 2
    assert all(c.device.key < 0 for c in spec.deviceChange)


def test_only_the_vgpu_difference_is_sent() -> None:
    keep = vgpu_device(13000, "grid_a100d-1-10c")
    drop = vgpu_device(13001, "grid_a100d-7-80c")
    spec = reconfigure_spec(WANT, actual((keep, drop)))
    assert spec.numCPUs is None and spec.memoryMB is None and not spec.extraConfig
    changes = [(c.operation, c.device.backing.vgpu, c.device.key) for c in spec.deviceChange]
    assert changes[0] == (REMOVE, "grid_a100d-7-80c", 13001)
    assert [(op, t) for op, t, _ in changes[1:]] == [(ADD, "grid_a100d-2-20c")]


def test_nothing_differs_means_no_spec() -> None:
    devices = (vgpu_device(1, "grid_a100d-2-20c"), vgpu_device(2, "grid_a100d-1-10c"))
    assert reconfigure_spec(WANT, actual(devices)) is None
    assert reconfigure_spec(replace(WANT, vgpus=()), actual(devices)).deviceChange[1] \
        .operation == REMOVE


def test_customization_sets_the_fixed_ip_and_a_valid_host_name() -> None:
    spec = customization_spec("s8_1g.1", GuestNetwork(ip="10.0.0.5", netmask="255.255.255.0",
                                                      gateway="10.0.0.1", dns=("10.0.0.2",)))
    adapter = spec.nicSettingMap[0].adapter
    assert (adapter.ip.ipAddress, adapter.subnetMask, list(adapter.gateway)) == (
        "10.0.0.5", "255.255.255.0", ["10.0.0.1"])
    assert spec.identity.hostName.name == "s8-1g-1" == guest_hostname("s8_1g.1")
