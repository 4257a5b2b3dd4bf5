"""What leaves the scenario leaves the VM: the settings vgpu set earlier (listed in the
``vgpu.managed_keys`` mark) and no longer wants are cleared, and pciPassthru<N> keys are
numbered by the VM's own PCI passthrough devices."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pyVmomi import vim

from tests.labs.vcsim import VcsimLab, lab_available
from tests.vsphere.applying import MIG_KEYS, apply, desired_vms, state_of
from vgpu.vsphere.desired.vm import OwnerMarks, RdmaNicDevice, VmDesired
from vgpu.vsphere.plan.diff import Step, plan_vm
from vgpu.vsphere.plan.specs import reconfigure_spec
from vgpu.vsphere.read.facts import VmActual

MARKS = OwnerMarks("8", "h")
P2P = {"pciPassthru.allowP2P": "TRUE", "pciPassthru.RelaxACSforP2P": "TRUE"}
BASE = {"pciPassthru.use64bitMMIO": "TRUE", "pciPassthru.64bitMMIOSizeGB": "64"}


def vgpu_device(key: int, vgpu_type: str) -> vim.vm.device.VirtualPCIPassthrough:
    return vim.vm.device.VirtualPCIPassthrough(
        key=key, backing=vim.vm.device.VirtualPCIPassthrough.VmiopBackingInfo(vgpu=vgpu_type))


def nic_device(key: int) -> vim.vm.device.VirtualPCIPassthrough:
    return vim.vm.device.VirtualPCIPassthrough(
        key=key, backing=vim.vm.device.VirtualPCIPassthrough.DeviceBackingInfo(
            id="0000:3b:00.0", vendorId=0x15B3, deviceId="1017", systemId="s"))


def want(extra: dict[str, str], vgpus: tuple[str, ...] = ("grid_a100d-1-10c",),
         rdma: RdmaNicDevice | None = None) -> VmDesired:
    return VmDesired(name="vm-1", host="h0", num_cpus=8, memory_mb=16384, owner=MARKS,
                     vgpus=vgpus, extra_config=extra, rdma_nic=rdma)


def have(extra: dict[str, str], devices: tuple[vim.vm.device.VirtualPCIPassthrough, ...],
         nics: tuple[vim.vm.device.VirtualPCIPassthrough, ...] = ()) -> VmActual:
    marks = {**MARKS.as_extra_config(), "vgpu.managed_keys": ",".join(sorted(extra))}
    return VmActual(
        name="vm-1", ref=None, host="h0", powered_on=True, num_cpus=8, memory_mb=16384,
        firmware="efi", memory_reservation_locked=True, guest_id=None, is_template=False,
        extra_config={**extra, **marks, "someone.elses": "1"},
        vgpus=tuple(sorted(d.backing.vgpu for d in devices)), vgpu_devices=devices,
        passthrough_ids=(), passthrough_devices=(), ip=None, pending_customization=False,
        rdma_devices=nics, rdma_nics=tuple("passthrough 0000:3b:00.0" for _ in nics))


def sent(spec: vim.vm.ConfigSpec) -> dict[str, str]:
    return {o.key: o.value for o in spec.extraConfig or []}


def test_settings_that_left_the_scenario_are_cleared_with_the_vm_off() -> None:
    ats = {"pciPassthru.ats.enable": "TRUE"}
    before = have({**BASE, **P2P, **ats}, (vgpu_device(13000, "grid_a100d-1-10c"),))
    change = plan_vm(want(BASE), before)
    cleared = {(f.field, f.current, f.wanted) for f in change.fields}
    assert cleared == {
        ("extraConfig[pciPassthru.allowP2P]", "TRUE", "(unset)"),
        ("extraConfig[pciPassthru.RelaxACSforP2P]", "TRUE", "(unset)"),
        ("extraConfig[pciPassthru.ats.enable]", "TRUE", "(unset)"),
        ("extraConfig[vgpu.managed_keys]",
         "pciPassthru.64bitMMIOSizeGB,pciPassthru.RelaxACSforP2P,pciPassthru.allowP2P,"
         "pciPassthru.ats.enable,pciPassthru.use64bitMMIO",
         "pciPassthru.64bitMMIOSizeGB,pciPassthru.use64bitMMIO")}
    assert change.steps[0] is Step.POWER_OFF  # the settings take effect at power-on
    spec = reconfigure_spec(want(BASE), before)
    assert sent(spec) == {"pciPassthru.allowP2P": "", "pciPassthru.RelaxACSforP2P": "",
                          "pciPassthru.ats.enable": "",
                          "vgpu.managed_keys": "pciPassthru.64bitMMIOSizeGB,"
                                               "pciPassthru.use64bitMMIO"}
    assert "someone.elses" not in sent(spec)  # a key vgpu never set is left alone


def test_uvm_keys_follow_the_vms_device_order_not_the_scenarios_requests() -> None:
    # The plan numbers its one vGPU request 0; on this VM the RDMA NIC is device 0 and the
    # vGPU is added after it, as device 1.
    plan_keys = {**BASE, "pciPassthru0.cfg.enable_uvm": "1"}
    nic = RdmaNicDevice("0000:3b:00.0", "passthrough", 0x15B3, 0x1017)
    before = have(BASE, (), nics=(nic_device(13000),))
    spec = reconfigure_spec(want(plan_keys, rdma=nic), before)
    assert sent(spec)["pciPassthru1.cfg.enable_uvm"] == "1"
    assert "pciPassthru0.cfg.enable_uvm" not in sent(spec)


def test_a_removed_vgpu_moves_the_uvm_key_and_its_old_number_is_cleared() -> None:
    uvm2 = {**BASE, "pciPassthru0.cfg.enable_uvm": "1", "pciPassthru1.cfg.enable_uvm": "1"}
    devices = (vgpu_device(13000, "grid_a100d-1-10c"), vgpu_device(13001, "grid_a100d-2-20c"))
    before = have(uvm2, devices)
    after = want({**BASE, "pciPassthru0.cfg.enable_uvm": "1"}, vgpus=("grid_a100d-2-20c",))
    assert plan_vm(want(uvm2, vgpus=("grid_a100d-1-10c", "grid_a100d-2-20c")),
                   before).steps == []
    spec = reconfigure_spec(after, before)
    assert sent(spec)["pciPassthru1.cfg.enable_uvm"] == ""
    assert "pciPassthru0.cfg.enable_uvm" not in sent(spec)  # the kept vGPU is device 0 now
    assert [c.operation for c in spec.deviceChange] == ["remove"]


@pytest.mark.vcsim
@pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))
def test_p2p_leaves_the_vm_when_it_leaves_the_scenario(vcsim_lab: VcsimLab) -> None:
    with_p2p = desired_vms(1)
    assert set(P2P) <= set(MIG_KEYS)
    apply(vcsim_lab, with_p2p)
    vm = state_of(vcsim_lab).vms["s8-1g-1"]
    assert vm.extra_config["pciPassthru.allowP2P"] == "TRUE"
    without = [replace(d, extra_config={k: v for k, v in d.extra_config.items()
                                        if k not in P2P}) for d in with_p2p]
    changes, report = apply(vcsim_lab, without)
    assert report.failed == []
    assert changes.pending[0].steps[0] is Step.POWER_OFF
    vm = state_of(vcsim_lab).vms["s8-1g-1"]
    assert not set(P2P) & set(vm.extra_config)
    assert vm.extra_config["vgpu.managed_keys"] == \
        "pciPassthru.64bitMMIOSizeGB,pciPassthru.use64bitMMIO"
    again, report = apply(vcsim_lab, without)
    assert again.pending == [] and report.tasks == 0
