"""Every error vgpu raises on purpose. The CLI maps each class to an exit code and prints
its message; anything else is a bug and shows a traceback."""

from __future__ import annotations

from dataclasses import dataclass, field, replace


class VgpuError(Exception):
    """Base class. ``exit_code`` is what the CLI exits with."""

    exit_code = 1


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one input file: where, which field, what is wrong, how to fix."""

    file: str
    field: str
    message: str
    line: int | None = None
    fix: str | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        text = f"{where} {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        return f"{text} (fix: {self.fix})" if self.fix else text


MAX_LISTED_PROBLEMS = 50


@dataclass
class InputError(VgpuError):
    """Bad user input (a scenario, an inventory, a flag). Nothing was changed anywhere.
    Its text lists the first MAX_LISTED_PROBLEMS problems and counts the rest; ``unlisted``
    counts problems found but not kept (collectors may stop building them at the cap)."""

    problems: list[Problem] = field(default_factory=list)
    unlisted: int = 0
    exit_code = 2

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        shown = self.problems[:MAX_LISTED_PROBLEMS]
        more = len(self.problems) - len(shown) + self.unlisted
        lines = [str(p) for p in shown]
        if more:
            lines.append(f"... and {more:,} more problem{'s' if more > 1 else ''} "
                         "(fix those above first)")
        return "\n".join(lines)

    @classmethod
    def single(
        cls, file: str, field_path: str, message: str, fix: str | None = None,
        line: int | None = None,
    ) -> InputError:
        return cls([Problem(file=file, field=field_path, message=message, fix=fix, line=line)])


class ParameterError(InputError):
    """Bad input handed to an operation (not read from a file), in domain terms: the
    ``parameter`` it concerns ("saved run", "GPU", "host") and the ``reason`` (which fact is
    wrong), never a command-line flag. The command line layer names its flag for the
    parameter and may word the fix with it (vgpu.cli.common.flag_names)."""

    def __init__(self, parameter: str, message: str, fix: str | None = None, *,
                 reason: str = "", file: str = "command line",
                 details: dict[str, object] | None = None) -> None:
        self.parameter, self.reason = parameter, reason
        self.details = details or {}  # the facts a command's fix may name ({gpu})
        super().__init__([Problem(file=file, field=parameter, message=message, fix=fix)])

    def named(self, flags: dict[str, str], fixes: dict[str, str]) -> InputError:
        """The same problem under the flag ``flags`` gives the parameter, with the fix
        ``fixes`` gives the reason (a template over ``details``; else the domain's own)."""
        if self.parameter not in flags:
            return self
        problem = self.problems[0]
        fix = fixes[self.reason].format(**self.details) if self.reason in fixes \
            else problem.fix
        return InputError([replace(problem, field=flags[self.parameter], fix=fix)])


class PlanError(InputError):
    """The scenario is well-formed but cannot be placed on the inventory."""


class RemoteError(VgpuError):
    """A remote system (vCenter, an SSH host, a GPU) failed or refused an action."""

    exit_code = 1


class VerdictFailed(VgpuError):
    """A comparison was judged FAIL."""

    exit_code = 3


class NoReference(VgpuError):
    """Nothing to judge against (no baseline of the host, no bare-metal run): exit 5, the
    code every judging command gives for it (vgpu.exitcodes)."""

    exit_code = 5
