"""YAML loading that remembers where every value came from, so that each validation
problem can name the file and line a lab engineer has to edit. Whatever a file holds
(binary data, another encoding, deep nesting, alias bombs, megabytes), loading ends
quickly in data or in an InputError."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vgpu.errors import InputError
from vgpu.model.yamlcompose import Composer, Loc, format_loc

__all__ = ["MAX_FILE_BYTES", "Loc", "SourceDoc", "format_loc", "load_yaml", "parse_yaml"]

MAX_FILE_BYTES = 1024 * 1024
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# What YAML does not allow in a stream (as yaml.reader.Reader.NON_PRINTABLE).
_NOT_YAML_TEXT = re.compile(
    "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_BINARY_FIX = "this does not look like a YAML text file; check the path"
# libyaml's own nesting limit (PyYAML >= 6.0.3 with libyaml 0.2.5's max nest level): vgpu
# answers it as its own MAX_DEPTH check, whichever fires first.
_PARSER_DEPTH_LIMIT = "maximum nesting depth"


@dataclass
class SourceDoc:
    """Parsed YAML data plus the line of each key/item (1-based), keyed by its path."""

    path: str
    data: Any
    lines: dict[Loc, int] = field(default_factory=dict)

    def line_of(self, loc: Loc) -> int | None:
        # Walk up the path until something has a known line (a missing key points at its
        # parent mapping, which is where it has to be added).
        probe = tuple(loc)
        while probe:
            if probe in self.lines:
                return self.lines[probe]
            probe = probe[:-1]
        return self.lines.get((), None)


def load_yaml(path: str | Path) -> SourceDoc:
    """Read a YAML file into a SourceDoc; syntax errors become an InputError with a line."""
    shown = str(path)
    data = _read_capped(Path(path), shown)
    nul = data.find(b"\x00")
    if nul >= 0:
        line = _line_at(data, nul)
        raise InputError.single(shown, "", f"contains a NUL byte at line {line}", line=line,
                                fix=_BINARY_FIX)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError.single(
            shown, "", f"not UTF-8 text at byte {exc.start} (0x{data[exc.start]:02x})",
            line=_line_at(data, exc.start),
            fix="save the file as UTF-8, e.g. `iconv -f latin1 -t utf-8 OLD > NEW`") from None
    return parse_yaml(text, shown)


def _read_capped(path: Path, shown: str) -> bytes:
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise InputError.single(shown, "", "file not found",
                                fix="check the path, or use --scenario ID for a catalogue "
                                    "scenario (see `vgpu scenarios`)") from None
    except OSError as exc:
        raise InputError.single(shown, "", f"cannot read file: {exc.strerror}") from None
    if size > MAX_FILE_BYTES or len(data) > MAX_FILE_BYTES:
        raise _too_large(shown, f"{size:,} bytes" if size > MAX_FILE_BYTES else
                         f"over {MAX_FILE_BYTES:,} bytes")
    return data


def _too_large(shown: str, size: str) -> InputError:
    return InputError.single(
        shown, "", f"the file is {size}; vgpu reads scenario and inventory files of up to "
                   f"{MAX_FILE_BYTES:,} bytes (1 MiB)",
        fix="these files are a few KB; check that this is the right file")


def _line_at(data: bytes, index: int) -> int:
    return data.count(b"\n", 0, index) + 1


def parse_yaml(text: str, shown: str) -> SourceDoc:
    if len(text) > MAX_FILE_BYTES:
        raise _too_large(shown, f"{len(text):,} characters")
    _check_characters(text, shown)
    composer = Composer(shown)
    try:
        composer.compose(yaml.parse(text, Loader=_LOADER))
    except yaml.MarkedYAMLError as exc:
        if _PARSER_DEPTH_LIMIT in str(exc.problem):
            line = exc.problem_mark.line + 1 if exc.problem_mark is not None else None
            raise composer.too_deep(line) from None
        raise _syntax_error(exc, text, shown) from None
    except yaml.YAMLError as exc:
        raise InputError.single(shown, "", f"not valid YAML: {exc}") from None
    except RecursionError:
        raise composer.too_deep(None) from None
    if not composer.documents:
        raise InputError.single(shown, "", "the file is empty",
                                fix="see docs/scenarios.md or docs/inventory.md for an example")
    if composer.problems:
        raise InputError(composer.problems)
    doc = SourceDoc(shown, composer.data, composer.lines)
    if not isinstance(doc.data, dict):
        raise InputError.single(shown, "", "the top level must be a mapping of keys to values",
                                line=doc.lines.get(()))
    return doc


def _check_characters(text: str, shown: str) -> None:
    bad = _NOT_YAML_TEXT.search(text)
    if bad is None:
        return
    line = text.count("\n", 0, bad.start()) + 1
    char = bad.group()
    if char == "\x00":
        raise InputError.single(shown, "", f"contains a NUL byte at line {line}", line=line,
                                fix=_BINARY_FIX)
    raise InputError.single(
        shown, "", f"contains the control character U+{ord(char):04X} at line {line}",
        line=line, fix="remove it: YAML text may hold tabs and line breaks but no other "
                       "control characters")


def _syntax_error(exc: yaml.MarkedYAMLError, text: str, shown: str) -> InputError:
    """The problem at its line; an unclosed quote or bracket, which yaml only notices at the
    end of the file, at the line where it was opened."""
    mark, problem = exc.problem_mark, exc.problem or "syntax error"
    at_end = mark is None or mark.index >= len(text.rstrip())
    if exc.context_mark is not None and exc.context and at_end:
        opened = exc.context.removeprefix("while scanning ").removeprefix("while parsing ")
        return InputError.single(
            shown, "", f"not valid YAML: {opened} starts here and is never closed "
                       f"({problem})",
            line=exc.context_mark.line + 1,
            fix="add the closing quote" if "quoted" in opened else "add the missing ']' or '}'")
    line = mark.line + 1 if mark else None
    return InputError.single(shown, "", f"not valid YAML: {problem}", line=line,
                             fix="fix the YAML syntax at that line")
