"""A guest driver changed in place, and the driver a guest runs judged against its host's
vGPU Manager. NVIDIA's installer refuses while nvidia.ko is loaded (the simulated one too:
nvidia-gridd, nvidia-persistenced hold the module), so the driver step stops what holds it,
unloads it, installs, reboots and proves the new version with nvidia-smi."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from tests.labs.connect import FAST
from tests.labs.fixtures import ssh_lab
from tests.labs.sshlab import SshLab, fake_driver_installer
from tests.provision.lab_jobs import (
    GA_KERNEL,
    driver_files,
    provision_lab,
    scenario_jobs,
    sim_inventory,
    target,
)
from tests.provision.scripted import ScriptedTransport
from vgpu.provision.requirements import GuestRequirements
from vgpu.provision.running_driver import judge_running_driver
from vgpu.provision.step import HostContext, Outcome, StepFailed
from vgpu.provision.steps.driver_release import release_driver
from vgpu.provision.steps.nvidia import DriverStep
from vgpu.remote.hostlog import HostLog
from vgpu.remote.redact import Redactor
from vgpu.remote.ssh import SSHTransport
from vgpu.remote.targets import HostTarget

DRIVER_A, DRIVER_B = "535.154.05", "535.183.01"  # requirements() installs DRIVER_A
STEPS = ("os-facts", "nvidia-driver", "vgpu-licensing", "verify-gpu")
MODULE_LOADED = "An NVIDIA kernel module 'nvidia' appears to already be loaded in your kernel"


lab = ssh_lab(1, prepare=lambda lab: lab.hosts[0].set_kernel(GA_KERNEL, nouveau=False))


provision = partial(provision_lab, steps=STEPS, reboot_timeout_s=60)


def smi_versions(lab: SshLab, tmp: Path, command: str) -> tuple[int, str]:
    transport = SSHTransport(target(lab.hosts[0]), FAST, HostLog(tmp / "h.log", Redactor()))
    transport.connect()
    try:
        result = transport.run(command, sudo=True)
    finally:
        transport.close()
    return result.exit_code, (result.stdout + result.stderr).strip()


def test_a_running_driver_the_host_vib_does_not_run_is_named_with_the_fix() -> None:
    problem = judge_running_driver("vm-1", "550.54.15", "580.65.05-1OEM.800.1.0.20613240")
    assert problem is not None
    assert problem.message.startswith(
        "vm-1 runs NVIDIA guest driver 550.54.15 (branch 550), which its host's vGPU Manager "
        "580.65.05-1OEM.800.1.0.20613240 (branch 580) does not run: a 580 manager runs guest "
        "branches 580, 570, 535 only")
    assert "a guest driver of branch 580/570/535" in problem.fix
    assert "branch-550 host driver VIB" in problem.fix
    assert judge_running_driver("vm-1", "550.54.15", "570.133.10") is None  # previous branch
    assert judge_running_driver("vm-1", "550.54.15", "580.65.05", (550,)) is None  # declared
    newer = judge_running_driver("vm-1", "580.65.05", "570.133.10")
    assert newer is not None and "newer than the vGPU Manager's branch 570" in newer.message


@pytest.mark.sshd
def test_the_driver_a_guest_runs_is_judged_against_its_host_vib(
        lab: SshLab, tmp_path: Path) -> None:
    first = provision(lab, tmp_path, "first", host_driver_version="535.161.05")
    assert first.exit_code == 0, first.failure_lines()
    upgraded = provision(lab, tmp_path, "upgraded", host_driver_version="570.133.10")
    assert upgraded.exit_code != 0
    driver = upgraded.hosts[0].step("nvidia-driver")
    assert driver.outcome is Outcome.FAILED
    failure = "\n".join(upgraded.failure_lines())
    assert "vm-1 runs NVIDIA guest driver 535.154.05 (branch 535), which its host's vGPU " \
           "Manager 570.133.10 (branch 570) does not run: a 570 manager runs guest branches " \
           "570, 550 only" in failure
    assert "a guest driver of branch 570/550 (drivers.guest_driver" in failure


@pytest.mark.sshd
def test_the_installer_refuses_while_the_module_is_loaded(lab: SshLab, tmp_path: Path) -> None:
    report = provision(lab, tmp_path, "first")
    assert report.exit_code == 0, report.failure_lines()
    installer = fake_driver_installer(lab.hosts[0].home, DRIVER_B)
    installer.chmod(0o755)
    code, output = smi_versions(lab, tmp_path, f"sh {installer} --silent")
    assert code == 1 and MODULE_LOADED in output
    code, output = smi_versions(lab, tmp_path, "modprobe -r nvidia")
    assert (code, output) == (1, "modprobe: FATAL: Module nvidia is in use.")  # by gridd
    assert smi_versions(lab, tmp_path, "nvidia-smi --query-gpu=driver_version "
                        "--format=csv,noheader") == (0, DRIVER_A)


@pytest.mark.sshd
def test_a_guest_on_driver_a_changes_to_driver_b_in_place(lab: SshLab, tmp_path: Path) -> None:
    host = lab.hosts[0]
    first = provision(lab, tmp_path, "first")
    assert first.exit_code == 0, first.failure_lines()
    assert (host.reboots, (host.sim_state / "services/nvidia-gridd.active").exists()) == (0, True)
    driver_b = fake_driver_installer(tmp_path / "files", DRIVER_B)
    changed = provision(lab, tmp_path, "changed", driver_source=str(driver_b))
    assert changed.exit_code == 0, changed.failure_lines()
    step = changed.hosts[0].step("nvidia-driver")
    assert (step.outcome, step.detail) == (Outcome.CHANGED, f"driver {DRIVER_B}")
    assert host.reboots == 1
    log = (tmp_path / "changed" / "vm-1.log").read_text()
    assert log.index("systemctl stop nvidia-gridd") < \
        log.index("modprobe -r nvidia_uvm nvidia_drm nvidia_modeset nvidia") < \
        log.index(f"{DRIVER_B}-grid.run --silent --dkms") < log.index("systemctl reboot") < \
        log.index("back after the reboot")
    assert changed.hosts[0].step("verify-gpu").outcome is Outcome.OK
    assert smi_versions(lab, tmp_path, "nvidia-smi --query-gpu=driver_version "
                        "--format=csv,noheader") == (0, DRIVER_B)
    again = provision(lab, tmp_path, "again", driver_source=str(driver_b))
    assert again.exit_code == 0 and again.hosts[0].count(Outcome.CHANGED) == 0
    assert host.reboots == 1


@pytest.mark.sshd
def test_a_sim_up_guest_boots_in_place_for_the_driver_change(lab: SshLab,
                                                             tmp_path: Path) -> None:
    host = lab.hosts[0]
    host.set_sim("reboot-watched", None)  # as `vgpu sim up`'s guests: no lab reboots them
    assert provision(lab, tmp_path, "first").exit_code == 0
    boot_id = host.system_root / "proc/sys/kernel/random/boot_id"
    before = boot_id.read_text() if boot_id.exists() else ""
    driver_b = fake_driver_installer(tmp_path / "files", DRIVER_B)
    changed = provision(lab, tmp_path, "changed", driver_source=str(driver_b))
    assert changed.exit_code == 0, changed.failure_lines()
    assert host.reboots == 0 and boot_id.read_text() not in ("", before)
    assert not (host.sim_state / "nvidia-module").exists()
    assert changed.hosts[0].step("nvidia-driver").detail == f"driver {DRIVER_B}"


def test_a_module_still_in_use_after_the_holders_stop_fails_with_the_fix() -> None:
    transport = ScriptedTransport({"modprobe -r": [
        (1, "", "modprobe: FATAL: Module nvidia is in use.")]})
    ctx = HostContext(HostTarget("vm-1", "10.0.0.5", "vgpu"), transport,
                      GuestRequirements(steps=()))
    with pytest.raises(StepFailed) as failed:
        release_driver(ctx, DriverStep())
    holders = ("xargs -r docker stop", "systemctl stop nvidia-gridd",
               "systemctl stop nvidia-persistenced", "modprobe -r nvidia_uvm")
    assert [len(transport.ran(h)) for h in holders] == [1, 1, 1, 1]
    assert [transport.commands.index(transport.ran(h)[0]) for h in holders] == [0, 1, 2, 3]
    assert failed.value.message == (
        "nvidia.ko stays loaded after stopping GPU containers, nvidia-gridd and "
        "nvidia-persistenced: `modprobe -r nvidia_uvm nvidia_drm nvidia_modeset nvidia` "
        "exited 1: modprobe: FATAL: Module nvidia is in use.")
    assert "sudo nvidia-uninstall" in str(failed.value.fix)


def test_vgpu_guests_are_judged_against_the_inventory_host_vib_passthrough_ones_not(
        tmp_path: Path) -> None:
    files = driver_files(tmp_path)
    inv = sim_inventory(**files, host_driver_version="570.133.10",
                    compatible_guest_branches=[535])  # type: ignore[arg-type]
    vgpu = scenario_jobs("mig_7x1g", inv, tmp_path)[0].requirements
    assert (vgpu.host_driver_version, vgpu.compatible_guest_branches) == ("570.133.10", (535,))
    passthrough = scenario_jobs("passthrough_1gpu", inv, tmp_path)[0].requirements
    assert passthrough.host_driver_version is None  # no vGPU Manager between it and the GPU
