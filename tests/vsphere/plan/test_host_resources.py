"""Host memory and logical CPUs are checked before apply changes anything: on the
simulator lab (its hosts report a GPU server's memory and cores, or less where a test
says), scenario 8's seven 64 GB VMs do not fit a 384 GB host, and the refusal shows the
arithmetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyVmomi import vim

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.mig import gpu_model
from vgpu.model.plan import PlannedVM
from vgpu.planner import HeldVgpu
from vgpu.sim.lab import LabShape, gpu_pci_ids
from vgpu.vsphere.connect.connection import connect
from vgpu.vsphere.plan.from_plan import held_from_facts
from vgpu.vsphere.plan.host_resources import cpu_problem, memory_problem
from vgpu.vsphere.plan.reconcile import ClusterState, read_state
from vgpu.vsphere.read.facts import GpuDevice, HostFacts, VmActual, _vm_from_props

REPO = Path(__file__).resolve().parents[3]
SCENARIO_8 = str(REPO / "scenarios" / "mig_7x1g.yaml")
HOST = "DC0_C0_H0"

def _host(memory_gb: int, cores: int = 32) -> HostFacts:
    return HostFacts(name=HOST, connection_state="connected", in_maintenance=False,
                     version="8.0.2", build="1", full_name=None, gpus=[], vgpu_types=[],
                     graphics_default_type=None, memory_bytes=memory_gb << 30,
                     cpu_threads=2 * cores, cpu_cores=cores)


def _vm(name: str, memory_gb: int, vcpu: int = 8) -> PlannedVM:
    return PlannedVM(name=name, group="g", host=HOST, vcpu=vcpu, memory_mb=memory_gb * 1024,
                     vgpus=[])


def test_memory_refusal_shows_the_arithmetic_and_what_fits() -> None:
    planned = [_vm(f"vm{n}", 64) for n in range(7)]
    assert memory_problem(_host(384), planned, []) == (
        f"{HOST}: 7 VMs x 64 GB = 448 GB reserved > 384 GB of host memory less 12 GB for "
        "ESXi; fit: 5 of these VMs fit (372 GB free), or lower memory_gb to 53 or less, "
        "or spread the VMs over more hosts")
    assert memory_problem(_host(512), planned, []) is None


def test_a_vm_with_more_vcpus_than_the_host_has_logical_cpus_is_refused() -> None:
    assert cpu_problem(_host(512, cores=16), [_vm("big", 64, vcpu=48)]) == (
        f"{HOST}: big (48 vCPUs) > 32 logical CPUs of the host (16 cores); fit: lower "
        "vcpu to 32 or less")
    assert cpu_problem(_host(512, cores=16), [_vm("ok", 64, vcpu=32)]) is None


def _state(lab: VcsimLab) -> ClusterState:
    with connect(lab.target()) as session:
        return read_state(session, lab.placement_names())


@pytest.mark.vcsim
@pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))
def test_lab_hosts_report_a_gpu_servers_memory_and_cores(vcsim_lab: VcsimLab) -> None:
    facts = _state(vcsim_lab).hosts[HOST]
    assert (facts.memory_bytes, facts.cpu_cores, facts.cpu_threads) == (1024 << 30, 64, 128)


@pytest.mark.vcsim
@pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))
def test_apply_refuses_scenario_8_on_a_384_gb_host_before_any_change(tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=1, host_memory_gb=384)) as lab:
        inventory = str(lab.write_inventory(tmp_path / "inv.yaml"))
        before = sorted(_state(lab).vms)
        code, _, err = run_cli(["apply", "--no-provision", SCENARIO_8, "-i", inventory,
                                "--yes"])
        text = " ".join(err.split())
        assert code == 2, err
        assert (f"{HOST}: 7 VMs x 64 GB = 448 GB reserved > 384 GB of host memory less "
                "12 GB for ESXi; fit: 5 of these VMs fit (372 GB free)") in text
        assert sorted(_state(lab).vms) == before
        assert _state(lab).hosts[HOST].assignment_policy == "performance"  # not set
        _, out, _ = run_cli(["preflight", "-i", inventory, SCENARIO_8, "--results-dir",
                             str(tmp_path / "pf"), "--json"])
        capacity = next(c for c in json.loads(out)["scenario_checks"]
                        if c["name"] == "capacity")
        assert not capacity["ok"]
        assert "448 GB reserved > 384 GB of host memory" in capacity["detail"]


@pytest.mark.vcsim
@pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))
def test_preflight_shows_what_the_plan_takes_of_each_host(vcsim_lab: VcsimLab,
                                                          tmp_path: Path) -> None:
    inventory = str(vcsim_lab.write_inventory(tmp_path / "inv.yaml", hosts=[HOST]))
    _, out, _ = run_cli(["preflight", "-i", inventory, SCENARIO_8, "--results-dir",
                        str(tmp_path / "pf"), "--json"])
    checks = {c["name"]: c for c in json.loads(out)["scenario_checks"]}
    assert checks["host memory and CPUs"] == {
        "name": "host memory and CPUs", "ok": True,
        "detail": f"{HOST}: 448 GB of 1024 GB, 224 vCPUs on 128 logical CPUs"}


@pytest.mark.vcsim
@pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))
def test_vgpus_go_only_on_gpus_in_shared_direct_mode(tmp_path: Path) -> None:
    # Host 0's four GPUs are in passthrough: scenario 8's vGPUs go to host 1.
    with VcsimLab(LabShape(hosts=2, passthrough_hosts=(0,))) as lab:
        inventory = str(lab.write_inventory(tmp_path / "inv.yaml"))
        _, out, _ = run_cli(["preflight", "-i", inventory, SCENARIO_8,
                             "--results-dir", str(tmp_path / "pf"), "--json"])
        report = json.loads(out)
        capacity = next(c for c in report["scenario_checks"] if c["name"] == "capacity")
        assert capacity["ok"], capacity
        checks = {c["name"]: c for c in report["scenario_checks"]}
        assert checks["host memory and CPUs"]["detail"].startswith("DC0_C0_H1: ")


@pytest.mark.vcsim
@pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))
def test_vgpus_are_refused_where_every_gpu_is_in_passthrough(tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=1, passthrough_hosts=(0,))) as lab:
        inventory = str(lab.write_inventory(tmp_path / "inv.yaml"))
        code, _, err = run_cli(["apply", "--no-provision", SCENARIO_8, "-i", inventory,
                                "--yes"])
        text = " ".join(err.split())
        assert code == 2, err
        pci = gpu_pci_ids(1)[0]
        assert f"no VM: the GPU ({pci}) is in passthrough mode, not Shared Direct (vGPU) " \
               f"(passthrough on {HOST} GPU 0)" in text
        assert not [n for n in _state(lab).vms if n.startswith("s8-")]


@pytest.mark.vcsim
@pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))
def test_mig_backed_vgpus_are_refused_before_esxi_7_0_update_2(tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=1, esxi_version="7.0.1", esxi_build="16850804")) as lab:
        inventory = str(lab.write_inventory(tmp_path / "inv.yaml"))
        code, _, err = run_cli(["apply", "--no-provision", SCENARIO_8, "-i", inventory,
                                "--yes"])
        assert code == 2, err
        assert (f"{HOST} runs ESXi 7.0.1 build 16850804: MIG-backed vGPU needs ESXi 7.0 "
                "Update 2 (7.0.2) or later") in " ".join(err.split())
        assert not [n for n in _state(lab).vms if n.startswith("s8-")]
        _, out, _ = run_cli(["preflight", "-i", inventory, SCENARIO_8, "--results-dir",
                             str(tmp_path / "pf"), "--json"])
        version = next(c for h in json.loads(out)["hosts"] for c in h["checks"]
                       if c["name"] == "ESXi version")
        assert not version["ok"]
        assert version["detail"].startswith(f"{HOST} runs ESXi 7.0.1 build 16850804")


@pytest.mark.vcsim
@pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))
def test_esxi_7_0_update_2_runs_mig_backed_vgpus(tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=1, esxi_version="7.0.2", esxi_build="17630552")) as lab:
        inventory = str(lab.write_inventory(tmp_path / "inv.yaml"))
        _, out, _ = run_cli(["preflight", "-i", inventory, SCENARIO_8, "--results-dir",
                             str(tmp_path / "pf"), "--json"])
        version = next(c for h in json.loads(out)["hosts"] for c in h["checks"]
                       if c["name"] == "ESXi version")
        assert version == {"name": "ESXi version", "ok": True,
                           "detail": "7.0.2 build 17630552"}


def _dynamic_directpath_vm(pci: str | None) -> VmActual:
    """A VM of another team holding an A100 through Dynamic DirectPath, read the way
    facts reads every VM (the simulator speaks API 6.5, older than Dynamic DirectPath)."""
    backing = vim.vm.device.VirtualPCIPassthrough.DynamicBackingInfo(
        assignedId=pci, deviceName="", allowedDevice=[
            vim.vm.device.VirtualPCIPassthrough.AllowedDevice(vendorId=0x10DE,
                                                               deviceId=0x20B5)])
    props = {"name": "team-c", "runtime.host": vim.HostSystem("host-1"),
             "runtime.powerState": "poweredOn" if pci else "poweredOff",
             "config.hardware.memoryMB": 65536, "config.hardware.numCPU": 16,
             "config.hardware.device": [vim.vm.device.VirtualPCIPassthrough(
                 key=1, backing=backing)]}
    return _vm_from_props(vim.VirtualMachine("vm-9"), props, {"host-1": HOST})


def test_a_gpu_held_through_dynamic_directpath_is_not_free() -> None:
    gpus = [GpuDevice(pci, 0x10DE, 0x20B5, "A100") for pci in gpu_pci_ids(2)]
    host = _host(1024)
    host.gpus = gpus
    vm = _dynamic_directpath_vm(gpu_pci_ids(2)[1])
    assert vm.dynamic_passthrough_ids == (gpu_pci_ids(2)[1],)
    held, notes = held_from_facts({HOST: host}, {"team-c": vm}, "8", gpu_model("A100-80GB"))
    assert held == [HeldVgpu(HOST, 1, "team-c", "passthrough", "Dynamic DirectPath")]
    assert notes == []
    waiting = _dynamic_directpath_vm(None)
    held, notes = held_from_facts({HOST: host}, {"team-c": waiting}, "8", gpu_model("A100-80GB"))
    assert held == []
    assert notes == [f"{HOST}: VM team-c takes 1 GPU(s) through Dynamic DirectPath at "
                     "power-on, ESXi picks which then; not counted"]


def test_memory_other_powered_on_vms_reserve_counts() -> None:
    other = _dynamic_directpath_vm(None)
    other.memory_reservation_locked = True  # 64 GB, all reserved
    assert memory_problem(_host(128), [_vm("vm1", 64)], [other]) == (
        f"{HOST}: 1 VM x 64 GB = 64 GB reserved + 64 GB reserved by 1 other powered-on "
        "VM(s) (team-c) > 128 GB of host memory less 12 GB for ESXi; fit: 0 of these VMs "
        "fit (52 GB free), or lower memory_gb to 52 or less, or spread the VMs over more "
        "hosts")
