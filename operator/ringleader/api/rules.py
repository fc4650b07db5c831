"""Cross-field rules written once, enforced twice: as CEL by the API server and in pydantic by `ringleader validate`.

Each rule pairs a CEL expression with a Python predicate of the same meaning and one
message that says what to change. `ApiModel` (in `base.py`) runs the predicates after
field validation and publishes the CEL into the JSON schema as `x-kubernetes-validations`,
from which `crd.py` builds the CRD. The rules that follow from the variants' tables (which
paradigms an architecture runs, which methods it takes, what needs servers) are built here,
CEL and Python side by side, for `spec.py`'s models to list; so is the skip reason of a
sweep's combination that breaks them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ringleader.api import variants
from ringleader.api.variants import Architecture, CompressionMethod, Paradigm


@dataclasses.dataclass(frozen=True)
class Rule:
    """A cross-field rule on one object of the API."""

    cel: str
    """CEL over `self` (the object as it appears on the wire, camelCase)."""
    message: str
    """What is wrong and how to fix it; shown by the API server and by `ringleader validate`."""
    holds: Callable[[Any], bool]
    """The same rule in Python, over the pydantic model instance."""
    field_path: str = ""
    """Where the error points, relative to the object (`.sync.staleness`); empty for the object itself."""
    reason: str = "FieldValueInvalid"

    def schema(self) -> dict[str, str]:
        entry = {"rule": self.cel, "message": self.message}
        if self.field_path:
            entry["fieldPath"] = self.field_path
        if self.reason != "FieldValueInvalid":
            entry["reason"] = self.reason
        return entry


def immutable(name: str) -> dict[str, str]:
    """A transition rule: once created, the field cannot change (checked by the API server only)."""
    return {
        "rule": "self == oldSelf",
        "message": f"`{name}` is immutable: create a new experiment to change it",
    }


def immutable_presence(name: str) -> dict[str, str]:
    """A transition rule on the parent: an optional field cannot be added or removed after creation.

    `self == oldSelf` on the field itself only runs when the field exists in both versions."""
    return {
        "rule": f"has(self.{name}) == has(oldSelf.{name})",
        "message": f"`spec.{name}` cannot be added or removed after creation: create a new experiment to change it",
    }


# CEL over the spec, generated from the variants' tables, and the Python twins the same rules read.

POD_RANKS_CEL = "(has(self.ranksPerPod) ? self.ranksPerPod : (self.resources.gpu > 0 ? self.resources.gpu : 1))"
"""The ranks each worker pod runs, in CEL over `workers` (Workers.pod_ranks)."""


def axis_size(name: str) -> str:
    """CEL over `sweep`: how many values the matrix gives axis `name` (1 when it does not sweep it)."""
    return f"(has(self.matrix.{name}) ? size(self.matrix.{name}) : 1)"


def swept_cel(name: str) -> str:
    """CEL over the spec: the sweep's matrix sweeps axis `name` (Python: `swept`)."""
    return f"(has(self.sweep) && has(self.sweep.matrix.{name}))"


def _uses_cel(paradigms: tuple[Paradigm, ...]) -> str:
    """CEL: the base paradigm (not swept) or a swept paradigm is one of `paradigms` (Python: `_paradigms_used`)."""
    names = ", ".join(f"'{p.value}'" for p in paradigms)
    return (
        f"((!{swept_cel('paradigm')} && self.sync.paradigm in [{names}]) || "
        f"({swept_cel('paradigm')} && self.sweep.matrix.paradigm.exists(p, p in [{names}])))"
    )


def _values_cel(name: str, base_value: str) -> str:
    """CEL: the swept values of axis `name`, or the base value alone when it is not swept."""
    return f"({swept_cel(name)} ? self.sweep.matrix.{name} : [{base_value}])"


def _names(values) -> str:
    return ", ".join(f"'{v.value}'" for v in values)


def _is_in_cel(expression: str, values) -> str:
    """CEL: `expression` is one of `values` (==, for one: a single choice reads as it always did)."""
    if not values:
        return "false"
    return f"{expression} == '{values[0].value}'" if len(values) == 1 else f"{expression} in [{_names(values)}]"


def _either(values, word: str = "or") -> str:
    """Enum members' values in a sentence: "A, B or C"."""
    return variants.either([v.value for v in values], word)


