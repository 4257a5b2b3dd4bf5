"""/dev/nvidia-uvm appears only once CUDA or `nvidia-modprobe -u -c=0` loads nvidia-uvm: on
a freshly provisioned guest it is missing, and gpu-probe creates it before checking
instead of failing."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from tests.labs.fixtures import ssh_lab
from tests.labs.sshlab import SshLab
from tests.provision.lab_jobs import provision_lab, serve_toolkit_key
from vgpu.provision.requirements import HarnessImageSpec
from vgpu.provision.step import Outcome

pytestmark = pytest.mark.sshd
STEPS = ("os-facts", "container-runtime:docker", "nvidia-driver", "nvidia-container-toolkit",
         "gpu-probe")


lab = ssh_lab(1, prepare=serve_toolkit_key)


provision = partial(provision_lab, steps=STEPS, image=HarnessImageSpec(tag="vgpu-harness:t"))


def test_gpu_probe_creates_the_uvm_node_on_a_fresh_guest(lab: SshLab, tmp_path: Path) -> None:
    uvm = lab.hosts[0].system_root / "dev" / "nvidia-uvm"
    report = provision(lab, tmp_path, "first")
    assert report.exit_code == 0, report.failure_lines()
    probe = report.hosts[0].step("gpu-probe")
    assert probe.outcome is Outcome.OK
    assert probe.detail.endswith(": CUDA 12.6 via torch on GRID A100D-1-10C")
    assert uvm.exists()
    assert "$ sudo nvidia-modprobe -u -c=0" in (tmp_path / "first" / "vm-1.log").read_text()
    uvm.unlink()
    dry = provision(lab, tmp_path, "dry", dry_run=True)
    assert dry.hosts[0].step("gpu-probe").outcome is Outcome.WOULD_CHANGE
    assert not uvm.exists()


def test_uvm_module_that_does_not_load_fails_with_the_fix(lab: SshLab, tmp_path: Path) -> None:
    lab.hosts[0].set_sim("uvm-fails", "1")
    report = provision(lab, tmp_path, "fails")
    failure = report.hosts[0].failure
    assert failure is not None and failure.step == "gpu-probe"
    assert "/dev/nvidia-uvm is missing: CUDA cannot start in containers; `nvidia-modprobe -u " \
           "-c=0` exited 1: nvidia-modprobe: failed to load the kernel module nvidia-uvm" \
           in failure.detail
    assert "dmesg" in str(failure.fix)
