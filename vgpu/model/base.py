"""The pydantic base every vgpu model shares, and the translation of pydantic's errors
into problems that name file, line, field and fix."""

from __future__ import annotations

import difflib
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError
from pydantic_core import ErrorDetails

from vgpu.errors import MAX_LISTED_PROBLEMS, InputError, Problem
from vgpu.model.yamlsource import Loc, SourceDoc, format_loc

M = TypeVar("M", bound=BaseModel)


# Tags of discriminated unions: pydantic puts them into error locations, where a lab
# engineer would not recognise them, so they are dropped there and used to find the model.
UNION_TAGS: dict[str, type[BaseModel]] = {}


class StrictModel(BaseModel):
    """Unknown keys are errors: a typo in a lab file must never pass silently."""

    model_config = ConfigDict(extra="forbid", frozen=False, populate_by_name=True)


class FileModel(StrictModel):
    """A model read from a file of its own (a scenario, an inventory), which it remembers
    so that later problems can name it."""

    _source: str | None = PrivateAttr(None)

    @property
    def source(self) -> str | None:
        """The file this was loaded from, if any."""
        return self._source

    @source.setter
    def source(self, path: str) -> None:
        self._source = path


def _model_at(model: type[BaseModel], loc: Loc) -> type[BaseModel] | None:
    """Follow ``loc`` through nested model fields to the model that owns its last key."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        field = current.model_fields.get(str(part))
        if field is None:
            return None
        current = _inner_model(field.annotation)
        if str(part) in UNION_TAGS:
            current = UNION_TAGS[str(part)]
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _inner_model(annotation: Any) -> Any:
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _inner_model(arg)
        if isinstance(found, type) and issubclass(found, BaseModel):
            return found
    return annotation


def _clean_loc(loc: tuple[Any, ...]) -> Loc:
    # pydantic inserts union tags and validator names (e.g. 'function-after[...]').
    return tuple(p for p in loc if isinstance(p, int) or (
        "[" not in str(p) and not str(p).startswith("-") and str(p) not in UNION_TAGS))


def _with_tags(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """The raw location with tags kept (they pick the union member) but validator names
    dropped; tags are resolved by _model_at, so a tag stands in for the field it follows."""
    out: list[Any] = []
    for p in loc:
        if isinstance(p, int) or ("[" not in str(p) and not str(p).startswith("-")):
            out.append(p)
    return tuple(out)


def problems_from_validation(
    exc: ValidationError, doc: SourceDoc, model: type[BaseModel], prefix: Loc = ()
) -> tuple[list[Problem], int]:
    """The problems pydantic found, each at its file line; past MAX_LISTED_PROBLEMS, only
    how many more there are (a file of 100,000 typos must not take minutes)."""
    errors = exc.errors(include_url=False)
    problems: list[Problem] = []
    seen: set[tuple[str, str]] = set()
    for index, err in enumerate(errors):
        if len(problems) == MAX_LISTED_PROBLEMS:
            return problems, len(errors) - index
        problem = _problem(err, doc, model, prefix)
        if (problem.field, problem.message) not in seen:
            seen.add((problem.field, problem.message))
            problems.append(problem)
    return problems, 0


def _problem(err: ErrorDetails, doc: SourceDoc, model: type[BaseModel], prefix: Loc) -> Problem:
    loc = (*prefix, *_clean_loc(err["loc"]))
    kind = err["type"]
    message, fix = err["msg"], err.get("ctx", {}).get("fix")
    if message.startswith("Value error, "):
        message = message[len("Value error, "):]
    if kind == "extra_forbidden":
        owner = _model_at(model, _with_tags(err["loc"])[:-1])
        valid = sorted(owner.model_fields) if owner else []
        key = str(loc[-1])
        close = difflib.get_close_matches(key, valid, n=1)
        message = f"unknown key '{key}'"
        fix = (f"did you mean '{close[0]}'? " if close else "") + (
            f"valid keys here: {', '.join(valid)}" if valid else "remove it")
    elif kind == "missing":
        fix = f"add '{loc[-1]}'"
        message = "required field is missing"
    elif kind == "literal_error":
        fix = "use one of the listed values"
    return Problem(doc.path, format_loc(loc), message, line=doc.line_of(loc), fix=fix)


def validate_doc(model: type[M], doc: SourceDoc) -> M:
    try:
        return model.model_validate(doc.data)
    except ValidationError as exc:
        problems, unlisted = problems_from_validation(exc, doc, model)
        raise InputError(problems, unlisted=unlisted) from None
