"""Failures: a connection dropped in the middle of a step, bad local inputs, an unreachable
host, a host whose key changed. Each is retried or reported with host, step and fix; one
failing host never stops the others; no config file is ever left half-written."""

from __future__ import annotations

import threading
import time
from functools import partial
from pathlib import Path

import pytest

from tests.labs.connect import FAST
from tests.labs.fixtures import ssh_lab
from tests.labs.sshlab import SshLab
from tests.provision.lab_jobs import (
    SUDO_ENV,
    SUDO_PASSWORD,
    jobs,
    leftover_temp_files,
    provision_jobs,
    requirements,
    serve_toolkit_key,
    target,
)
from vgpu.errors import InputError
from vgpu.provision.fanout import Job, provision_all
from vgpu.provision.report import RunReport
from vgpu.provision.step import Outcome
from vgpu.remote.targets import ConnectOptions

pytestmark = pytest.mark.sshd


lab = ssh_lab(2, prepare=serve_toolkit_key, sudo_password=SUDO_PASSWORD)


@pytest.fixture(autouse=True)
def _sudo_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SUDO_ENV, SUDO_PASSWORD)


provision = partial(provision_jobs, scenario="t", concurrency=4, log_folder="logs")


def drop_when_started(lab: SshLab, marker: str, work: threading.Thread) -> None:
    """Kill host 1's SSH connections once its simulator signals that ``marker`` began."""
    started = lab.hosts[0].sim_state / f"started-{marker}"
    deadline = time.monotonic() + 30
    while not started.exists():
        assert work.is_alive() and time.monotonic() < deadline, "step never started"
        time.sleep(0.02)
    assert lab.hosts[0].drop_sessions() >= 1


@pytest.mark.slow
@pytest.mark.parametrize(("marker", "step"), [("driver", "nvidia-driver"),
                                              ("nvidia-gridd", "vgpu-licensing")])
def test_connection_dropped_mid_step_is_retried_and_leaves_no_half_files(
        lab: SshLab, tmp_path: Path, marker: str, step: str) -> None:
    lab.hosts[0].set_sim(f"delay-{marker}", "1")
    job_list = jobs(lab, requirements(tmp_path / "files"), sudo=True)
    reports: list[RunReport] = []
    work = threading.Thread(target=lambda: reports.append(provision(job_list, tmp_path, "1")))
    work.start()
    drop_when_started(lab, marker, work)
    lab.hosts[0].set_sim(f"delay-{marker}", None)
    work.join(60)
    report = reports[0]
    assert report.exit_code == 0, report.failure_lines()
    dropped = report.hosts[0].step(step)
    assert dropped.outcome is Outcome.CHANGED and dropped.attempts >= 2
    assert "attempt 1" in (tmp_path / "logs" / "1" / "vm-1.log").read_text()
    assert all(s.attempts == 1 for s in report.hosts[1].steps)  # the other host: untouched
    assert leftover_temp_files(lab) == []
    gridd = lab.hosts[0].system_root / "etc/nvidia/gridd.conf"
    template = lab.hosts[0].system_root / "etc/nvidia/gridd.conf.template"
    assert gridd.read_text() == template.read_text().replace("FeatureType=0", "FeatureType=1")

    again = provision(job_list, tmp_path, "2")
    assert again.exit_code == 0
    assert [h.count(Outcome.CHANGED) for h in again.hosts] == [0, 0]


def test_bad_local_files_are_input_errors_naming_host_step_and_fix(
        lab: SshLab, tmp_path: Path) -> None:
    req = requirements(tmp_path / "files", driver_source=str(tmp_path / "missing.run"),
                       licence_token_file=tmp_path / "nope.tok")
    with pytest.raises(InputError) as info:
        provision(jobs(lab, req, sudo=True), tmp_path, "bad")
    text = str(info.value)
    assert info.value.exit_code == 2
    assert "2 hosts (vm-1, vm-2), step nvidia-driver: driver file" in text \
        and "missing.run" in text
    assert "2 hosts (vm-1, vm-2), step vgpu-licensing: token file" in text \
        and "nope.tok" in text
    assert "drivers.licence_token" in text and "fix:" in text
    assert all(not h.installed_packages() for h in lab.hosts)  # nothing was touched
    assert not (tmp_path / "logs").exists()


