"""The SSH lab itself: hosts are isolated from each other, and everything it created is
gone after it exits (other suites reuse it, so leaks would pile up)."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

from tests.labs.sshlab import SshLab

pytestmark = pytest.mark.sshd


def user_exists(name: str) -> bool:
    return subprocess.run(["id", name], capture_output=True, check=False).returncode == 0


def test_lab_hosts_are_isolated_and_removed_on_exit() -> None:
    with SshLab(2) as lab:
        first, second = lab.hosts
        assert (first.address, second.address) == ("127.0.0.11", "127.0.0.12")
        assert first.user != second.user and first.home != second.home
        assert first.host_key_path.read_text() != second.host_key_path.read_text()
        assert (first.bin_dir / "nvidia-smi").exists()
        pids = [h.process.pid for h in lab.hosts if h.process is not None]
        homes, users, sudoers = [h.home for h in lab.hosts], [h.user for h in lab.hosts], \
            lab.sudoers_path
        ports = [(h.address, h.port) for h in lab.hosts]
        assert sudoers.exists() and all(user_exists(u) for u in users)
    assert not sudoers.exists()
    assert not any(user_exists(u) for u in users)
    assert not any(Path(h).exists() for h in homes)
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or _is_zombie(pid)
    for address, port in ports:
        with socket.socket() as sock:
            assert sock.connect_ex((address, port)) != 0
    assert not lab.dir.exists()


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_lab_guard_refuses_root_writes_outside_the_host(tmp_path: Path) -> None:
    outside = tmp_path / "must-not-exist"
    with SshLab(1) as lab:
        host = lab.hosts[0]
        done = subprocess.run(
            ["ssh", "-i", str(host.key_path), "-o", f"UserKnownHostsFile={host.known_hosts_path}",
             "-o", "BatchMode=yes", "-p", str(host.port), f"{host.user}@{host.address}",
             f"sudo -n sh -c 'echo x > {host.home}/ok && mv {host.home}/ok {outside}'"],
            capture_output=True, text=True, check=False, timeout=30,
        )
        assert done.returncode != 0 and "lab guard" in done.stderr
        assert not outside.exists()
