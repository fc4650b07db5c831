"""The Kueue Workload that admits one trial as a whole, built from the trial's rendered pods; the operator calls it.

Kueue's documented way for a custom workload API to be queued is to create a Workload for each of its
units: here, one per trial. Its pod sets are the rendered pods themselves, grouped by shape (parameter
servers, workers, each worker group), so the quota Kueue reserves is exactly what the pods will request,
templates overridden or not. The templates still own the pod shape; this module only reads it. A Pack
placement adds Kueue's topology request to the pod sets (`placement.kueue_topology_requests`).
"""

from __future__ import annotations

import json
from typing import Any

from ringleader.api import constants
from ringleader.api.trial import Trial
from ringleader.topology import names, placement, rendering

API_VERSION = "kueue.x-k8s.io/v1beta1"
KIND = "Workload"
MAX_POD_SETS = 8  # Kueue's limit on spec.podSets
# What Kueue reads of a pod to reserve quota and pick a resource flavor; the rest of the pod is irrelevant to it.
_CONTAINER_FIELDS = ("name", "image", "resources")
_POD_FIELDS = ("nodeSelector", "tolerations", "affinity", "runtimeClassName")


def _template(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod["spec"]
    containers = [{k: c[k] for k in _CONTAINER_FIELDS if k in c} for c in spec.get("containers") or []]
    template = {k: spec[k] for k in _POD_FIELDS if k in spec}
    template["containers"] = containers
    template["restartPolicy"] = spec.get("restartPolicy", "Never")
    return {"spec": template}


def _pod_set_name(pod: dict[str, Any]) -> str:
    labels = pod["metadata"].get("labels") or {}
    group = labels.get(constants.LABEL_WORKER_GROUP)
    role = labels.get(constants.LABEL_ROLE) or "main"
    return f"{role}-{group}" if group else role


def pod_sets(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trial's pods as Kueue pod sets, in rank order: one per role (per worker group) and shape, with its count."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for pod in (o for o in objects if o["kind"] == "Pod"):
        template = _template(pod)
        key = (_pod_set_name(pod), json.dumps(template, sort_keys=True))
        if key in found:
            found[key]["count"] += 1
            continue
        name = key[0]
        taken = {s["name"] for s in found.values()}
        suffix = 1
        while name in taken:  # an overridden template gave one role two shapes
            name, suffix = f"{key[0]}-{suffix}", suffix + 1
        found[key] = {"name": name, "count": 1, "template": template}
    return list(found.values())


def workload(trial: Trial, objects: list[dict[str, Any]], queue_name: str) -> dict[str, Any]:
    """The Workload of `trial` (its rendered `objects`) in LocalQueue `queue_name`.

    TemplateError past 8 pod sets: the spec allows at most 7 worker groups, so only an overridden template
    that gives pods of one role different shapes gets there."""
    sets = pod_sets(objects)
    if len(sets) > MAX_POD_SETS:
        raise rendering.TemplateError(f"trial {trial.name} has {len(sets)} pod shapes "
                                      f"({', '.join(s['name'] for s in sets)}) but a "
                         f"Kueue Workload holds at most {MAX_POD_SETS} pod sets: give each role one pod shape")
    requests = placement.kueue_topology_requests(trial.spec.scheduling.placement, sets)
    sets = [{**s, "topologyRequest": r} if r else s for s, r in zip(sets, requests)]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": names.workload(trial), "namespace": trial.namespace,
                     "labels": rendering.trial_labels(trial)},
        "spec": {"queueName": queue_name, "active": True, "podSets": sets},
    }
