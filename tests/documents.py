"""Test documents built from a base: the one deep merge the test tiers share."""

from __future__ import annotations

from typing import Any


def merged(into: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """`into` with `update` merged in, nested mappings key by key (in place; returned for chaining)."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merged(into[key], value)
        else:
            into[key] = value
    return into
