"""The NVIDIA driver on a stock Ubuntu 22.04 guest: nouveau loaded, an HWE kernel built by
gcc-12 while the distribution's gcc is 11, no headers, no DKMS. The step installs what the
build needs, blacklists nouveau, rebuilds the initramfs, reboots the guest, reconnects and
goes on to install the driver with --dkms; a second run changes nothing."""

from __future__ import annotations

import subprocess
from functools import partial
from pathlib import Path

import pytest

from tests.labs.fixtures import ssh_lab
from tests.labs.sshlab import SshLab
from tests.provision.lab_jobs import GA_KERNEL, HWE_KERNEL, provision_lab
from vgpu.provision.facts import OsFacts
from vgpu.provision.reboot import reboot_and_reconnect
from vgpu.provision.requirements import GuestRequirements
from vgpu.provision.step import HostContext, Outcome, StepFailed
from vgpu.provision.steps.kernel import NOUVEAU_BLACKLIST_TEXT, kernel_gcc_major
from vgpu.provision.steps.nvidia import DriverStep
from vgpu.remote.local import LocalTransport
from vgpu.remote.targets import HostTarget

STEPS = ("os-facts", "nvidia-driver", "verify-gpu")


def test_kernel_gcc_from_proc_version() -> None:
    assert kernel_gcc_major(HWE_KERNEL) == 12
    assert kernel_gcc_major(GA_KERNEL) == 11
    assert kernel_gcc_major("Linux version 5.14.0-427.el9.x86_64 (mockbuild@x) (gcc (GCC) "
                            "11.4.1 20231218 (Red Hat 11.4.1-3), GNU ld version 2.35.2)") == 11
    assert kernel_gcc_major("Linux version 5.4.0 (gcc version 9.4.0 (Ubuntu 9.4.0-1ubuntu1~20"
                            ".04.2)) #1 SMP") == 9
    assert kernel_gcc_major("Linux version 6.1.0 (clang version 17.0.6)") is None


lab = ssh_lab(1, prepare=lambda lab: lab.hosts[0].set_kernel(HWE_KERNEL, nouveau=True))


provision = partial(provision_lab, steps=STEPS, reboot_timeout_s=60)


@pytest.mark.sshd
def test_stock_ubuntu_guest_is_rebooted_and_gets_the_driver_with_dkms(
        lab: SshLab, tmp_path: Path) -> None:
    host = lab.hosts[0]
    kernel = subprocess.run(["uname", "-r"], capture_output=True, text=True,
                            check=True).stdout.strip()
    first = provision(lab, tmp_path, "first")
    assert first.exit_code == 0, first.failure_lines()
    assert lab.reboot_errors == []
    assert host.reboots == 1
    driver = first.hosts[0].step("nvidia-driver")
    assert (driver.outcome, driver.detail, driver.attempts) == (Outcome.CHANGED,
                                                                "driver 535.154.05", 1)
    assert first.hosts[0].step("verify-gpu").detail == "GRID A100D-1-10C; MIG 1g.10gb"
    assert {"build-essential", "dkms", f"linux-headers-{kernel}", "gcc-12"} <= \
        host.installed_packages()
    blacklist = host.system_root / "etc/modprobe.d/blacklist-nouveau.conf"
    assert blacklist.read_text() == NOUVEAU_BLACKLIST_TEXT
    assert not (host.system_root / "sys/module/nouveau").exists()
    assert (host.sim_state / "installer_args").read_text().split() == ["--silent", "--dkms"]
    log = (tmp_path / "first" / "vm-1.log").read_text()
    assert log.index("update-initramfs -u") < log.index("systemctl reboot") < \
        log.index("back after the reboot") < log.index("CC=gcc-12 sh ")

    again = provision(lab, tmp_path, "second")
    assert again.exit_code == 0 and again.hosts[0].count(Outcome.CHANGED) == 0
    assert host.reboots == 1


@pytest.mark.sshd
def test_without_nouveau_loaded_no_reboot_is_needed(lab: SshLab, tmp_path: Path) -> None:
    host = lab.hosts[0]
    host.set_kernel(GA_KERNEL, nouveau=False)
    report = provision(lab, tmp_path, "ga")
    assert report.exit_code == 0, report.failure_lines()
    assert host.reboots == 0
    assert "gcc-11" in host.installed_packages()
    assert (host.system_root / "etc/modprobe.d/blacklist-nouveau.conf").exists()


def test_the_machine_vgpu_runs_on_is_never_rebooted(tmp_path: Path) -> None:
    local = LocalTransport("local", home=tmp_path)
    ctx = HostContext(HostTarget("local", "local", "me"), local, GuestRequirements(steps=()))
    ctx.os = OsFacts("ubuntu", "22.04", "6.5.0-41-generic", 8, 1 << 24, "apt-get",
                     str(tmp_path), str(tmp_path / "root"), "amd64")
    with pytest.raises(StepFailed) as failed:
        reboot_and_reconnect(ctx, DriverStep(), "nouveau is loaded")
    assert "this machine needs a reboot" in failed.value.message
    assert "run `vgpu provision` again" in str(failed.value.fix)
