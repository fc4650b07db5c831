"""Reading an experiment's recorded status from its body, and writing a new one as a minimal merge patch; used by
`reconciler`."""

from __future__ import annotations

from typing import Any

import kopf
import pydantic

from ringleader.api.status import Condition, ExperimentStatus

_MISSING = object()


class Unreadable(kopf.PermanentError):
    """The recorded status does not parse: retrying cannot help until a person fixes or recreates the experiment."""


def read(body: dict[str, Any]) -> ExperimentStatus:
    """The status the operator last wrote. An unreadable one is a PermanentError: starting over would
    delete running pods, so the experiment is left alone until a person looks."""
    raw = dict(body.get("status") or {})
    raw.pop("kopf", None)  # kopf's own bookkeeping, should an older kopf setting have left some
    try:
        return ExperimentStatus.model_validate(raw)
    except pydantic.ValidationError as error:
        raise Unreadable(f"status of the experiment is unreadable ({error.error_count()} problems: "
                                  f"{error.errors()[0]['loc']} {error.errors()[0]['msg']}); "
                                  "delete and recreate it") from None


_CONDITIONS = pydantic.TypeAdapter(list[Condition])


def read_conditions(body: dict[str, Any]) -> list[Condition]:
    """The experiment's conditions alone: readable even when the rest of the status is not; [] when they are not
    either."""
    try:
        return _CONDITIONS.validate_python((body.get("status") or {}).get("conditions") or [])
    except pydantic.ValidationError:
        return []


def dump_conditions(found: list[Condition]) -> list[dict[str, Any]]:
    return [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in found]


def dump(status: ExperimentStatus) -> dict[str, Any]:
    """The status as it appears on the wire: camelCase, unset fields left out."""
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def merge_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that turns `old` into `new`; empty when they are equal.

    Lists are replaced whole (as merge patches do), maps key by key, and keys that disappeared are
    sent as null so stale fields (an old summary, a vanished role's counts) do not linger."""
    patch: dict[str, Any] = {key: None for key in old.keys() - new.keys()}
    for key, value in new.items():
        before = old.get(key, _MISSING)
        if isinstance(value, dict) and isinstance(before, dict):
            nested = merge_patch(before, value)
            if nested:
                patch[key] = nested
        elif before != value:
            patch[key] = value
    return patch
