"""EFI Secure Boot on: the unsigned nvidia.ko the installer builds would not load, so
nvidia-driver refuses before changing anything, with the fix (Secure Boot off on the VM,
or a signed module)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from tests.labs.fixtures import ssh_lab
from tests.labs.sshlab import SshLab
from tests.provision.lab_jobs import provision_lab
from vgpu.provision.steps.kernel import secure_boot_enabled

pytestmark = pytest.mark.sshd


lab = ssh_lab(1, prepare=lambda lab: lab.hosts[0].set_sim("secure-boot", "enabled"))


provision = partial(provision_lab, steps=("os-facts", "nvidia-driver"))


def test_secure_boot_guest_is_refused_with_the_fix_and_left_alone(lab: SshLab,
                                                                    tmp_path: Path) -> None:
    host = lab.hosts[0]
    report = provision(lab, tmp_path, "on")
    failure = report.hosts[0].failure
    assert report.exit_code == 1 and failure is not None and failure.step == "nvidia-driver"
    assert failure.detail == ("`mokutil --sb-state` says SecureBoot enabled: the driver's "
                              "unsigned nvidia.ko would not load")
    assert "bootOptions.efiSecureBootEnabled = false" in str(failure.fix)
    assert "sign nvidia.ko" in str(failure.fix)
    assert host.installed_packages() == set()
    assert not (host.sim_state / "driver_version").exists()
    assert not (host.system_root / "etc").exists() and host.reboots == 0

    host.set_sim("secure-boot", None)
    off = provision(lab, tmp_path, "off")
    assert off.exit_code == 0, off.failure_lines()


def test_mokutil_states() -> None:
    assert secure_boot_enabled("SecureBoot enabled\n")
    assert not secure_boot_enabled("SecureBoot disabled\n")
    assert not secure_boot_enabled("EFI variables are not supported on this system\n")
