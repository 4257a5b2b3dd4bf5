"""EFI Secure Boot on: the unsigned nvidia.ko the installer builds would not load, so
nvidia-driver refuses before changing anything, with the fix (Secure Boot off on the VM,
or a signed module)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.labs.connect import FAST
from tests.labs.sshlab import SshLab
from tests.provision.lab_jobs import jobs, requirements
from vgpu.provision.fanout import provision_all
from vgpu.provision.report import RunReport
from vgpu.provision.steps.kernel import secure_boot_enabled

pytestmark = pytest.mark.sshd


@pytest.fixture
def lab() -> Iterator[SshLab]:
    with SshLab(1) as lab:
        lab.hosts[0].set_sim("secure-boot", "enabled")
        yield lab


def provision(lab: SshLab, tmp: Path, name: str) -> RunReport:
    req = requirements(tmp / "files", steps=("os-facts", "nvidia-driver"))
    return provision_all(jobs(lab, req), options=FAST, log_dir=tmp / name,
                         state_dir=tmp / "state", concurrency=1)


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
