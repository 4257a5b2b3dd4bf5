"""Step container-runtime:docker on a lab guest whose docker socket admits only root and the
docker group (as on Ubuntu): the step puts the login user in the group, reconnects so the
group applies, and proves `docker info` as that user."""

from __future__ import annotations

import subprocess
from functools import partial
from pathlib import Path

import pytest

from tests.labs.fixtures import ssh_lab
from tests.labs.sshlab import LabHost, SshLab
from tests.provision.lab_jobs import provision_lab
from vgpu.provision.step import Outcome
from vgpu.provision.steps.system import parse_docker_access

pytestmark = pytest.mark.sshd
STEPS = ("os-facts", "container-runtime:docker")


lab = ssh_lab(1)


provision = partial(provision_lab, steps=STEPS)


def ssh(host: LabHost, command: str) -> subprocess.CompletedProcess[str]:
    """A new login on the lab host, as a later `docker build` over SSH would make."""
    return subprocess.run(
        ["ssh", "-i", str(host.key_path), "-o", f"UserKnownHostsFile={host.known_hosts_path}",
         "-o", "BatchMode=yes", "-p", str(host.port), f"{host.user}@{host.address}", command],
        capture_output=True, text=True, check=False, timeout=60)


def test_login_user_joins_the_docker_group_and_may_use_docker(lab: SshLab,
                                                               tmp_path: Path) -> None:
    host = lab.hosts[0]
    first = provision(lab, tmp_path, "first")
    assert first.exit_code == 0, first.failure_lines()
    step = first.hosts[0].step("container-runtime:docker")
    assert step.outcome is Outcome.CHANGED
    assert step.detail == f"docker installed and active; {host.user} may use it"
    assert "docker" in subprocess.run(["id", "-nG", host.user], capture_output=True,
                                      text=True, check=True).stdout.split()
    info = ssh(host, "docker info")
    assert info.returncode == 0, info.stderr
    assert "Runtimes:" in info.stdout

    again = provision(lab, tmp_path, "second")
    assert again.hosts[0].step("container-runtime:docker").outcome is Outcome.OK


def test_docker_socket_refuses_a_user_outside_the_group(lab: SshLab, tmp_path: Path) -> None:
    host = lab.hosts[0]
    assert ssh(host, "sudo -n apt-get install -y docker.io && sudo -n systemctl enable --now "
               "docker").returncode == 0
    refused = ssh(host, "docker info")
    assert refused.returncode == 1 and "permission denied" in refused.stderr
    assert ssh(host, "sudo -n docker info").returncode == 0
    report = provision(lab, tmp_path, "join")
    assert report.exit_code == 0, report.failure_lines()
    assert ssh(host, "docker info").returncode == 0


def test_docker_access_reads_session_and_database_groups() -> None:
    joined_later = parse_docker_access("vgpu\nvgpu adm sudo\nvgpu adm sudo docker\n")
    assert (joined_later.user, joined_later.in_session, joined_later.member) == \
        ("vgpu", False, True)
    assert not joined_later.granted
    assert parse_docker_access("vgpu\nvgpu docker\nvgpu docker\n").granted
    assert parse_docker_access("root\nroot\nroot\n").granted
