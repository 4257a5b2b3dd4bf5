"""A simulator guest's docker (vgpu/sim/guest_tools/docker) forwarding to a real daemon:
the one `vgpu sim up` starts, here the test suite's docker lab. The guest's home is a folder
of this machine seen under another path inside the guest; the tool must turn its bind
mounts into that folder, drop `--gpus` only once the simulated NVIDIA runtime is set up,
and label every container with the guest's VM so `vgpu sim down` finds them."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.labs.dockerlab import BASE_TAG, HarnessLab
from vgpu.sim import dockerd, guests

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(2400)]


def guest_home(tmp_path: Path, daemon_host: str, real_home: Path) -> Path:
    """A guest home with the simulated tools and docker.io 'installed', its docker file
    naming the daemon and ``real_home`` as where that home lives on this machine."""
    home = tmp_path / "guest-home"
    guests.install_tools(home / guests.SIM_BIN)
    state = home / ".gpu-sim"
    (state / "packages").mkdir(parents=True)
    (state / "services").mkdir()
    (state / "packages" / "docker.io").touch()
    (state / "services" / "docker.active").touch()
    (state / "hardware").write_text(guests.hardware_text("vm-a", "A100D-1-10C", "1g.10gb"))
    lock = tmp_path / "build.lock"
    lock.touch()
    (state / "docker").write_text(f"host={daemon_host}\nhome={real_home}\nvm=vm-a\n"
                                  f"lock={lock}\n")
    return home


def guest_docker(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{home / guests.SIM_BIN}:/usr/bin:/bin"}
    return subprocess.run(["docker", *args], capture_output=True, text=True, env=env,
                          timeout=300, check=False)


def test_a_guest_container_sees_the_guests_home_is_labelled_and_needs_the_runtime(
        docker_lab: HarnessLab, tmp_path: Path) -> None:
    lab = docker_lab.lab
    real_home = tmp_path / "real-home"
    (real_home / "work").mkdir(parents=True)
    (real_home / "work" / "spec.json").write_text('{"from": "the real folder"}\n')
    home = guest_home(tmp_path, f"unix://{lab.socket}", real_home)
    name = f"vgpu-sim-test-{uuid.uuid4().hex[:8]}"
    run = ("run", "--name", name, "--gpus", '"device=MIG-1"', "--network", "none",
           "-v", f"{home}/work:/work", BASE_TAG, "cat", "/work/spec.json")

    refused = guest_docker(home, *run)
    assert refused.returncode == 125
    assert 'could not select device driver "" with capabilities: [[gpu]]' in refused.stderr

    daemon_json = home / "sysroot" / "etc" / "docker" / "daemon.json"
    daemon_json.parent.mkdir(parents=True)
    daemon_json.write_text('{"runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}}')
    try:
        ran = guest_docker(home, *run)
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == '{"from": "the real folder"}'
        label = lab.docker("inspect", "--format",
                           f'{{{{index .Config.Labels "{dockerd.GUEST_LABEL}"}}}}', name)
        assert label.stdout.strip() == "vm-a"
        listed = lab.docker("ps", "-aq", "--filter", f"label={dockerd.GUEST_LABEL}=vm-a",
                            "--filter", f"name={name}")
        assert len(listed.stdout.split()) == 1
    finally:
        lab.docker("rm", "-f", name, check=False)


def test_without_a_real_daemon_the_guest_docker_says_what_it_cannot_do(
        tmp_path: Path) -> None:
    home = guest_home(tmp_path, "", tmp_path)
    (home / ".gpu-sim" / "docker").unlink()
    answered = guest_docker(home, "build", "-t", "x", ".")
    assert answered.returncode == 1
    assert "not supported by the lab simulator (this lab has no real daemon)" in \
        answered.stderr
    probe = guest_docker(home, "info")
    assert probe.returncode == 0 and "Runtimes: io.containerd.runc.v2 runc" in probe.stdout
