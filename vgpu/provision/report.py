"""What a provisioning run did, per host and step; already redacted."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vgpu.provision.step import Outcome


@dataclass
class StepReport:
    step: str
    outcome: Outcome
    detail: str = ""
    duration: float = 0.0
    attempts: int = 1
    fix: str | None = None


@dataclass
class HostReport:
    host: str
    address: str
    log_path: Path | None
    steps: list[StepReport] = field(default_factory=list)

    def count(self, outcome: Outcome) -> int:
        return sum(1 for s in self.steps if s.outcome is outcome)

    @property
    def failure(self) -> StepReport | None:
        return next((s for s in self.steps if s.outcome is Outcome.FAILED), None)

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def step(self, name: str) -> StepReport:
        return next(s for s in self.steps if s.step == name)


@dataclass
class RunReport:
    hosts: list[HostReport]
    duration: float
    dry_run: bool = False

    @property
    def failed_hosts(self) -> list[HostReport]:
        return [h for h in self.hosts if h.failed]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed_hosts else 0

    def failure_lines(self) -> list[str]:
        lines = []
        for host in self.failed_hosts:
            failure = host.failure
            assert failure is not None
            text = f"{host.host} ({host.address}) step {failure.step}: {failure.detail}"
            if failure.fix:
                text += f" (fix: {failure.fix})"
            if host.log_path:
                text += f" [log: {host.log_path}]"
            lines.append(text)
        return lines
