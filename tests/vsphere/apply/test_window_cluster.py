"""The upgrade window on a cluster shaped like a real vSphere 8 one: vCLS VMs and an agent
VM per host (managed by the ESX Agent Manager), compute GPUs whose Xorg does not run. The
drain leaves vSphere's own VMs to maintenance mode and still refuses another team's; the
undrain needs no Xorg for vGPU, and keeps the host in maintenance mode when the upgrade
broke its NVIDIA stack, naming what broke and the fix."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from pyVmomi import vim

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.sim.hostupgrade import HostUpgrade, upgrade_host
from vgpu.sim.lab import LabShape
from vgpu.vsphere.connect.connection import connect, resolve_placement
from vgpu.vsphere.plan.reconcile import read_state

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

H0, H1 = "DC0_C0_H0", "DC0_C0_H1"
NEW_BUILD, NEW_VIB = "24022510", "550.90.05-1OEM.800.1.0.20613240"
CLUSTER = LabShape(hosts=2, gpus_per_host=1, system_vms=True, xorg_off=True)


def _vgpu(tmp_path: Path, inventory: Path, *args: str) -> tuple[int, str]:
    code, out, err = run_cli([*args, "-i", str(inventory), "--facts-dir",
                              str(tmp_path / "facts"), "--records-dir",
                              str(tmp_path / "upgrade")])
    return code, " ".join((out + err).split())


def _power(lab: VcsimLab) -> dict[str, tuple[str, str]]:
    """VM name -> (host, power state) of every VM in the lab."""
    with connect(lab.target()) as session:
        state = read_state(session, lab.placement_names())
        return {vm.name.split(" [")[0]: (vm.host or "-", "on" if vm.powered_on else "off")
                for vm in state.vms.values() if not vm.is_template}


def _in_maintenance(lab: VcsimLab, host: str) -> bool:
    with connect(lab.target()) as session:
        return read_state(session, lab.placement_names()).hosts[host].in_maintenance


def _upgrade(lab: VcsimLab, host: str, **faults: object) -> None:
    time.sleep(1.1)  # boot times are read to the second
    upgrade_host(lab.url, lab.shape.username, lab.running.password, lab.ca_file,
                 HostUpgrade(host, NEW_BUILD, NEW_VIB, **faults))  # type: ignore[arg-type]


def test_system_vms_are_read_as_such_and_left_to_maintenance_mode(tmp_path: Path) -> None:
    with VcsimLab(CLUSTER) as lab:
        inventory = lab.write_inventory(tmp_path / "inv.yaml")
        with connect(lab.target()) as session:
            roles = {vm.name.split(" [")[0]: vm.system_role for vm in
                     read_state(session, lab.placement_names()).vms.values()
                     if vm.system_role}
        vcls = sorted(name for name, role in roles.items() if role == "vCLS")
        assert len(vcls) == 2 and roles[f"nsx-agent-{H0}"] == "agent VM"

        code, out = _vgpu(tmp_path, inventory, "drain", "--host", H0)
        assert code == 0, out
        assert "left to maintenance mode:" in out and f"nsx-agent-{H0}" in out
        assert "vSphere's own agent VM, vCLS" in out
        power = _power(lab)
        assert power[f"nsx-agent-{H0}"] == (H0, "off")  # maintenance mode stopped it
        assert power[f"nsx-agent-{H1}"] == (H1, "on")  # the other host untouched
        record = json.loads((tmp_path / "upgrade" / f"drain-{H0}.json").read_text())
        assert record["status"] == "drained"
        assert record["system_vms"] == sorted([f"nsx-agent-{H0}", vcls[0]])
        assert record["gpus"] == ["0000:17:00.0"] and record["vgpu_types"]

        # Compute GPUs in vGPU mode need no Xorg: the host leaves maintenance mode.
        assert lab.xorg(H0)["running"] is False
        code, out = _vgpu(tmp_path, inventory, "undrain", "--host", H0, "--no-upgrade")
        assert code == 0, out
        assert f"host {H0}: GPU stack as at the drain (1 GPU(s)" in out
        assert not _in_maintenance(lab, H0)
        assert _power(lab)[f"nsx-agent-{H0}"] == (H0, "on")


def test_another_teams_vm_still_refuses_the_drain_and_nothing_changes(
        tmp_path: Path) -> None:
    with VcsimLab(CLUSTER) as lab:
        inventory = lab.write_inventory(tmp_path / "inv.yaml")
        lab.make_foreign_vm("render-farm-7", H1)
        code, out = _vgpu(tmp_path, inventory, "drain", "--host", H1)
        assert code == 1
        assert f"host {H1} runs VMs vgpu does not own: render-farm-7" in out
        assert "vCLS" not in out.split("does not own:")[1].split(";")[0]
        assert "nothing was changed" in out
        assert not _in_maintenance(lab, H1)
        assert not (tmp_path / "upgrade" / f"drain-{H1}.json").exists()


def test_a_policy_change_on_a_host_without_xorg_waits_for_a_reboot(tmp_path: Path) -> None:
    with VcsimLab(CLUSTER) as lab:
        inventory = lab.write_inventory(tmp_path / "inv.yaml")
        assert _vgpu(tmp_path, inventory, "drain", "--host", H1)[0] == 0
        with connect(lab.target()) as session:
            ref = resolve_placement(session, lab.placement_names()).hosts[H1]
            config = ref.config.graphicsConfig
            ref.configManager.graphicsManager.UpdateGraphicsConfig(config=vim.host.GraphicsConfig(
                hostDefaultGraphicsType=config.hostDefaultGraphicsType,
                sharedPassthruAssignmentPolicy="consolidation",
                deviceType=list(config.deviceType)))
        code, out = _vgpu(tmp_path, inventory, "undrain", "--host", H1, "--no-upgrade")
        assert code == 1
        assert "xorg failed to start" in out
        assert f"Reboot {H1}, then undrain it again" in out
        assert _in_maintenance(lab, H1)

        _upgrade(lab, H1)  # the boot puts the policy in effect
        code, out = _vgpu(tmp_path, inventory, "undrain", "--host", H1)
        assert code == 0, out
        assert lab.xorg(H1)["active_policy"] == "consolidation"


@pytest.mark.parametrize(("fault", "finding"), [
    ({"drop_vib": True}, f"host {H0} has no NVIDIA host driver VIB any more (it had "
                         "NVD-AIE_ESXi_8.0.0_Driver 535.161.05"),
    ({"unload_module": True}, f"host {H0} offers no vGPU type although the NVIDIA VIB "
                              f"{NEW_VIB} is installed: the vGPU manager did not load"),
])
def test_an_upgrade_that_broke_the_gpu_stack_keeps_the_host_in_maintenance(
        tmp_path: Path, fault: dict[str, bool], finding: str) -> None:
    with VcsimLab(CLUSTER) as lab:
        inventory = lab.write_inventory(tmp_path / "inv.yaml")
        assert _vgpu(tmp_path, inventory, "drain", "--host", H0)[0] == 0
        _upgrade(lab, H0, **fault)
        code, out = _vgpu(tmp_path, inventory, "undrain", "--host", H0)
        assert code == 1
        assert finding in out
        assert f"Host {H0} stays in maintenance mode" in out
        assert _in_maintenance(lab, H0)
        if "drop_vib" in fault:  # the cluster's management is not known: both fixes
            assert "cluster's image" in out and "esxcli software vib install" in out

        _upgrade(lab, H0)  # a good image fixes it
        code, out = _vgpu(tmp_path, inventory, "undrain", "--host", H0)
        assert code == 0, out


def test_on_an_image_managed_cluster_the_fix_never_says_esxcli(tmp_path: Path) -> None:
    with VcsimLab(CLUSTER) as lab:
        data = lab.inventory_data()
        data["placement"]["image_managed"] = True  # type: ignore[index]
        inventory = tmp_path / "inv.yaml"
        import yaml
        inventory.write_text(yaml.safe_dump(data, sort_keys=False))
        assert _vgpu(tmp_path, inventory, "drain", "--host", H0)[0] == 0
        _upgrade(lab, H0, drop_vib=True)
        code, out = _vgpu(tmp_path, inventory, "undrain", "--host", H0)
        assert code == 1
        assert "add the NVIDIA AI Enterprise host driver component to the cluster's image" \
            in out
        assert "esxcli" not in out


def test_an_interrupted_drain_is_continued_from_its_own_record(tmp_path: Path) -> None:
    """Killed after its record and the shutdowns, before maintenance mode: the next drain
    keeps the facts it read before anything changed and finishes the window."""
    with VcsimLab(CLUSTER) as lab:
        inventory = lab.write_inventory(tmp_path / "inv.yaml")
        records = tmp_path / "upgrade"
        records.mkdir()
        interrupted = {"host": H0, "inventory": str(inventory), "drained_at": "T0",
                       "facts_id": "preflight-early", "hardware_uuid": None,
                       "boot_time": None, "esxi_build": "22380479", "host_driver": None,
                       "vms_shut_down": ["vgpu-s6-vm1"], "status": "draining"}
        (records / f"drain-{H0}.json").write_text(json.dumps(interrupted))
        code, out = _vgpu(tmp_path, inventory, "drain", "--host", H0)
        assert code == 0, out
        assert f"continuing the drain of {H0} begun at T0" in out
        record = json.loads((records / f"drain-{H0}.json").read_text())
        assert (record["status"], record["facts_id"]) == ("drained", "preflight-early")
        assert record["vms_shut_down"] == ["vgpu-s6-vm1"]
        assert _in_maintenance(lab, H0)
