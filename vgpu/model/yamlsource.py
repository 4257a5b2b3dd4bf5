"""YAML loading that remembers where every value came from, so that each validation
problem can name the file and line a lab engineer has to edit."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vgpu.errors import InputError, Problem

Loc = tuple[str | int, ...]


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


def _to_python(node: yaml.Node, loc: Loc, doc: SourceDoc, problems: list[Problem]) -> Any:
    doc.lines.setdefault(loc, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _scalar(key_node)
            child = (*loc, key)
            if key in out:
                problems.append(Problem(doc.path, format_loc(child), "duplicate key",
                                        line=key_node.start_mark.line + 1,
                                        fix="keep one of the two entries"))
            doc.lines[child] = key_node.start_mark.line + 1
            out[key] = _to_python(value_node, child, doc, problems)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(item, (*loc, i), doc, problems) for i, item in enumerate(node.value)]
    return _scalar(node)


def _scalar(node: yaml.Node) -> Any:
    constructor = yaml.constructor.SafeConstructor()
    return constructor.construct_object(node, deep=True)


def load_yaml(path: str | Path) -> SourceDoc:
    """Read a YAML file into a SourceDoc; syntax errors become an InputError with a line."""
    p = Path(path)
    shown = str(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError.single(shown, "", "file not found",
                                fix="check the path, or use --scenario ID for a catalogue "
                                    "scenario (see `vgpu scenarios`)") from None
    except OSError as exc:
        raise InputError.single(shown, "", f"cannot read file: {exc.strerror}") from None
    return parse_yaml(text, shown)


def parse_yaml(text: str, shown: str) -> SourceDoc:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark else None
        raise InputError.single(shown, "", f"not valid YAML: {exc.problem}", line=line,
                                fix="fix the YAML syntax at that line") from None
    doc = SourceDoc(shown, None)
    if node is None:
        raise InputError.single(shown, "", "the file is empty",
                                fix="see docs/scenarios.md or docs/inventory.md for an example")
    problems: list[Problem] = []
    doc.data = _to_python(node, (), doc, problems)
    if problems:
        raise InputError(problems)
    if not isinstance(doc.data, dict):
        raise InputError.single(shown, "", "the top level must be a mapping of keys to values",
                                line=doc.lines.get(()))
    return doc


def format_loc(loc: Loc) -> str:
    """('vms', 1, 'vgpus', 0) -> 'vms[1].vgpus[0]'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
