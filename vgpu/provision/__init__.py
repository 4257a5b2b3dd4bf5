"""Guest provisioning over SSH: a transport (paramiko or local subprocess), idempotent
steps (facts -> check -> apply -> verify) and a bounded parallel fan-out."""

from vgpu.provision.errors import (
    AuthError,
    CommandFailed,
    CommandTimeout,
    ConnectionLost,
    HostKeyError,
    ProvisionError,
    UnreachableError,
)
from vgpu.provision.fanout import Job, provision_all
from vgpu.provision.local import LocalTransport
from vgpu.provision.report import HostReport, RunReport, StepReport
from vgpu.provision.requirements import GuestRequirements, HarnessSpec
from vgpu.provision.ssh import SSHTransport
from vgpu.provision.step import Outcome
from vgpu.provision.targets import ConnectOptions, HostTarget, JumpHost
from vgpu.provision.transport import CommandResult, RemoteProcess, SudoSettings, Transport

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
