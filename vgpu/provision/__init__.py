"""Guest provisioning over SSH: a transport (paramiko or local subprocess), idempotent
steps (facts -> check -> apply -> verify) and a bounded parallel fan-out."""

from typing import TYPE_CHECKING, Any

from vgpu.provision.errors import (
    AuthError,
    CommandFailed,
    CommandTimeout,
    ConnectionLost,
    HostKeyError,
    ProvisionError,
    UnreachableError,
)
from vgpu.provision.local import LocalTransport
from vgpu.provision.report import HostReport, RunReport, StepReport
from vgpu.provision.requirements import GuestRequirements, HarnessSpec
from vgpu.provision.step import Outcome
from vgpu.provision.targets import ConnectOptions, HostTarget, JumpHost
from vgpu.provision.transport import CommandResult, RemoteProcess, SudoSettings, Transport

if TYPE_CHECKING:
    from vgpu.provision.fanout import Job, provision_all
    from vgpu.provision.ssh import SSHTransport

# paramiko takes about half a second to import: the SSH names load on first use, so
# commands that never open an SSH session do not pay for it.
_LAZY = {"Job": "vgpu.provision.fanout", "provision_all": "vgpu.provision.fanout",
         "SSHTransport": "vgpu.provision.ssh"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'vgpu.provision' has no attribute {name!r}")


__all__ = [
    "AuthError",
    "CommandFailed",
    "CommandResult",
    "CommandTimeout",
    "ConnectOptions",
    "ConnectionLost",
    "GuestRequirements",
    "HarnessSpec",
    "HostKeyError",
    "HostReport",
    "HostTarget",
    "Job",
    "JumpHost",
    "LocalTransport",
    "Outcome",
    "ProvisionError",
    "RemoteProcess",
    "RunReport",
    "SSHTransport",
    "StepReport",
    "SudoSettings",
    "Transport",
    "UnreachableError",
    "provision_all",
]
