"""A trial's objects as the operator creates them: topology.render, GPU tolerations, owner references; used by `reconciler`.

Also the cheap questions asked at every reconcile (which pods a trial should have, which label
selects an experiment's pods), answered from topology's naming rules without rendering templates.
"""

from __future__ import annotations

from typing import Any

import kopf

from ringleader import topology
from ringleader.api import constants
from ringleader.api import trial as trial_
from ringleader.controller import settings as settings_
from ringleader.controller import trials
from ringleader.topology import names


def render_settings(settings: settings_.Settings) -> topology.RenderSettings:
    """The cluster-wide rendering choices, from the operator's settings (built once at startup)."""
    return topology.RenderSettings(
        image=settings.pods.default_image,
        image_pull_policy=settings.pods.image_pull_policy,
        gpu_resource_name=settings.pods.gpu_resource_name,
        scratch_limit=settings.pods.scratch_limit,
        default_tracking_uri=settings.tracking.default_uri,
    )


def pod_selector(experiment_name: str) -> str:
    return f"{constants.LABEL_EXPERIMENT}={names.label_value(experiment_name)}"


def expected_pods(trial: trial_.Trial) -> tuple[trials.ExpectedPod, ...]:
    return tuple(trials.ExpectedPod(names.pod(trial, slot), slot.role, slot.rank) for slot in trial.slots())


def _requests_gpu(pod: dict[str, Any], resource_name: str) -> bool:
    containers = pod.get("spec", {}).get("containers") or []
    return any(resource_name in ((c.get("resources") or {}).get("limits") or {}) for c in containers)


def objects(trial: trial_.Trial, owner: dict[str, Any], settings: settings_.Settings,
            rendered_with: topology.RenderSettings, run_id: str | None) -> list[dict[str, Any]]:
    """The trial's objects, owned by the experiment so that deleting it garbage-collects them."""
    found = topology.render(trial, rendered_with, run_id=run_id)
    tolerations = list(settings.pods.gpu_tolerations)
    for obj in found:
        # GPU node taints are a property of the cluster, not of the experiment: added here, to GPU pods only.
        if tolerations and obj["kind"] == "Pod" and _requests_gpu(obj, settings.pods.gpu_resource_name):
            spec = obj.setdefault("spec", {})
            spec["tolerations"] = [*(spec.get("tolerations") or []), *tolerations]
    kopf.adopt(found, owner=owner)
    return found
