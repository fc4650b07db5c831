"""Cross-field rules written once, enforced twice: as CEL by the API server and in pydantic by `ringleader validate`.

Each rule pairs a CEL expression with a Python predicate of the same meaning and one
message that says what to change. `ApiModel` (in `base.py`) runs the predicates after
field validation and publishes the CEL into the JSON schema as `x-kubernetes-validations`,
from which `crd.py` builds the CRD.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable


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
