"""Small experiments for the operator tests, and the questions the tests ask of their status."""

from __future__ import annotations

import copy
import datetime
import json
from typing import Any

from ringleader.api import constants

SMALL = {"cpu": "100m", "memory": "128Mi"}
SUMMARY = {"throughput": 512.5, "iterationTimeP50Seconds": 0.05, "iterationTimeP95Seconds": 0.08,
           "computeFraction": 0.6, "commFraction": 0.3, "waitFraction": 0.1, "stragglerRank": 2}


def experiment(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    """A parameter-server experiment of 1 server and 2 workers, small pods, 10 iterations; `spec` overrides."""
    base = {
        "architecture": "ParameterServer",
        "parameterServers": {"replicas": 1, "resources": SMALL},
        "workers": {"replicas": 2, "resources": SMALL},
        "model": {"name": "mlp", "iterations": 10, "warmupIterations": 1},
    }
    merged = copy.deepcopy(base)
    for key, value in spec.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return {"apiVersion": constants.API_VERSION, "kind": constants.KIND,
            "metadata": {"name": name, "namespace": namespace}, "spec": merged}


def condition(dte: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    for found in ((dte or {}).get("status") or {}).get("conditions") or []:
        if found["type"] == type_:
            return found
    return {}


def is_true(dte: dict[str, Any] | None, type_: str) -> bool:
    return condition(dte, type_).get("status") == "True"


def phase(dte: dict[str, Any] | None) -> str | None:
    return ((dte or {}).get("status") or {}).get("phase")


def trials(dte: dict[str, Any] | None) -> list[dict[str, Any]]:
    return ((dte or {}).get("status") or {}).get("trials") or []


def time_of(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def role(pod: dict[str, Any]) -> str:
    return pod["metadata"]["labels"][constants.LABEL_ROLE]


def rank(pod: dict[str, Any]) -> int:
    return int(pod["metadata"]["labels"][constants.LABEL_RANK])


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or []}


def summary_message() -> str:
    return json.dumps(SUMMARY)
