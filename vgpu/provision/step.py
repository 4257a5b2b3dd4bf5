"""Steps as data: each step reads facts (check), changes only what differs (apply) and
proves the result (verify). A run reports per host which steps changed, were already
fine, or failed."""

from __future__ import annotations

import enum
import shlex
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TypeVar

from vgpu import stepnames
from vgpu.provision.facts import OsFacts
from vgpu.provision.requirements import GuestRequirements
from vgpu.remote.errors import ProvisionError
from vgpu.remote.targets import HostTarget
from vgpu.remote.transport import CommandResult, Transport


class Outcome(enum.Enum):
    CHANGED = "changed"
    OK = "ok"  # already in the desired state
    WOULD_CHANGE = "would change"  # dry run
    FAILED = "failed"
    SKIPPED = "skipped"  # an earlier step on this host failed


class StepFailed(ProvisionError):
    """A step could not reach or prove its desired state."""

    def __init__(self, host: str, step: str, message: str, fix: str | None = None) -> None:
        self.step = step
        super().__init__(host, message, fix)

    def __str__(self) -> str:
        text = f"{self.host}: step {self.step}: {self.message}"
        return f"{text} (fix: {self.fix})" if self.fix else text


@dataclass(frozen=True)
class Check:
    done: bool
    detail: str


@dataclass
class HostContext:
    target: HostTarget
    transport: Transport
    requirements: GuestRequirements
    os: OsFacts | None = None
    facts: dict[str, str] = field(default_factory=dict)
    dry_run: bool = False

    @property
    def name(self) -> str:
        return self.target.name

    @property
    def home(self) -> str:
        return self.os.home if self.os else "~"

    def path(self, system_path: str) -> str:
        """A system path (/etc/...) on this guest, under its system root."""
        root = self.target.system_root or (self.os.system_root if self.os else "/")
        return system_path if root in ("", "/") else root.rstrip("/") + system_path

    def read_files(self, paths: list[str], sudo: bool = False,
                   commands: dict[str, str] | None = None) -> dict[str, str]:
        """Several files in one round trip; a missing file reads as "". ``commands`` gives
        another command than ``cat`` for some entries (e.g. a checksum)."""
        marker = f"--vgpu-file-{uuid.uuid4().hex}--"
        commands = commands or {}
        command = "; ".join(
            f"printf '%s\\n' {marker}; {commands.get(p, f'cat {shlex.quote(p)}')} 2>/dev/null"
            for p in paths)
        parts = self.run(f"{command}; true", sudo=sudo).stdout.split(f"{marker}\n")[1:]
        if len(parts) != len(paths):
            raise StepFailed(self.name, "read-files", f"could not read {', '.join(paths)}")
        return dict(zip(paths, parts, strict=True))

    def run(self, command: str, sudo: bool = False, timeout: float | None = None,
            stdin: str | None = None) -> CommandResult:
        return self.transport.run(command, timeout=timeout, sudo=sudo, stdin=stdin)


class Step(ABC):
    name: str = "step"
    read_only: bool = False  # facts and verification: nothing to apply

    @classmethod
    def for_guest(cls, requirements: GuestRequirements) -> Step:
        """The step object for one guest; steps with settings take theirs from
        ``requirements``."""
        return cls()

    def preflight(self, requirements: GuestRequirements) -> list[tuple[str, str, str]]:
        """Local checks before any host is touched: (field, message, fix) per problem."""
        return []

    @abstractmethod
    def check(self, ctx: HostContext) -> Check:
        """Read the guest's state; ``done`` when nothing needs to change."""

    def apply(self, ctx: HostContext) -> None:
        """Change the guest towards the desired state (only called when check is not done)."""
        raise NotImplementedError(f"{self.name} has nothing to apply")

    def verify(self, ctx: HostContext) -> str:
        """After apply: prove the desired state; returns a detail line or raises."""
        result = self.check(ctx)
        if not result.done:
            raise self.fail(ctx, f"still not in the desired state after applying: "
                            f"{result.detail}")
        return result.detail

    def fail(self, ctx: HostContext, message: str, fix: str | None = None) -> StepFailed:
        return StepFailed(ctx.name, self.name, message, fix)

    def must(self, ctx: HostContext, command: str, sudo: bool = False,
             timeout: float | None = None, fix: str | None = None) -> CommandResult:
        """Run a command that has to succeed; a failure fails the step with its output."""
        result = ctx.run(command, sudo=sudo, timeout=timeout)
        if not result.ok:
            raise self.fail(ctx, f"`{command}` exited {result.exit_code}: {result.tail()}",
                            fix or f"see the host log; run the command on {ctx.name} by hand")
        return result


StepClass = TypeVar("StepClass", bound=type[Step])

REGISTRY: dict[str, type[Step]] = {}
"""Step name -> its class; filled by ``@guest_step`` as vgpu.provision.steps imports them."""


def guest_step(cls: StepClass) -> StepClass:
    """Register a step class under its ``name``, which must be one of vgpu.stepnames.ALL."""
    if cls.name not in stepnames.ALL:
        raise ValueError(f"{cls.__name__}.name {cls.name!r} is not in vgpu.stepnames")
    if REGISTRY.setdefault(cls.name, cls) is not cls:
        raise ValueError(f"guest step {cls.name!r} is registered twice: "
                         f"{REGISTRY[cls.name].__name__} and {cls.__name__}")
    return cls
