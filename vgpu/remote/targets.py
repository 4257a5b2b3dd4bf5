"""Who to provision and how to reach them: small value types the provisioning layer owns,
filled from the inventory/plan by ``vgpu.provision.adapter``."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vgpu.remote.transport import SudoSettings

DEFAULT_KNOWN_HOSTS = Path("~/.ssh/known_hosts")


@dataclass(frozen=True)
class JumpHost:
    address: str
    user: str
    port: int = 22
    key_file: Path | None = None


@dataclass(frozen=True)
class HostTarget:
    """One guest (VM or bare-metal host) reachable over SSH."""

    name: str
    address: str
    user: str
    port: int = 22
    key_file: Path | None = None  # None: use the SSH agent
    known_hosts: Path = DEFAULT_KNOWN_HOSTS
    jump: JumpHost | None = None
    sudo: SudoSettings = field(default_factory=SudoSettings)
    # Prefix for system paths (/etc, /usr/share). None: what the guest says (its
    # VGPU_SYSTEM_ROOT, else "/"). The loopback test lab sets that variable per host
    # because its simulated VMs share one filesystem.
    system_root: str | None = None

    @property
    def known_hosts_file(self) -> Path:
        return self.known_hosts.expanduser()


@dataclass(frozen=True)
class ConnectOptions:
    connect_timeout: float = 10.0
    command_timeout: float = 1800.0  # a driver build can take minutes
    keepalive_interval: int = 15
    retries: int = 3  # connection attempts after the first
    backoff: float = 1.0  # seconds; doubled after each failed attempt
    accept_new_host_keys: bool = False
