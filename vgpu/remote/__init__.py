"""Reaching a host: the Transport interface, its SSH (paramiko) and local (subprocess)
implementations, connection targets, host keys, per-host logs and secret redaction.
Provisioning, benchmarking, training and the NVML layer all run their commands through
it; none of them knows which transport it has."""

from typing import TYPE_CHECKING, Any

from vgpu.remote.errors import (
    AuthError,
    CommandFailed,
    CommandTimeout,
    ConnectionLost,
    HostKeyError,
    ProvisionError,
    UnreachableError,
)
from vgpu.remote.local import LocalTransport
from vgpu.remote.targets import ConnectOptions, HostTarget, JumpHost
from vgpu.remote.transport import CommandResult, RemoteProcess, SudoSettings, Transport

if TYPE_CHECKING:
    from vgpu.remote.ssh import SSHTransport


def __getattr__(name: str) -> Any:
    # paramiko takes about half a second to import: load it on first use only.
    if name == "SSHTransport":
        from vgpu.remote.ssh import SSHTransport

        return SSHTransport
    raise AttributeError(f"module 'vgpu.remote' has no attribute {name!r}")


__all__ = [
    "AuthError",
    "CommandFailed",
    "CommandResult",
    "CommandTimeout",
    "ConnectOptions",
    "ConnectionLost",
    "HostKeyError",
    "HostTarget",
    "JumpHost",
    "LocalTransport",
    "ProvisionError",
    "RemoteProcess",
    "SSHTransport",
    "SudoSettings",
    "Transport",
    "UnreachableError",
]
