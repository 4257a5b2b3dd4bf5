"""Python data built straight from YAML parser events, recording the line of every key and
item. It replaces yaml's recursive composer: nesting is capped at MAX_DEPTH, the number of
keys and values at MAX_VALUES, and aliases are refused before anything is expanded, so no
file can recurse, multiply itself or take long to check."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

from vgpu.errors import InputError, Problem

Loc = tuple[str | int, ...]
MAX_DEPTH = 64
MAX_VALUES = 20_000
_STR_TAG = "tag:yaml.org,2002:str"
_NO_KEY = object()
_MISSING = object()
_CONSTRUCT_ERRORS = (yaml.YAMLError, ValueError, KeyError, TypeError, ArithmeticError)


def format_loc(loc: Loc) -> str:
    """('vms', 1, 'vgpus', 0) -> 'vms[1].vgpus[0]'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass(slots=True)
class _Open:
    """A list or mapping whose end event has not come yet."""

    loc: Loc
    value: dict[Any, Any] | list[Any]
    key: Any = _NO_KEY

    @property
    def wants_key(self) -> bool:
        return self.key is _NO_KEY and type(self.value) is dict


class _Unreadable(Exception):
    def __init__(self, tag: str, reason: object) -> None:
        super().__init__(tag, reason)
        self.tag, self.reason = tag, reason


def _line(event: yaml.Event) -> int:
    return int(event.start_mark.line) + 1


