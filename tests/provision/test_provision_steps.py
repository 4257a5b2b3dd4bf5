"""Individual steps on a real sshd host: driver fetched from a URL, apptainer, a VM with
the wrong MIG profile, the harness venv, and sudo passwords read from a file."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from tests.labs.connect import FAST
from tests.labs.fixtures import ssh_lab
from tests.labs.sshlab import SshLab, fake_driver_installer
from tests.provision.lab_jobs import SUDO_PASSWORD, jobs, provision_jobs, requirements, target
from vgpu.provision.requirements import GuestRequirements
from vgpu.provision.runner import provision_host
from vgpu.provision.step import Check, HostContext, Outcome, Step
from vgpu.provision.steps.harness import harness_paths
from vgpu.provision.steps.system import OsFactsStep
from vgpu.remote.errors import AuthError
from vgpu.remote.hostlog import HostLog
from vgpu.remote.local import LocalTransport
from vgpu.remote.redact import Redactor
from vgpu.remote.ssh import SSHTransport
from vgpu.remote.targets import HostTarget
from vgpu.remote.transport import SudoSettings

pytestmark = pytest.mark.sshd
DRIVER_URL = "https://downloads.example.com/NVIDIA-Linux-x86_64-550.54.15-grid.run"


lab = ssh_lab(1)


provision = partial(provision_jobs, concurrency=2)


def test_driver_from_url_apptainer_and_harness(lab: SshLab, tmp_path: Path) -> None:
    installer = fake_driver_installer(tmp_path, "550.54.15")
    lab.hosts[0].serve_url(DRIVER_URL, installer.read_bytes())
    req = requirements(tmp_path / "files", driver_source=DRIVER_URL, container_runtime="x",
                       steps=("os-facts", "container-runtime:apptainer", "nvidia-driver",
                              "node-harness", "verify-gpu"))
    report = provision(jobs(lab, req), tmp_path, "first")
    assert report.exit_code == 0, report.failure_lines()
    host = report.hosts[0]
    assert host.step("nvidia-driver").detail == "driver 550.54.15"
    assert "apptainer version" in host.step("container-runtime:apptainer").detail
    assert host.step("node-harness").outcome is Outcome.CHANGED
    home = lab.hosts[0].home
    paths = harness_paths(str(home))
    assert Path(paths["version"]).read_text().strip() == req.harness.version  # type: ignore[union-attr]
    assert (Path(paths["src"]) / "loadgen" / "__init__.py").exists()
    again = provision(jobs(lab, req), tmp_path, "second")
    assert again.hosts[0].count(Outcome.CHANGED) == 0


def test_wrong_mig_profile_fails_verification_with_fix(lab: SshLab, tmp_path: Path) -> None:
    lab.hosts[0].set_hardware("A100D-2-20C", "2g.20gb")
    req = requirements(tmp_path / "files", steps=("os-facts", "nvidia-driver", "verify-gpu"))
    report = provision(jobs(lab, req), tmp_path, "wrong")
    assert report.exit_code == 1
    failure = report.hosts[0].failure
    assert failure is not None and failure.step == "verify-gpu"
    assert "['2g.20gb'], want ['1g.10gb']" in failure.detail
    assert "A100D-2-20C" in failure.detail and "vgpu apply" in str(failure.fix)


def test_sudo_password_from_file(tmp_path: Path) -> None:
    secret = tmp_path / "sudo.pw"
    secret.write_text(f"{SUDO_PASSWORD}\n")
    assert SudoSettings(password_file=secret).read_password("h") == SUDO_PASSWORD
    with pytest.raises(AuthError, match="cannot read sudo password file"):
        SudoSettings(password_file=tmp_path / "absent").read_password("h")
    with SshLab(1, sudo_password=SUDO_PASSWORD, guest_sim=False) as lab:
        host_target = target(lab.hosts[0], sudo=SudoSettings(password_file=secret))
        transport = SSHTransport(host_target, FAST, HostLog(None, Redactor()))
        transport.connect()
        try:
            assert transport.run("id -u", sudo=True).stdout.strip() == "0"
        finally:
            transport.close()


def test_read_files_returns_exact_contents_in_one_command(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("no newline at end")
    (tmp_path / "b").write_text("two\nlines\n")
    local = LocalTransport("local", home=tmp_path)
    ctx = HostContext(HostTarget("local", "local", "me"), local, GuestRequirements(steps=()))
    files = ctx.read_files([str(tmp_path / "a"), str(tmp_path / "b"), str(tmp_path / "gone")])
    assert list(files.values()) == ["no newline at end", "two\nlines\n", ""]


class ExplodingStep(Step):
    name = "exploding"

    def check(self, ctx: HostContext) -> Check:
        raise RuntimeError("boom")


def test_unexpected_error_fails_that_host_only_and_is_logged(tmp_path: Path) -> None:
    log = HostLog(tmp_path / "local.log", Redactor())
    ctx = HostContext(HostTarget("local", "local", "me"),
                      LocalTransport("local", log=log, home=tmp_path),
                      GuestRequirements(steps=()))
    report = provision_host(ctx, [ExplodingStep(), OsFactsStep()], "local")
    assert [s.outcome for s in report.steps] == [Outcome.FAILED, Outcome.SKIPPED]
    assert report.steps[0].detail == "unexpected error: RuntimeError('boom')"
    assert "vgpu bug" in str(report.steps[0].fix)
    assert "Traceback" in (tmp_path / "local.log").read_text()