def test_missing_sudo_password_is_an_input_error(lab: SshLab, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SUDO_ENV)
    with pytest.raises(InputError, match=f"{SUDO_ENV} is not set"):
        provision(jobs(lab, requirements(tmp_path / "f"), sudo=True), tmp_path, "nopw")


def test_unreachable_and_rekeyed_hosts_fail_alone(lab: SshLab, tmp_path: Path) -> None:
    req = requirements(tmp_path / "files", steps=("os-facts", "base-packages"))
    ghost = target(lab.hosts[1], name="ghost", address="127.0.0.250")
    lab.hosts[1].rotate_host_key()
    job_list = [Job(target(lab.hosts[0], with_sudo=True), req), Job(ghost, req),
                Job(target(lab.hosts[1], with_sudo=True), req)]
    report = provision(job_list, tmp_path, "mixed",
                       options=ConnectOptions(connect_timeout=2, retries=1, backoff=0.05))
    assert report.exit_code == 1
    ok, ghost_report, rekeyed = report.hosts
    assert not ok.failed and ok.step("base-packages").outcome is Outcome.CHANGED
    assert ghost_report.failure is not None and ghost_report.failure.step == "connect"
    assert "cannot reach" in ghost_report.failure.detail and "2 attempts" in \
        ghost_report.failure.detail
    assert "powered on" in str(ghost_report.failure.fix)
    assert rekeyed.failure is not None and "HOST KEY CHANGED" in rekeyed.failure.detail
    assert "ssh-keygen -R" in str(rekeyed.failure.fix)
    lines = report.failure_lines()
    assert len(lines) == 2
    assert lines[0].startswith("ghost (127.0.0.250) step connect:") and "[log: " in lines[0]
    assert lines[1].startswith("vm-2 (") and "ssh-keygen -R" in lines[1]


def test_password_less_ssh_between_the_scenario_vms(tmp_path: Path) -> None:
    with SshLab(3) as lab:
        req = requirements(tmp_path / "files", steps=("os-facts", "passwordless-ssh"))
        first = provision(jobs(lab, req), tmp_path, "mesh1")
        assert first.exit_code == 0, first.failure_lines()
        for host in first.hosts:
            step = host.step("passwordless-ssh")
            assert step.outcome is Outcome.CHANGED and "reached 2 peers" in step.detail
        second = provision(jobs(lab, req), tmp_path, "mesh2")
        assert [h.step("passwordless-ssh").outcome for h in second.hosts] == [Outcome.OK] * 3
        everyone = jobs(lab, req)
        one = provision_all(everyone[:1], options=FAST, log_dir=tmp_path / "mesh3",
                            state_dir=tmp_path / "state", scenario="t",
                            mesh_members=everyone)  # one VM again: its peers stay listed
        assert one.hosts[0].step("passwordless-ssh").outcome is Outcome.OK
        key = (tmp_path / "state" / "ssh-mesh" / "t" / "id_ed25519.pub").read_text().strip()
        for host in lab.hosts:
            assert key in (host.home / ".ssh" / "authorized_keys").read_text()
            config = (host.home / ".ssh" / "config").read_text()
            assert config.count("# >>> vgpu scenario t >>>") == 1


def test_missing_ssh_key_is_an_input_error(lab: SshLab, tmp_path: Path) -> None:
    job = Job(target(lab.hosts[0], key_file=tmp_path / "no_key"),
              requirements(tmp_path / "f", steps=("os-facts",)))
    with pytest.raises(InputError, match=r"ssh.key_file: host vm-1, SSH key .*no_key does not"):
        provision([job], tmp_path, "nokey")
