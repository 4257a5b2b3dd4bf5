"""Xorg in an upgrade window, on the simulator lab through the CLI: graphics settings changed
while a host was drained take effect at `vgpu undrain` (Xorg restarted through the host's
service system, as the simulator records), a reboot puts them in effect without one, and a
host whose vSGA GPUs need an Xorg that is not running stays in maintenance mode."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pyVmomi import vim

from tests.cli.invoke import run_cli
from tests.labs.vcsim import VcsimLab, lab_available
from vgpu.sim.hostupgrade import HostUpgrade, upgrade_host
from vgpu.sim.lab import LabShape
from vgpu.vsphere.connect.connection import connect
from vgpu.vsphere.plan.reconcile import read_state

pytestmark = [pytest.mark.vcsim,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]

H0, H1 = "DC0_C0_H0", "DC0_C0_H1"


def _vgpu(*args: str) -> tuple[int, str]:
    code, out, err = run_cli([*args])
    return code, " ".join((out + err).split())


def _window(tmp_path: Path, inventory: Path) -> list[str]:
    return ["-i", str(inventory), "--facts-dir", str(tmp_path / "facts"),
            "--records-dir", str(tmp_path / "upgrade")]


def _set_policy(lab: VcsimLab, host: str, policy: str) -> None:
    """Set the assignment policy as an engineer does in the vSphere Client (no restart)."""
    with connect(lab.target()) as session:
        facts = read_state(session, lab.placement_names()).hosts[host]
        config = facts.graphics_config
        facts.graphics_manager.UpdateGraphicsConfig(config=vim.host.GraphicsConfig(
            hostDefaultGraphicsType=config.hostDefaultGraphicsType,
            sharedPassthruAssignmentPolicy=policy, deviceType=list(config.deviceType)))


def _in_maintenance(lab: VcsimLab, host: str) -> bool:
    with connect(lab.target()) as session:
        return read_state(session, lab.placement_names()).hosts[host].in_maintenance


def test_a_policy_set_in_the_window_takes_effect_at_undrain_by_an_xorg_restart(
        tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=2, gpus_per_host=1)) as lab:
        inventory = lab.write_inventory(tmp_path / "inv.yaml")
        code, out = _vgpu("drain", "--host", H1, *_window(tmp_path, inventory))
        assert code == 0, out
        _set_policy(lab, H1, "consolidation")
        assert lab.xorg(H1)["active_policy"] == "performance"  # set, not in effect

        code, out = _vgpu("undrain", "--host", H1, "--no-upgrade",
                          *_window(tmp_path, inventory))
        assert code == 0, out
        assert f"{H1}: Xorg restarted (GPU assignment policy performance -> " \
            "consolidation in effect)" in out
        assert lab.xorg(H1) == {"running": True, "restarts": 1,
                                "active_policy": "consolidation"}
        assert not _in_maintenance(lab, H1)
        assert lab.xorg(H0)["restarts"] == 0


def test_a_reboot_puts_the_policy_in_effect_and_an_untouched_host_keeps_xorg(
        tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=2, gpus_per_host=1)) as lab:
        inventory = lab.write_inventory(tmp_path / "inv.yaml")
        assert _vgpu("drain", "--host", H1, *_window(tmp_path, inventory))[0] == 0
        _set_policy(lab, H1, "consolidation")
        time.sleep(1.1)  # boot times are read to the second
        upgrade_host(lab.url, lab.shape.username, lab.running.password, lab.ca_file,
                     HostUpgrade(H1, "24022510", "550.90.05-1OEM.800.1.0.20613240"))
        code, out = _vgpu("undrain", "--host", H1, *_window(tmp_path, inventory))
        assert code == 0, out
        assert "Xorg restarted" not in out
        assert lab.xorg(H1) == {"running": True, "restarts": 0,
                                "active_policy": "consolidation"}


def test_xorg_stopped_matters_only_for_vsga_gpus(tmp_path: Path) -> None:
    """vGPU (Shared Direct) needs no Xorg: a stopped one does not hold the host back. A GPU
    in vSGA mode (graphics type shared) does need it: the host stays in maintenance."""
    with VcsimLab(LabShape(hosts=2, gpus_per_host=1)) as lab:
        inventory = lab.write_inventory(tmp_path / "inv.yaml")
        assert _vgpu("drain", "--host", H1, *_window(tmp_path, inventory))[0] == 0
        lab.set_xorg_running(H1, False)
        code, out = _vgpu("undrain", "--host", H1, "--no-upgrade",
                          *_window(tmp_path, inventory))
        assert code == 0, out
        assert not _in_maintenance(lab, H1)

        _set_graphics_type(lab, H1, "shared")
        lab.set_xorg_running(H1, True)  # a start puts the vSGA type in effect
        assert _vgpu("drain", "--host", H1, *_window(tmp_path, inventory))[0] == 0
        lab.set_xorg_running(H1, False)
        code, out = _vgpu("undrain", "--host", H1, "--no-upgrade",
                          *_window(tmp_path, inventory))
        assert code == 1
        assert f"the Xorg service of host {H1} is not running (its vSGA GPUs need it)" in out
        assert "/etc/init.d/xorg start" in out
        assert f"Host {H1} stays in maintenance mode" in out
        assert _in_maintenance(lab, H1)

        lab.set_xorg_running(H1, True)
        code, out = _vgpu("undrain", "--host", H1, "--no-upgrade",
                          *_window(tmp_path, inventory))
        assert code == 0, out
        assert not _in_maintenance(lab, H1)


def _set_graphics_type(lab: VcsimLab, host: str, kind: str) -> None:
    with connect(lab.target()) as session:
        facts = read_state(session, lab.placement_names()).hosts[host]
        config = facts.graphics_config
        devices = [vim.host.GraphicsConfig.DeviceType(deviceId=pci, graphicsType=kind)
                   for pci in facts.graphics_active_per_gpu]
        facts.graphics_manager.UpdateGraphicsConfig(config=vim.host.GraphicsConfig(
            hostDefaultGraphicsType=config.hostDefaultGraphicsType,
            sharedPassthruAssignmentPolicy=config.sharedPassthruAssignmentPolicy,
            deviceType=devices))


def test_undrain_of_a_host_never_drained_names_the_flag_and_the_command(
        tmp_path: Path) -> None:
    with VcsimLab(LabShape(hosts=1, gpus_per_host=1)) as lab:
        inventory = lab.write_inventory(tmp_path / "inv.yaml")
        code, out = _vgpu("undrain", "--host", H0, *_window(tmp_path, inventory))
    assert code == 2
    assert f"command line --host: no drain of host {H0} is recorded" in out
    assert f"run `vgpu drain --host {H0}` before the upgrade" in out
