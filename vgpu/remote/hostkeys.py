"""Host key verification against a known_hosts file. Unknown keys are refused unless the
caller explicitly accepts new hosts (then the key is recorded); changed keys always are."""

from __future__ import annotations

import threading
from pathlib import Path

import paramiko

from vgpu.remote.errors import HostKeyError

_file_lock = threading.Lock()  # several hosts may record their keys at the same moment


def known_hosts_name(address: str, port: int) -> str:
    return address if port == 22 else f"[{address}]:{port}"


def fingerprint(key: paramiko.PKey) -> str:
    return key.fingerprint  # "SHA256:..."


def unknown_host_error(host: str, address: str, port: int, known_hosts: Path,
                       key: paramiko.PKey) -> HostKeyError:
    return HostKeyError(
        host,
        f"host key for {known_hosts_name(address, port)} is not in {known_hosts} "
        f"({key.get_name()} {fingerprint(key)})",
        "verify the fingerprint, then re-run with --accept-new-host-keys to record it, or "
        f"add it with `ssh-keyscan -p {port} {address} >> {known_hosts}`",
    )


def changed_host_error(host: str, address: str, port: int, known_hosts: Path,
                       key: paramiko.PKey) -> HostKeyError:
    name = known_hosts_name(address, port)
    return HostKeyError(
        host,
        f"HOST KEY CHANGED for {name}: the server offered {key.get_name()} {fingerprint(key)}, "
        f"which differs from the key recorded in {known_hosts}; refusing to connect",
        f"if the VM was rebuilt, remove the old key with `ssh-keygen -R '{name}' -f "
        f"{known_hosts}` and re-run with --accept-new-host-keys",
    )


class KnownHostsPolicy(paramiko.MissingHostKeyPolicy):
    """Called by paramiko only for hosts with no recorded key."""

    def __init__(self, host: str, address: str, port: int, known_hosts: Path,
                 accept_new: bool) -> None:
        self.host = host
        self.address = address
        self.port = port
        self.known_hosts = known_hosts
        self.accept_new = accept_new
        self.recorded = False

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                         key: paramiko.PKey) -> None:
        if not self.accept_new:
            raise unknown_host_error(self.host, self.address, self.port, self.known_hosts, key)
        record_host_key(self.known_hosts, hostname, key)
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.recorded = True


def record_host_key(known_hosts: Path, hostname: str, key: paramiko.PKey) -> None:
    """Append one entry; never rewrites (or drops) existing lines."""
    with _file_lock:
        known_hosts.parent.mkdir(parents=True, exist_ok=True)
        existing = known_hosts.read_text() if known_hosts.exists() else ""
        prefix = "" if not existing or existing.endswith("\n") else "\n"
        with known_hosts.open("a") as handle:
            handle.write(f"{prefix}{hostname} {key.get_name()} {key.get_base64()}\n")


def load_known_hosts(known_hosts: Path) -> paramiko.HostKeys:
    keys = paramiko.HostKeys()
    if known_hosts.exists():
        keys.load(str(known_hosts))
    return keys


def lookup_key_lines(known_hosts: Path, address: str, port: int) -> list[str]:
    """``known_hosts`` lines (``name type base64``) for one host, for use on other hosts."""
    name = known_hosts_name(address, port)
    entry = load_known_hosts(known_hosts).lookup(name)
    if not entry:
        return []
    return [f"{name} {key_type} {key.get_base64()}" for key_type, key in entry.items()]
