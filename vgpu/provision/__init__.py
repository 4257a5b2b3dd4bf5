"""Guest provisioning: idempotent steps (facts -> check -> apply -> verify) run over a
transport from vgpu.remote, and a bounded parallel fan-out."""

from typing import TYPE_CHECKING, Any

from vgpu.provision.report import HostReport, RunReport, StepReport
from vgpu.provision.requirements import GuestRequirements, HarnessSpec
from vgpu.provision.step import Outcome

if TYPE_CHECKING:
    from vgpu.provision.fanout import Job, provision_all


def __getattr__(name: str) -> Any:
    # The fan-out imports paramiko (about half a second): load it on first use only.
    if name in ("Job", "provision_all"):
        from vgpu.provision import fanout

        return getattr(fanout, name)
    raise AttributeError(f"module 'vgpu.provision' has no attribute {name!r}")


__all__ = [
    "GuestRequirements",
    "HarnessSpec",
    "HostReport",
    "Job",
    "Outcome",
    "RunReport",
    "StepReport",
    "provision_all",
]
