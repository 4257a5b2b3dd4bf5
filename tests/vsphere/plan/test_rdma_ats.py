"""GPUDirect RDMA NICs in the VM spec and the ATS host setting, on the simulator lab: apply
builds the NIC device and sets the host option, a second apply changes nothing, and
preflight names the host and the fix when the NIC or the setting is not there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from pyVmomi import vim

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.errors import InputError
from vgpu.model import load_inventory
from vgpu.model.scenario import AtsSetting
from vgpu.sim.lab import RDMA_NIC_PORTS, LabShape
from vgpu.vsphere.connect.connection import connect
from vgpu.vsphere.plan.reconcile import read_state

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

REPO = Path(__file__).resolve().parents[3]
ATS_KEY = "PCI.LabAtsForP2P"  # the lab's stand-in key; the real one comes from the lab's study
ATS_COMMAND = "esxcli system settings advanced set -o /PCI/LabAtsForP2P -i 1"
NODES = ("mn2-node-1", "mn2-node-2")


def scenario_file(tmp_path: Path, *, ats: bool = False, rdma: str = "roce") -> str:
    data = yaml.safe_load((REPO / "scenarios" / "train_multinode_2.yaml").read_text())
    data["network"]["rdma"] = rdma
    data["workloads"][0]["network"]["rdma"] = rdma != "none"
    if ats:
        data["vm_settings"]["ats"] = [{"name": "ats-p2p", "host_command": ATS_COMMAND}]
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(path)


def inventory_file(lab: VcsimLab, tmp_path: Path, kind: str,
                   pci_id: str | None = None) -> str:
    data = lab.inventory_data(rdma_nic_kind=kind)
    if pci_id is not None:
        for host in data["hosts"]:  # type: ignore[attr-defined]
            host["rdma_nics"][0]["pci_id"] = pci_id
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return str(path)


def vm_devices(lab: VcsimLab, name: str) -> list[object]:
    with connect(lab.target()) as session:
        vm = read_state(session, lab.placement_names()).vms[name]
        return list(vm.ref.config.hardware.device)


def host_option(lab: VcsimLab, host: str, key: str) -> object:
    with connect(lab.target()) as session:
        facts = read_state(session, lab.placement_names()).hosts[host]
        return facts.option_manager.QueryOptions(name=key)[0].value


@pytest.mark.parametrize("kind", ["sriov", "passthrough", "pvrdma"])
def test_apply_gives_each_vm_its_rdma_nic_and_reapply_changes_nothing(
    tmp_path: Path, kind: str,
) -> None:
    with VcsimLab(LabShape(hosts=2)) as lab:
        inventory = inventory_file(lab, tmp_path, kind)
        scenario = scenario_file(tmp_path)
        code, out, err = run_cli(["plan", scenario, "-i", inventory])
        assert code == 0, err
        assert f"RDMA NIC: {kind}" in out and "ConnectX-6" in out

        code, out, err = run_cli(["apply", "--no-provision", scenario, "-i", inventory, "--yes"])
        assert code == 0, err + out
        assert "2 of 2 VM(s) done" in out
        pci = RDMA_NIC_PORTS.get(kind, RDMA_NIC_PORTS["sriov"])
        for name in NODES:
            devices = vm_devices(lab, name)
            if kind == "sriov":
                nics = [d for d in devices if isinstance(d, vim.vm.device.VirtualSriovEthernetCard)]
                assert [d.sriovBacking.physicalFunctionBacking.id for d in nics] == [pci]
            elif kind == "pvrdma":
                nics = [d for d in devices if isinstance(d, vim.vm.device.VirtualVmxnet3Vrdma)]
                assert len(nics) == 1 and nics[0].backing.deviceName == "VM Network"
            else:
                ids = sorted(d.backing.id for d in devices
                             if isinstance(d, vim.vm.device.VirtualPCIPassthrough))
                assert pci in ids and len(ids) == 2  # the GPU and the NIC
                nic = next(d for d in devices if isinstance(d, vim.vm.device.VirtualPCIPassthrough)
                           and d.backing.id == pci)
                assert (nic.backing.vendorId, nic.backing.deviceId) == (0x15B3, "101b")

        tasks = lab.recent_tasks()
        code, out, err = run_cli(["apply", "--no-provision", scenario, "-i", inventory])
        assert code == 0, err
        assert "0 to create, 0 to change, 2 to keep, 0 to delete" in out
        assert "nothing to change" in out
        assert lab.recent_tasks() == tasks


def test_rdma_none_removes_the_nic_device(tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=2)) as lab:
        inventory = inventory_file(lab, tmp_path, "sriov")
        assert run_cli(["apply", "--no-provision", scenario_file(tmp_path), "-i", inventory,
                        "--yes"])[0] == 0
        code, out, err = run_cli(["apply", "--no-provision", scenario_file(tmp_path, rdma="none"),
                                  "-i", inventory, "--yes"])
        assert code == 0, err
        assert "rdma_nic: sriov 0000:3b:00.1 -> none" in out
        for name in NODES:
            assert not [d for d in vm_devices(lab, name)
                        if isinstance(d, vim.vm.device.VirtualSriovEthernetCard)]


def test_preflight_names_the_host_whose_nic_is_absent(tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=2)) as lab:
        inventory = inventory_file(lab, tmp_path, "sriov", pci_id="0000:af:00.0")
        code, out, err = run_cli(["preflight", scenario_file(tmp_path), "-i", inventory,
                                  "--results-dir", str(tmp_path)])
        assert code != 0
        text = out + err
        for host in ("DC0_C0_H0", "DC0_C0_H1"):
            assert f"{host}: RDMA NIC 0000:af:00.0: no PCI device at 0000:af:00.0" in text
        assert "0000:3b:00.0, 0000:3b:00.1" in text and "fix the NIC's pci_id" in text

        code, out, err = run_cli(["apply", "--no-provision", scenario_file(tmp_path), "-i",
                                  inventory, "--yes"])
        assert code == 2
        assert "RDMA NIC 0000:af:00.0" in out + err


def test_preflight_says_how_to_enable_sriov_where_it_is_off(tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=2, sriov_off=(1,))) as lab:
        inventory = inventory_file(lab, tmp_path, "sriov")
        code, out, _ = run_cli(["preflight", "-i", inventory, "--json",
                                "--results-dir", str(tmp_path)])
        assert code != 0
        report = json.loads(out[: out.rindex("}") + 1])
        checks = {h["name"]: {c["name"]: c for c in h["checks"]} for h in report["hosts"]}
        nic = "RDMA NIC 0000:3b:00.1"
        assert checks["DC0_C0_H0"][nic]["ok"]
        assert "8 virtual functions" in checks["DC0_C0_H0"][nic]["detail"]
        assert not checks["DC0_C0_H1"][nic]["ok"]
        assert "SR-IOV is not enabled" in checks["DC0_C0_H1"][nic]["detail"]
        assert "max_vfs" in checks["DC0_C0_H1"][nic]["detail"]


def test_apply_sets_the_ats_host_option_once_and_preflight_checks_it(tmp_path: Path) -> None:
    # The scenario passes whole GPUs through: the hosts have theirs in passthrough.
    with VcsimLab(LabShape(hosts=2, host_options={ATS_KEY: "0"},
                           passthrough_hosts=(0, 1))) as lab:
        inventory = inventory_file(lab, tmp_path, "sriov")
        scenario = scenario_file(tmp_path, ats=True)
        code, out, err = run_cli(["preflight", scenario, "-i", inventory,
                                  "--results-dir", str(tmp_path)])
        assert code != 0
        assert f"DC0_C0_H0: advanced option {ATS_KEY}: {ATS_KEY} is 0, the scenario wants " \
               f"1: `vgpu apply` sets it, or run on the host `{ATS_COMMAND}`" in out + err

        code, out, err = run_cli(["apply", "--no-provision", scenario, "-i", inventory, "--yes"])
        assert code == 0, err + out
        assert f"host DC0_C0_H1: advanced option {ATS_KEY}: 0 -> 1" in out
        for host in ("DC0_C0_H0", "DC0_C0_H1"):
            assert host_option(lab, host, ATS_KEY) == 1  # still an integer option

        tasks = lab.recent_tasks()
        code, out, err = run_cli(["apply", "--no-provision", scenario, "-i", inventory])
        assert code == 0, err
        assert "nothing to change" in out and "advanced option" not in out
        assert lab.recent_tasks() == tasks
        code, out, err = run_cli(["preflight", scenario, "-i", inventory,
                                  "--results-dir", str(tmp_path)])
        assert code == 0, out + err


def test_an_option_the_host_does_not_know_fails_apply_with_the_command(tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=2)) as lab:
        inventory = inventory_file(lab, tmp_path, "sriov")
        scenario = scenario_file(tmp_path, ats=True)
        code, out, err = run_cli(["preflight", scenario, "-i", inventory,
                                  "--results-dir", str(tmp_path)])
        assert code != 0
        assert f"the host does not know the option {ATS_KEY}: run on the host " \
               f"`{ATS_COMMAND}`" in out + err
        code, out, err = run_cli(["apply", "--no-provision", scenario, "-i", inventory, "--yes"])
        assert code != 0
        assert f"DC0_C0_H0: the host does not know the option {ATS_KEY}; run on the host: " \
               f"{ATS_COMMAND}" in out + err


def test_inventory_and_scenario_refuse_what_cannot_be_applied(tmp_path: Path) -> None:
    bad_nic = {"name": "x", "hosts": [{"name": "h", "rdma_nics": [
        {"pci_id": "3b:00.0", "kind": "sriov"}]}], "vcenter": {
        "host": "vc", "user": "u", "password": {"env": "P"}}, "placement": {
        "datacenter": "d", "datastore": "s", "network": "n", "template": "t"}}
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(bad_nic), encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load_inventory(path)
    assert "is not a PCI address" in str(caught.value) and "0000:3b:00.0" in str(caught.value)
    with pytest.raises(ValueError, match="only host command vgpu can apply"):
        AtsSetting(name="ats", host_command="esxcli system module parameters set -m x -p y")
    assert AtsSetting(name="ats", host_command=ATS_COMMAND).all_host_options() == {ATS_KEY: "1"}
