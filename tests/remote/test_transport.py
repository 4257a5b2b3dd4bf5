"""The Transport contract against a real sshd (SSHTransport) and a subprocess
(LocalTransport): commands, sudo, atomic files, streaming processes, connection loss."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.labs.connect import FAST
from tests.labs.fixtures import ssh_lab
from tests.labs.sshlab import SshLab, lab_available
from tests.provision.lab_jobs import SUDO_ENV, SUDO_PASSWORD, target
from vgpu.remote.errors import AuthError, CommandTimeout, ConnectionLost
from vgpu.remote.hostlog import HostLog
from vgpu.remote.local import LocalTransport
from vgpu.remote.redact import Redactor
from vgpu.remote.ssh import SSHTransport
from vgpu.remote.targets import JumpHost
from vgpu.remote.transport import SudoSettings, Transport

pytestmark = [pytest.mark.sshd,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]


lab = ssh_lab(2, scope="module", sudo_password=SUDO_PASSWORD, guest_sim=False)


@pytest.fixture(autouse=True)
def _sudo_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SUDO_ENV, SUDO_PASSWORD)


def ssh(lab: SshLab, tmp_path: Path, index: int = 0, **changes: object) -> SSHTransport:
    host = lab.hosts[index]
    transport = SSHTransport(target(host, with_sudo=True, **changes), FAST,
                             HostLog(tmp_path / f"{host.name}.log", Redactor()))
    transport.connect()
    return transport


@pytest.fixture(params=["ssh", "local"])
def transport(request: pytest.FixtureRequest, lab: SshLab, tmp_path: Path
              ) -> Iterator[tuple[Transport, Path]]:
    """A transport and the home directory its relative paths resolve against."""
    if request.param == "ssh":
        t: Transport = ssh(lab, tmp_path)
        home = lab.hosts[0].home
    else:
        home = tmp_path / "home"
        home.mkdir()
        t = LocalTransport("local", log=HostLog(tmp_path / "local.log", Redactor()), home=home)
    yield t, home
    t.close()


def test_run_reports_exit_code_output_and_duration(transport: tuple[Transport, Path]) -> None:
    t, _ = transport
    result = t.run("echo out; echo err >&2; sleep 0.1; exit 3")
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert 0.1 <= result.duration < 5
    assert t.run("cat", stdin="piped\n").stdout == "piped\n"


def test_timeout_abandons_the_command_and_the_transport_still_works(
        transport: tuple[Transport, Path]) -> None:
    t, _ = transport
    started = time.monotonic()
    with pytest.raises(CommandTimeout, match="still running"):
        t.run("sleep 5", timeout=0.5)
    assert time.monotonic() - started < 3
    assert t.run("echo alive").stdout == "alive\n"


def test_put_replaces_atomically_with_mode_and_get_reads_back(
        transport: tuple[Transport, Path], tmp_path: Path) -> None:
    t, home = transport
    t.put(b"first\n", "~/conf/app.conf", mode=0o600)
    t.put("second\n", "~/conf/app.conf", mode=0o640)
    target_file = home / "conf" / "app.conf"
    assert target_file.read_text() == "second\n"
    assert target_file.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in (home / "conf").iterdir()) == ["app.conf"]  # no temp left
    t.get("~/conf/app.conf", tmp_path / "copy.conf")
    assert (tmp_path / "copy.conf").read_text() == "second\n"


def test_long_running_process_line_protocol_and_kill(transport: tuple[Transport, Path]) -> None:
    t, _ = transport
    process = t.open_process("sh -c 'echo READY; read cmd; echo \"got $cmd\"; sleep 60'")
    try:
        assert process.read_line(10) == "READY"
        process.write_line("GO 1700000000.5")
        assert process.read_line(10) == "got GO 1700000000.5"
        with pytest.raises(TimeoutError):
            process.read_line(0.3)
        started = time.monotonic()
        process.kill(grace=2)
        assert process.wait(5) != 0
        assert time.monotonic() - started < 5
    finally:
        process.close()


def test_sudo_with_password_from_environment_never_logged(lab: SshLab, tmp_path: Path) -> None:
    t = ssh(lab, tmp_path)
    try:
        result = t.run("id -u", sudo=True)
        assert result.stdout.strip() == "0"
        t.put("root-owned\n", f"{lab.hosts[0].home}/sys/etc/x.conf", mode=0o644, sudo=True)
        written = lab.hosts[0].home / "sys" / "etc" / "x.conf"
        assert written.read_text() == "root-owned\n"
        assert (written.stat().st_uid, written.stat().st_mode & 0o777) == (0, 0o644)
        assert t.run(f"echo {SUDO_PASSWORD}").stdout.strip() == "***"
    finally:
        t.close()
    assert SUDO_PASSWORD not in (tmp_path / f"{lab.hosts[0].name}.log").read_text()


def test_wrong_sudo_password_is_an_auth_error(lab: SshLab, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SUDO_ENV, "not-the-password")
    t = ssh(lab, tmp_path)
    try:
        with pytest.raises(AuthError, match="sudo rejected the password"):
            t.run("true", sudo=True)
    finally:
        t.close()


def test_sudo_that_needs_a_password_without_one_says_how_to_fix(lab: SshLab,
                                                                tmp_path: Path) -> None:
    t = ssh(lab, tmp_path, sudo=SudoSettings())
    try:
        with pytest.raises(AuthError) as info:
            t.run("true", sudo=True)
        assert "sudo_password" in str(info.value.fix)
    finally:
        t.close()


def test_idle_connection_drop_is_reconnected_transparently(lab: SshLab,
                                                           tmp_path: Path) -> None:
    t = ssh(lab, tmp_path)
    try:
        assert t.run("echo one").ok
        assert lab.hosts[0].drop_sessions() >= 1
        time.sleep(0.2)
        assert t.run("echo two").stdout == "two\n"
    finally:
        t.close()


def test_drop_during_a_command_raises_connection_lost(lab: SshLab, tmp_path: Path) -> None:
    t = ssh(lab, tmp_path)
    errors: list[BaseException] = []

    def long_command() -> None:
        try:
            t.run("sleep 10")
        except BaseException as exc:  # collected for the assertion below
            errors.append(exc)

    worker = threading.Thread(target=long_command)
    worker.start()
    time.sleep(0.5)
    lab.hosts[0].drop_sessions()
    worker.join(10)
    try:
        assert not worker.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], ConnectionLost)
        assert "re-run" in str(errors[0].fix)
        t.reconnect()
        assert t.run("echo back").ok
    finally:
        t.close()


def test_jump_host_tunnels_to_the_target(lab: SshLab, tmp_path: Path) -> None:
    jump_host = lab.hosts[0]
    jump = JumpHost(address=jump_host.address, port=jump_host.port, user=jump_host.user,
                    key_file=jump_host.key_path)
    t = ssh(lab, tmp_path, index=1, jump=jump)
    try:
        assert t.run("id -un").stdout.strip() == lab.hosts[1].user
        # The target saw the connection come from the jump host's sshd, not from here.
        assert t.run("echo $SSH_CONNECTION").stdout.split()[0] == "127.0.0.1"
    finally:
        t.close()


def test_local_transport_sudo_prefix_runs_as_root(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root for password-less sudo")
    t = LocalTransport("local", home=tmp_path)
    assert t.run("id -u", sudo=True).stdout.strip() == "0"