class Composer:
    """Feed it the events of one YAML stream; read ``data``, ``lines`` and ``problems``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.data: Any = None
        self.documents = 0
        self.lines: dict[Loc, int] = {}
        self.problems: list[Problem] = []
        self._stack: list[_Open] = []
        self._values = 0
        self._constructed: dict[tuple[str, str], Any] = {}
        self._constructor = yaml.constructor.SafeConstructor()
        self._implicit = yaml.resolver.Resolver.yaml_implicit_resolvers

    def compose(self, events: Iterable[yaml.Event]) -> None:
        for event in events:
            kind = type(event)
            if kind is ScalarEvent:
                self._scalar(event)
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                self._stack.pop()
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                self._collection(event)
            elif kind is AliasEvent:
                raise self._alias(event)
            elif kind is DocumentStartEvent:
                self._document(event)

    def _document(self, event: DocumentStartEvent) -> None:
        self.documents += 1
        if self.documents > 1:
            raise InputError.single(
                self.path, "", "holds more than one YAML document (a second one starts here)",
                line=_line(event), fix="keep one document per file: remove this '---' and "
                                       "what follows, or move it to a file of its own")

    def _count(self, event: ScalarEvent | CollectionStartEvent) -> None:
        self._values += 1
        if self._values > MAX_VALUES:
            raise InputError.single(
                self.path, "", f"holds more than {MAX_VALUES:,} keys and values; reading "
                "stopped at this line", line=_line(event),
                fix="scenario and inventory files hold a few hundred; check that this is "
                    "the right file")

    def _scalar(self, event: ScalarEvent) -> None:
        self._count(event)
        parent = self._stack[-1] if self._stack else None
        if parent is not None and parent.wants_key:
            self._key(event, parent)
            return
        loc: Loc | None = None
        if parent is None or type(parent.value) is list:
            loc = self._loc(parent)
            self.lines.setdefault(loc, _line(event))
        try:
            value = self._value(event)
        except _Unreadable as exc:
            value = event.value
            self.problems.append(self._unreadable(
                event, exc, loc if loc is not None else self._loc(parent)))
        self._attach(parent, value)

    def _collection(self, event: CollectionStartEvent) -> None:
        self._count(event)
        parent = self._stack[-1] if self._stack else None
        if parent is not None and parent.wants_key:
            raise InputError.single(
                self.path, format_loc(parent.loc), "a key is a list or mapping",
                line=_line(event), fix="keys are plain names, such as 'vms' or 'gpu'")
        loc = self._loc(parent)
        self.lines.setdefault(loc, _line(event))
        if len(self._stack) >= MAX_DEPTH:
            raise self._too_deep(event, loc)
        container: dict[Any, Any] | list[Any] = \
            {} if type(event) is MappingStartEvent else []
        self._attach(parent, container)
        self._stack.append(_Open(loc, container))

    def _loc(self, parent: _Open | None) -> Loc:
        if parent is None:
            return ()
        if type(parent.value) is list:
            return (*parent.loc, len(parent.value))
        return (*parent.loc, parent.key)

    def _attach(self, parent: _Open | None, value: Any) -> None:
        if parent is None:
            self.data = value
        elif type(parent.value) is list:
            parent.value.append(value)
        else:
            parent.value[parent.key] = value
            parent.key = _NO_KEY

    def _key(self, event: ScalarEvent, parent: _Open) -> None:
        try:
            key = self._value(event)
        except _Unreadable as exc:
            key = event.value
            self.problems.append(self._unreadable(event, exc, parent.loc))
        child = (*parent.loc, key)
        if key in parent.value:
            self.problems.append(Problem(self.path, format_loc(child), "duplicate key",
                                        line=_line(event), fix="keep one of the two entries"))
        self.lines[child] = _line(event)
        parent.key = key

    def _tag(self, event: ScalarEvent) -> str:
        """As yaml's resolver: an explicit tag, else the first implicit pattern (for plain
        scalars) that the text matches, else text."""
        if event.tag is not None and event.tag != "!":
            return str(event.tag)
        if event.implicit[0]:
            for tag, pattern in self._implicit.get(event.value[:1], ()):
                if pattern.match(event.value):
                    return str(tag)
        return _STR_TAG

    def _value(self, event: ScalarEvent) -> Any:
        tag = self._tag(event)
        if tag == _STR_TAG:
            return event.value
        cached = self._constructed.get((tag, event.value), _MISSING)
        if cached is not _MISSING:
            return cached
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            value = self._constructor.construct_object(node, deep=True)
        except _CONSTRUCT_ERRORS as exc:
            raise _Unreadable(tag, exc.problem if isinstance(exc, yaml.MarkedYAMLError)
                              else exc) from None
        self._constructed[(tag, event.value)] = value
        return value

    def _unreadable(self, event: ScalarEvent, exc: _Unreadable, loc: Loc) -> Problem:
        explicit = event.tag not in (None, "!")
        fix = (f"remove the tag '{event.tag}': vgpu files use plain values" if explicit
               else "quote the value to keep it as text, or correct it")
        return Problem(self.path, format_loc(loc),
                       f"cannot read '{event.value}' as {exc.tag.rsplit(':', 1)[-1]}: "
                       f"{exc.reason}", line=_line(event), fix=fix)

    def _alias(self, event: AliasEvent) -> InputError:
        parent = self._stack[-1] if self._stack else None
        loc = parent.loc if parent is not None and parent.wants_key else self._loc(parent)
        return InputError.single(
            self.path, format_loc(loc),
            f"uses the YAML alias '*{event.anchor}'; vgpu refuses aliases, since a few of "
            "them can make a small file expand into billions of values",
            line=_line(event), fix=f"write the value out in full where '*{event.anchor}' is")

    def _too_deep(self, event: CollectionStartEvent, loc: Loc) -> InputError:
        return self.too_deep(_line(event), loc)

    def too_deep(self, line: int | None, loc: Loc | None = None) -> InputError:
        """The answer to nesting past MAX_DEPTH at ``line``; ``loc`` defaults to where
        composing has got to (the parser's own depth limit may fire first: libyaml scans a
        run of '[' ahead of the events it hands over)."""
        where = self._loc(self._stack[-1] if self._stack else None) if loc is None else loc
        return InputError.single(
            self.path, format_loc(where[:1]), f"nested deeper than {MAX_DEPTH} levels",
            line=line, fix="scenario and inventory files need a few levels of lists "
                           "and mappings; check for stray '[' or '{'")