def paradigm_rule(architecture: Architecture) -> Rule:
    """A collective runs only its paradigms (variants.ARCHITECTURES), unless a sweep skips the combination."""
    traits = variants.ARCHITECTURES[architecture]
    others = [p for p in Paradigm if p not in traits.paradigms]
    elsewhere = [a for a, t in variants.ARCHITECTURES.items() if set(others) <= set(t.paradigms)]
    return Rule(
        cel=f"self.architecture != '{architecture.value}' || {_is_in_cel('self.sync.paradigm', traits.paradigms)} || "
        f"{swept_cel('architecture')} || {swept_cel('paradigm')}",
        message=f"`sync.paradigm` must be {_either(traits.paradigms)} when `architecture` is {architecture.value}: "
        f"{traits.paradigms_why}; use {_either(elsewhere)} for {_either(others)}",
        holds=lambda s: s.architecture != architecture
        or s.sync.paradigm in traits.paradigms
        or swept(s, "architecture")
        or swept(s, "paradigm"),
        field_path=".sync.paradigm",
    )


def staleness_rule() -> Rule:
    """The paradigms with a staleness bound (variants.STALE_PARADIGMS) need it, unless the sweep gives it."""
    stale = variants.STALE_PARADIGMS
    return Rule(
        cel=f"!{_uses_cel(stale)} || has(self.sync.staleness) || {swept_cel('staleness')}",
        message=f"`sync.staleness` is required when `sync.paradigm` is {_either(stale)}: set it to how many "
        "iterations the fastest worker may run ahead of the slowest (e.g. 3)",
        holds=lambda s: not (_paradigms_used(s) & set(stale))
        or s.sync.staleness is not None
        or swept(s, "staleness"),
        field_path=".sync.staleness",
    )


def max_staleness_rule() -> Rule:
    """The paradigms that move their threshold (variants.requiring('maxStaleness')) need its upper bound."""
    moving = variants.requiring("maxStaleness")
    return Rule(
        cel=f"!{_uses_cel(moving)} || has(self.sync.maxStaleness)",
        message=f"`sync.maxStaleness` is required when `sync.paradigm` is {_either(moving)}: "
        "set it to the upper bound s_U of the threshold (e.g. staleness 3, maxStaleness 12)",
        holds=lambda s: not (_paradigms_used(s) & set(moving)) or s.sync.max_staleness is not None,
        field_path=".sync.maxStaleness",
    )


def sweep_runs_rule() -> Rule:
    """A sweep of architectures and paradigms keeps at least one combination an architecture runs."""
    collectives = variants.COLLECTIVES
    runnable = " || ".join([f"!({_is_in_cel('a', collectives)})"] + [
        f"(a == '{c.value}' && self.sweep.matrix.paradigm.exists(p, "
        f"{_is_in_cel('p', variants.ARCHITECTURES[c].paradigms)}))" for c in collectives])
    allowed = [p for p in Paradigm if any(p in variants.ARCHITECTURES[c].paradigms for c in collectives)]
    runs_only = "; ".join(f"{c.value} runs {_either(variants.ARCHITECTURES[c].paradigms)} only" for c in collectives)
    return Rule(
        cel=f"!{swept_cel('architecture')} || !{swept_cel('paradigm')} || "
        f"self.sweep.matrix.architecture.exists(a, {runnable})",
        message=f"`sweep.matrix` has no valid combination: {runs_only}; add {_either(allowed)} to paradigm or "
        "another architecture",
        holds=lambda s: not (swept(s, "architecture") and swept(s, "paradigm"))
        or any(variants.runs(a, p) for a in s.sweep.matrix.architecture for p in s.sweep.matrix.paradigm),
        field_path=".sweep.matrix",
    )


def compression_rule() -> Rule:
    """Some architecture of the experiment takes some compression method of it (variants.CODECS)."""
    restricted = variants.RESTRICTED_METHODS
    groups: dict[tuple[Architecture, ...], list[CompressionMethod]] = {}
    for method in restricted:
        groups.setdefault(variants.CODECS[method].architectures, []).append(method)
    taken = " || ".join([f"!({_is_in_cel('m', restricted)})"] + [
        f"({_is_in_cel('m', methods)} && {_is_in_cel('a', architectures)})"
        for architectures, methods in groups.items()])
    free = [m for m in CompressionMethod if m not in restricted]
    needs = "; ".join(
        f"`compression.method` {_either(methods)} needs `architecture` {_either(architectures)} "
        f"({variants.either([variants.CODECS[m].sends for m in methods], 'and')} are combined by collectives): use "
        f"{_either(free)} with {_either([a for a in Architecture if a not in architectures])}, or sweep "
        f"{_either(architectures)} too" for architectures, methods in groups.items())
    return Rule(
        cel=f"{_values_cel('architecture', 'self.architecture')}.exists(a, "
        f"{_values_cel('compression', 'self.compression.method')}.exists(m, {taken}))",
        message=needs,
        holds=lambda s: any(variants.takes(a, m) for a in _architectures_used(s) for m in _methods_used(s)),
        field_path=".compression.method",
    )


