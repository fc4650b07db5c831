"""What a full pass reads of the cluster for one experiment: its pods, its Kueue Workloads and its running
trials' progress, gathered into `plan.Observation`; used by `reconciler`."""

from __future__ import annotations

import datetime
from typing import Any

from ringleader.api import constants
from ringleader.api.status import ExperimentStatus, Phase
from ringleader.api.trial import Expansion
from ringleader.controller import admission, kube, plan, pods, polling, progress_logs, rendering


def _owned_by(obj: dict[str, Any], uid: str) -> bool:
    # The label selects by name; the owner uid excludes objects of an older experiment that had the same name.
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or [])


def _trial_of(obj: dict[str, Any]) -> str:
    return pods.labels(obj).get(constants.LABEL_TRIAL, "")


async def observe(kube_: kube.Kube, polls: polling.PollSchedule, body: dict[str, Any], old: ExperimentStatus,
                  expansion: Expansion, *, queue_name: str | None,
                  at: datetime.datetime) -> tuple[plan.Observation, dict[str, dict[str, Any]]]:
    """The observation `plan.decide` takes, and the experiment's Workloads by trial name (for acting on them)."""
    namespace, name, uid = body["metadata"]["namespace"], body["metadata"]["name"], body["metadata"]["uid"]
    # An experiment whose status records no trial has no pods: the status is written before any pod is created.
    # Its first pass skips the LIST, which costs the API server a scan of the namespace's pods (if that
    # status were lost, the creates would answer AlreadyExists, which counts as created).
    listed = await kube_.list_pods(namespace, rendering.pod_selector(name)) if old.trials else []
    by_trial: dict[str, list[dict[str, Any]]] = {}
    for pod in listed:
        if _owned_by(pod, uid):
            by_trial.setdefault(_trial_of(pod), []).append(pod)
    workloads: dict[str, dict[str, Any]] = {}
    if queue_name:
        for workload in await kube_.list_workloads(namespace, rendering.pod_selector(name)):
            if _owned_by(workload, uid):
                workloads[_trial_of(workload)] = workload
    reporters = {t.name: progress_logs.reporter(by_trial.get(t.name, [])) for t in old.trials
                 if t.phase == Phase.RUNNING}
    seen = plan.Observation(
        now=at, generation=body["metadata"].get("generation"), pods=by_trial,
        expected={t.name: rendering.expected_pods(t) for t in expansion.trials},
        progress=await progress_logs.read(kube_, polls, body, old, reporters),
        waiting=polls.waiting((namespace, name)),
        workloads={trial: admission.of(w) for trial, w in workloads.items()},
    )
    return seen, workloads
