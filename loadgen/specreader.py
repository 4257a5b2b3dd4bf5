"""Reads a JSON spec document field by field for both spec kinds (inference and training),
collecting every problem instead of stopping at the first; ``check`` raises them together
as one SpecError (exit 2)."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from loadgen.errors import SpecError, SpecProblem


def load_json(path: Path) -> Any:
    """The decoded document, or a SpecError naming the file (unreadable or not JSON)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(str(path), [SpecProblem("(file)", f"cannot read the spec: "
                                                f"{exc.strerror}", "check the path")]) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(str(path), [SpecProblem(
            f"(line {exc.lineno})", f"not valid JSON: {exc.msg}", "fix the JSON syntax")]) from exc


def require_object(doc: Any, source: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise SpecError(source, [SpecProblem("(top level)", "must be a JSON object",
                                             "write the spec as {...}")])
    return doc


class SpecReader:
    """Typed reads of one document's fields; a wrong value is recorded as a problem and
    the field's default is returned so that reading goes on."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[SpecProblem] = []

    def problem(self, field: str, message: str, fix: str | None = None) -> None:
        self.problems.append(SpecProblem(field, message, fix))

    def clean(self, *fields: str) -> bool:
        """No problem recorded yet for any of ``fields``."""
        return not any(p.field in fields for p in self.problems)

    def check(self) -> None:
        if self.problems:
            raise SpecError(self.source, self.problems)

    def schema_version(self, doc: dict[str, Any], expected: int) -> None:
        if doc.get("schema_version") != expected:
            self.problem("schema_version", f"must be {expected}, got "
                         f"{doc.get('schema_version')!r}", f"set \"schema_version\": {expected}")

    def section(self, doc: dict[str, Any], key: str, allowed: set[str]) -> dict[str, Any]:
        value = doc.get(key, {})
        if not isinstance(value, dict):
            self.problem(key, f"must be an object, got {type(value).__name__}",
                         f"write {key} as {{...}}")
            return {}
        self.unknown_keys(value, allowed, f"{key}.")
        return value

    def unknown_keys(self, doc: dict[str, Any], allowed: set[str], prefix: str = "") -> None:
        for key in doc:
            if key not in allowed:
                close = difflib.get_close_matches(key, sorted(allowed), n=1)
                fix = f"did you mean {prefix}{close[0]}?" if close else \
                    f"remove it; allowed: {', '.join(sorted(allowed))}"
                self.problem(f"{prefix}{key}", "unknown field", fix)

    def choice(self, doc: dict[str, Any], key: str, field: str, options: tuple[str, ...],
               default: str) -> str:
        value = doc.get(key, default)
        if value not in options:
            self.problem(field, f"{value!r} is not one of {', '.join(options)}",
                         f"set {field} to one of: {', '.join(options)}")
            return default
        return str(value)

    def integer(self, doc: dict[str, Any], key: str, field: str, default: int | None,
                minimum: int) -> int | None:
        """A whole number >= minimum; None when absent without a default or null."""
        value = doc.get(key, default)
        if value is None:
            return None
        return value if self._whole(value, field, minimum) else default

    def count(self, doc: dict[str, Any], key: str, field: str, default: int,
              minimum: int) -> int:
        """A whole number >= minimum that must not be null."""
        value = doc.get(key, default)
        return value if self._whole(value, field, minimum) else default

    def _whole(self, value: Any, field: str, minimum: int) -> bool:
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(field, f"must be an integer, got {value!r}",
                         f"set {field} to a whole number >= {minimum}")
            return False
        if value < minimum:
            self.problem(field, f"must be >= {minimum}, got {value}",
                         f"set {field} to a whole number >= {minimum}")
            return False
        return True

    def positive(self, doc: dict[str, Any], key: str, field: str) -> float | None:
        """A number > 0, or None when absent."""
        value = doc.get(key)
        if value is None:
            return None
        return float(value) if self._positive(value, field) else None

    def number(self, doc: dict[str, Any], key: str, field: str, default: float) -> float:
        """A number > 0 that must not be null."""
        value = doc.get(key, default)
        return float(value) if self._positive(value, field) else default

    def _positive(self, value: Any, field: str) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            self.problem(field, f"must be a number > 0, got {value!r}",
                         f"set {field} to a positive number")
            return False
        return True

    def text(self, doc: dict[str, Any], key: str, field: str) -> str | None:
        """A non-empty string, or None when absent."""
        value = doc.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            self.problem(field, f"must be a non-empty string, got {value!r}",
                         f"set {field} to a non-empty string or remove it")
            return None
        return value

    def string(self, doc: dict[str, Any], key: str, field: str, default: str) -> str:
        """Any string, the empty one included."""
        value = doc.get(key, default)
        if not isinstance(value, str):
            self.problem(field, f"must be a string, got {value!r}", "write a quoted string")
            return default
        return value
