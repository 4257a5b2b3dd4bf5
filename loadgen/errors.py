"""Errors the harness raises on purpose. ``SpecError`` means the run spec is wrong (exit 2,
nothing was run); ``RunFailed`` means the run started and a backend failed (exit 1)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SpecProblem:
    """One thing wrong with one spec field: which field, what is wrong, how to fix it."""

    field: str
    message: str
    fix: str | None = None

    def render(self, source: str) -> str:
        text = f"{source}: {self.field}: {self.message}"
        return f"{text} (fix: {self.fix})" if self.fix else text


class HarnessError(Exception):
    """Base class; ``exit_code`` is what the command line exits with."""

    exit_code = 1


class SpecError(HarnessError):
    """The run spec is invalid. Raised before any work is done."""

    exit_code = 2

    def __init__(self, source: str, problems: list[SpecProblem]) -> None:
        self.source = source
        self.problems = problems
        super().__init__("\n".join(p.render(source) for p in problems))


class RunFailed(HarnessError):
    """The run started but could not complete (backend died, device missing)."""

    exit_code = 1
