"""The MIG helper on a bare-metal host reached over real SSH (the loopback sshd lab) with
sudo, as `vgpu` drives a remote baseline host: a simulated GPU stands in for the host's."""

from __future__ import annotations

import ctypes.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.labs.connect import FAST
from tests.labs.sshlab import SshLab, lab_available
from tests.provision.lab_jobs import SUDO_ENV, SUDO_PASSWORD, target
from vgpu import catalog
from vgpu.nvml.remote import RemoteMig, apply_plan_on_host
from vgpu.nvml.simulator import SimulatedGpuBackend
from vgpu.planner import build_plan
from vgpu.remote.hostlog import HostLog
from vgpu.remote.redact import Redactor
from vgpu.remote.ssh import SSHTransport

pytestmark = [
    pytest.mark.sshd,
    pytest.mark.skipif(lab_available() is not None, reason=str(lab_available())),
    pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None,
                       reason="gpu: a real NVIDIA driver is present"),
]


@pytest.fixture
def ssh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SSHTransport]:
    monkeypatch.setenv(SUDO_ENV, SUDO_PASSWORD)
    with SshLab(1, sudo_password=SUDO_PASSWORD, guest_sim=False) as lab:
        host = lab.hosts[0]
        transport = SSHTransport(target(host, with_sudo=True), FAST,
                                 HostLog(tmp_path / "host.log", Redactor()))
        transport.connect()
        try:
            yield transport
        finally:
            transport.close()


def test_bm6_layout_over_ssh_with_sudo(tmp_path: Path, ssh: SSHTransport) -> None:
    sim_state = tmp_path / "simgpu.json"
    SimulatedGpuBackend(["A100-80GB"], state_file=sim_state, mig_enabled=True)
    env = {"VGPU_GPU_SIMULATOR": "A100-80GB", "VGPU_GPU_SIMULATOR_STATE": str(sim_state),
           "VGPU_STATE_DIR": str(tmp_path / "state")}
    plan = build_plan(catalog.load("bm6"))

    [applied] = apply_plan_on_host(ssh, plan, plan.hosts[0], python=sys.executable, env=env)

    assert applied["simulated"] is True
    assert sorted((c["owner"], c["profile"], c["start"]) for c in applied["created"]) == [
        ("bm6-1g", "1g.10gb", 6), ("bm6-2g", "2g.20gb", 4), ("bm6-4g", "4g.40gb", 0)]
    remote = RemoteMig(ssh, python=sys.executable, env=env)
    assert sorted(d["owner"] for d in remote.mig_devices()) == ["bm6-1g", "bm6-2g", "bm6-4g"]
    remote.destroy(0)
    assert json.loads(sim_state.read_text())["gpus"][0]["instances"] == []
