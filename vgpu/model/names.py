"""The one rule for names that become file paths, remote folders, SSH `Host` lines and
vCenter VM names: VM names (and their `{n}` patterns), scenario ids, workload names and
inventory host names."""

from __future__ import annotations

import re
import string
from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
MAX_NAME_LENGTH = 80  # vSphere's limit for a VM name
NAME_RULE = (f"use 1-{MAX_NAME_LENGTH} of A-Z a-z 0-9 . _ -, starting with a letter or digit, "
             "no '..'")
NAME_FIX = f"{NAME_RULE}; names become VM, folder and SSH host names"
PATTERN_FIELD = "n"


def name_problem(name: str) -> str | None:
    """Why ``name`` breaks the rule, or None when it is a valid name."""
    if not name:
        return "is empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"is {len(name)} characters long; vSphere allows at most {MAX_NAME_LENGTH}"
    match = NAME_PATTERN.match(name)
    if match is None:
        return f"starts with {name[0]!r}"
    if match.end() < len(name):
        return f"contains {name[match.end()]!r}"
    if ".." in name:
        return "contains '..'"
    return None


def expand_pattern(pattern: str, count: int) -> list[str]:
    """The VM names of a group: ``pattern`` alone for one VM without ``{n}``, else one name
    per VM with ``{n}`` (1-based) filled in, '-{n}' being appended when it is missing."""
    if count == 1 and "{" + PATTERN_FIELD not in pattern:
        return [pattern]
    if "{" + PATTERN_FIELD not in pattern:
        pattern += "-{" + PATTERN_FIELD + "}"
    return [pattern.format(**{PATTERN_FIELD: i}) for i in range(1, count + 1)]


def pattern_problem(pattern: str) -> str | None:
    """Why a VM name pattern cannot be expanded into valid names, or None."""
    try:
        fields = [(f, conv) for _, f, _, conv in string.Formatter().parse(pattern)
                  if f is not None]
    except ValueError as exc:
        return f"is not a valid pattern ({_brace_reason(str(exc))})"
    for field, conversion in fields:
        if field != PATTERN_FIELD or conversion:
            shown = "{" + field + (f"!{conversion}" if conversion else "") + "}"
            return f"uses {shown}; the only field a pattern may use is {{n}} (the VM's number)"
    try:
        first = expand_pattern(pattern, 1)[0]
    except (ValueError, KeyError, IndexError) as exc:
        return f"is not a valid pattern ({exc})"
    reason = name_problem(first)
    return None if reason is None else f"gives the name '{first}', which {reason}"


def _brace_reason(message: str) -> str:
    if "expected '}'" in message:
        return "a '{' is never closed"
    if "Single '}'" in message:
        return "a '}' has no matching '{'"
    return message


def _fail(kind: str, value: str, reason: str, hint: str = "") -> PydanticCustomError:
    return PydanticCustomError("vgpu_name", "{message}", {
        "message": f"{kind} '{value}' {reason}",
        "fix": hint + NAME_FIX,
    })


def _checked_name(value: str) -> str:
    reason = name_problem(value)
    if reason is not None:
        raise _fail("name", value, reason)
    return value


def _checked_pattern(value: str) -> str:
    if "{" not in value and "}" not in value:
        return _checked_name(value)
    reason = pattern_problem(value)
    if reason is not None:
        raise _fail("name pattern", value, reason, hint="write {n} where the VM's number goes; ")
    return value


Name = Annotated[str, AfterValidator(_checked_name)]
NamePattern = Annotated[str, AfterValidator(_checked_pattern)]
