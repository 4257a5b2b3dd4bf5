"""Host keys: unknown hosts are refused unless new keys are explicitly accepted (then
recorded); a changed key is always refused with the host named and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.labs.connect import FAST
from tests.labs.fixtures import ssh_lab
from tests.labs.sshlab import SshLab, lab_available
from tests.provision.lab_jobs import target
from vgpu.remote.errors import HostKeyError
from vgpu.remote.hostlog import HostLog
from vgpu.remote.redact import Redactor
from vgpu.remote.ssh import SSHTransport
from vgpu.remote.targets import ConnectOptions

pytestmark = [pytest.mark.sshd,
              pytest.mark.skipif(lab_available() is not None, reason=str(lab_available()))]


lab = ssh_lab(2, guest_sim=False, trust_host_keys=False)


def connect(lab: SshLab, tmp_path: Path, accept_new: bool, index: int = 0) -> SSHTransport:
    host = lab.hosts[index]
    options = ConnectOptions(connect_timeout=FAST.connect_timeout, retries=0,
                             accept_new_host_keys=accept_new)
    transport = SSHTransport(target(host), options, HostLog(tmp_path / "h.log", Redactor()))
    transport.connect()
    return transport


def test_unknown_host_is_refused_and_nothing_recorded(lab: SshLab, tmp_path: Path) -> None:
    with pytest.raises(HostKeyError) as info:
        connect(lab, tmp_path, accept_new=False)
    error = info.value
    assert error.host == "vm-1"
    assert f"[{lab.hosts[0].address}]:{lab.hosts[0].port}" in error.message
    assert "not in" in error.message and "SHA256:" in error.message
    assert "--accept-new-host-keys" in str(error.fix)
    assert lab.known_hosts_path.read_text() == ""


def test_accepting_new_hosts_records_their_keys(lab: SshLab, tmp_path: Path) -> None:
    for index in (0, 1):
        transport = connect(lab, tmp_path, accept_new=True, index=index)
        assert transport.recorded_new_host_key
        transport.close()
    lines = lab.known_hosts_path.read_text().splitlines()
    assert lines == [lab.hosts[0].known_hosts_entry, lab.hosts[1].known_hosts_entry]
    again = connect(lab, tmp_path, accept_new=False)  # now known: no flag needed
    assert not again.recorded_new_host_key
    assert again.run("true").ok
    again.close()
    assert lab.known_hosts_path.read_text().splitlines() == lines  # nothing added twice


def test_changed_key_is_refused_even_when_accepting_new_ones(lab: SshLab,
                                                             tmp_path: Path) -> None:
    connect(lab, tmp_path, accept_new=True).close()
    recorded = lab.known_hosts_path.read_text()
    lab.hosts[0].rotate_host_key()
    with pytest.raises(HostKeyError) as info:
        connect(lab, tmp_path, accept_new=True)
    error = info.value
    name = f"[{lab.hosts[0].address}]:{lab.hosts[0].port}"
    assert error.host == "vm-1" and "HOST KEY CHANGED" in error.message and name in error.message
    assert f"ssh-keygen -R '{name}'" in str(error.fix)
    assert lab.known_hosts_path.read_text() == recorded  # the old key stays, untouched