_SERVERS_APART = "Apart"
"""`scheduling.placement.servers` Apart on the wire (spec.PlacementServers.APART), as the CEL compares it."""


def servers_apart_rule() -> Rule:
    """Servers Apart needs an architecture with parameter servers."""
    servers = variants.SERVER_ARCHITECTURES
    without = [a for a in Architecture if a not in servers]
    return Rule(
        cel=f"{_values_cel('architecture', 'self.architecture')}.exists(a, {_is_in_cel('a', servers)}) || "
        f"({swept_cel('placement')} ? !self.sweep.matrix.placement.exists(p, p.servers == '{_SERVERS_APART}') : "
        f"(!has(self.scheduling.placement) || self.scheduling.placement.servers != '{_SERVERS_APART}'))",
        message=f"`scheduling.placement.servers` Apart needs `architecture` {_either(servers)} "
        f"({_either(without, 'and')} have no servers to keep apart): set servers to Any, or sweep "
        f"{_either(servers)} too",
        holds=lambda s: any(a in servers for a in _architectures_used(s))
        or all(p.servers != _SERVERS_APART for p in _placements_used(s)),
        field_path=".scheduling.placement.servers",
    )


# The Python twins read an ExperimentSpec (typed Any: spec.py imports this module, not the other way round).

def _swept_values(spec: Any, name: str) -> list[Any] | None:
    """The values the sweep's matrix gives the field `name`; None when it does not sweep it."""
    return getattr(spec.sweep.matrix, name) if spec.sweep is not None else None


def swept(spec: Any, name: str) -> bool:
    """The sweep's matrix sweeps the field `name` (CEL: `swept_cel`)."""
    return _swept_values(spec, name) is not None


def _paradigms_used(spec: Any) -> set[Paradigm]:
    """The paradigms the experiment's trials run: the swept ones, else its own (CEL: `_uses_cel`)."""
    if spec.sweep is not None and spec.sweep.matrix.paradigm is not None:
        return set(spec.sweep.matrix.paradigm)
    return {spec.sync.paradigm}


def _architectures_used(spec: Any) -> list[Architecture]:
    found = _swept_values(spec, "architecture")
    return found if found is not None else [spec.architecture]


def _methods_used(spec: Any) -> list[CompressionMethod]:
    found = _swept_values(spec, "compression")
    return found if found is not None else [spec.compression.method]


def _placements_used(spec: Any) -> list[Any]:
    found = _swept_values(spec, "placement")
    return found if found is not None else [spec.scheduling.placement]


def unread_fields(spec: Any) -> list[str]:
    """One sentence per `sync` field the file sets that no trial's paradigm reads (`maxStaleness` with SSP alone).
    A warning, not a problem: a sweep over paradigms sets it for the trials that read it, and the rest ignore it."""
    used = _paradigms_used(spec)
    by_wire = {field.alias or name: name for name, field in type(spec.sync).model_fields.items()}
    unread = []
    for wire in variants.STALENESS_FIELDS:
        readers = variants.requiring(wire)
        if by_wire[wire] in spec.sync.model_fields_set and not used & set(readers):
            runs = ", ".join(sorted(p.value for p in used))
            verb = "uses" if len(readers) == 1 else "use"
            only = " and ".join(p.value for p in readers)
            unread.append(f"`spec.sync.{wire}` is set, but no trial reads it: only {only} {verb} it, and this "
                          f"experiment runs {runs}; remove it, or sweep a paradigm that reads it")
    return unread


def combination_problem(architecture: str, paradigm: str, compression: str = CompressionMethod.NONE.value,
                        servers: str = "Any") -> str | None:
    """Why a sweep combination (wire values) is skipped rather than run, or None when it is runnable."""
    traits = variants.ARCHITECTURES[Architecture(architecture)]
    if not variants.runs(architecture, paradigm):
        return f"{architecture} runs {_either(traits.paradigms)} only, not {paradigm}"
    if servers == _SERVERS_APART and not traits.has_servers:
        return f"{architecture} has no parameter servers to keep Apart"
    if not variants.takes(architecture, compression):
        taken_by = variants.CODECS[CompressionMethod(compression)].architectures
        return f"{architecture} does not take compression {compression} ({', '.join(a.value for a in taken_by)} only)"
    return None
