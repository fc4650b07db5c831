"""Every problem of an experiment at once: the cross-field rules that field errors hid; experiment.parse calls it.

Pydantic checks a model's rules only when all its fields are valid, so a wrong type in
`spec.model` would hide every broken rule of `spec` until it is fixed. Here the fields in error
are dropped (back to their defaults), the document is validated again without rules, and each
rule is checked over the result, reported only when it read none of the dropped fields: a rule
that fails because of a default stood in for a wrong value would send people after a problem
they do not have.
"""

from __future__ import annotations

import copy
import difflib
import functools
import typing
from typing import Any, Iterable, Iterator

import pydantic

from ringleader.api import base

Location = tuple[Any, ...]

MAX_PASSES = 5
"""Validations of the trimmed document at most: dropping a field fixes its error in one pass, a missing
field in two (its object goes); a document still invalid after five is reported as it is."""


class Problem(str):
    """One problem, as the line people read ("`spec.workers.replicas` must be ..."), with its parts for
    machine output: `field` (its dotted path, None for the file as a whole) and `message`."""

    field: str | None
    message: str

    def __new__(cls, field: str | None, message: str, line: str | None = None) -> Problem:
        self = super().__new__(cls, line if line is not None else (f"`{field}` {message}" if field else message))
        self.field = field
        self.message = message
        return self


def dotted(location: Location) -> str:
    return ".".join(str(part) for part in location)


def hidden_rules(model: type[pydantic.BaseModel], document: Any, error: pydantic.ValidationError
                 ) -> list[tuple[Location, str]]:
    """(location, message) of each broken rule that the field errors of `error` kept pydantic from checking.

    Also returns the rules `error` already reports (the caller keeps one of each); empty when the
    document cannot be trimmed into a valid one."""
    trimmed, dropped = copy.deepcopy(document), set()
    for _ in range(MAX_PASSES):
        for item in error.errors():
            if item["type"] == "rule":
                continue
            # A missing field cannot be dropped: its object goes, and whatever reads it with it.
            location = tuple(item["loc"][:-1] if item["type"] == "missing" else item["loc"])
            location = _drop(trimmed, location)
            if not location:
                return []
            dropped.add(location)
        try:
            valid = model.model_validate(trimmed, by_alias=True, by_name=False, context={base.WITHOUT_RULES: True})
        except pydantic.ValidationError as again:
            error = again
            continue
        return list(_broken(valid, (), dropped))
    return []


def _drop(document: Any, location: Location) -> Location:
    """Delete the value at `location`, or at its deepest part that exists; returns what was deleted."""
    parents, node = [], document
    for depth, part in enumerate(location):
        inside = (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node))
        if not inside:
            location = location[:depth]
            break
        parents.append(node)
        node = node[part]
    if location:
        del parents[len(location) - 1][location[-1]]
    return location


def _broken(model: pydantic.BaseModel, where: Location, dropped: set[Location]) -> Iterator[tuple[Location, str]]:
    """The rules broken in `model` and every model inside it, except those that read a dropped field."""
    for rule in getattr(type(model), "rules", ()):
        reads: list[Location] = []
        if rule.holds(_Reading(model, where, reads)):
            continue
        if not any(_overlaps(read, gone) for read in reads for gone in dropped):
            yield where + tuple(part for part in rule.field_path.split(".") if part), rule.message
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        inside = where + (field.alias or name,)
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        if isinstance(value, pydantic.BaseModel):
            yield from _broken(value, inside, dropped)
        for key, item in items:
            if isinstance(item, pydantic.BaseModel):
                yield from _broken(item, inside + (key,), dropped)


def _overlaps(read: Location, gone: Location) -> bool:
    shorter = min(len(read), len(gone))
    return read[:shorter] == gone[:shorter]


class _Reading:
    """A model as a rule sees it, noting the location of every value the rule reads.

    Nested models are wrapped in turn, so reading `s.sync.paradigm` notes `sync.paradigm`, not all
    of `sync`; a method (`sweep.trial_count()`) reads its whole model, so it notes the model."""

    def __init__(self, model: pydantic.BaseModel, where: Location, reads: list[Location]):
        self._model, self._where, self._reads = model, where, reads

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._model, name)
        field = type(self._model).model_fields.get(name)
        if field is None:
            self._reads.append(self._where)
            return value
        where = self._where + (field.alias or name,)
        if isinstance(value, pydantic.BaseModel):
            return _Reading(value, where, self._reads)
        self._reads.append(where)
        return value


SHORT = 4
"""Words of at most this many characters are near misses at a lower similarity: one wrong letter of "SSP" is a
third of it."""


def suggestion(word: object, candidates: Iterable[str]) -> str:
    """ "; did you mean `bandwidth`?" when `word` is a near miss of one of `candidates` (a letter wrong, missing,
    doubled or swapped, or another case), else ""."""
    if not isinstance(word, str) or not word:
        return ""
    candidates = list(candidates)
    close = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6 if len(word) <= SHORT else 0.75)
    if not close:
        close = [c for c in candidates if sorted(c.lower()) == sorted(word.lower())]
    return f"; did you mean `{close[0]}`?" if close else ""


def field_names(model: type[pydantic.BaseModel], location: Location) -> list[str]:
    """The wire names of the fields of the object at `location` in a document of `model` ([] when it is not one
    object of ours: a map, or a union that the path does not settle)."""
    current: Any = model
    for part in location:
        if isinstance(part, int):
            continue
        fields = {(f.alias or name): f for name, f in current.model_fields.items()}
        if part not in fields:
            return []
        current = _model_in(fields[part].annotation)
        if current is None:
            return []
    return [(f.alias or name) for name, f in current.model_fields.items()]


MAX_DEPTH = 6
"""Levels of objects searched for a field's home: deeper than any path of the API."""


def homes(model: type[pydantic.BaseModel], name: str) -> list[str]:
    """The dotted paths of the objects under `model` that have a field named `name` (its wire name), shallowest
    first: where a field written at the wrong level belongs ("groups" -> ["spec.workers"])."""
    return _homes(model).get(name, [])


@functools.cache
def _homes(model: type[pydantic.BaseModel]) -> dict[str, list[str]]:
    """Every wire name under `model` -> the objects that have it: built once, so that a file of thousands of
    unknown keys costs a lookup each."""
    found: dict[str, list[str]] = {}
    pending: list[tuple[type[pydantic.BaseModel], Location]] = [(model, ())]
    while pending:  # breadth first: shallowest homes first
        current, prefix = pending.pop(0)
        for field_name, field in current.model_fields.items():
            wire = field.alias or field_name
            if prefix and dotted(prefix) not in found.setdefault(wire, []):
                found[wire].append(dotted(prefix))
            inner = _model_in(field.annotation)
            if inner is not None and len(prefix) < MAX_DEPTH:
                pending.append((inner, (*prefix, wire)))
    return found


def _model_in(annotation: Any) -> type[pydantic.BaseModel] | None:
    """The one model an annotation holds (through Optional, list and Annotated), else None."""
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return annotation
    models = [m for m in map(_model_in, typing.get_args(annotation)) if m is not None]
    return models[0] if len(set(models)) == 1 else None
