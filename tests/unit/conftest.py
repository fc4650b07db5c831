"""Shared helpers of the unit tests: the repository's paths and a minimal experiment to vary."""

from __future__ import annotations

import copy
import pathlib
import sys
from typing import Any

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Runs from a plain checkout too, not only with PYTHONPATH=operator or an installed package.
if str(ROOT / "operator") not in sys.path:
    sys.path.insert(0, str(ROOT / "operator"))

MINIMAL = {
    "apiVersion": "ringleader.dev/v1alpha1",
    "kind": "DistributedTrainingExperiment",
    "metadata": {"name": "demo"},
    "spec": {},
}


def make_document(spec: dict[str, Any] | None = None, name: str = "demo") -> dict[str, Any]:
    """A CR body with `spec` (wire names) and the given name."""
    document = copy.deepcopy(MINIMAL)
    document["metadata"]["name"] = name
    document["spec"] = copy.deepcopy(spec or {})
    return document


@pytest.fixture
def experiment_document():
    """make_document, for tests: `experiment_document({"architecture": "PeerToPeer"})`."""
    return make_document


@pytest.fixture
def repo_root() -> pathlib.Path:
    return ROOT
