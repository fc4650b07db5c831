"""Creating the objects of the trials `plan` starts, and queueing, finishing or deleting their Kueue Workloads;
used by `reconciler`, which writes each status change through `publish`.

A trial whose objects the API server refuses, or whose template does not render, fails at once: the same
spec would be refused again.
"""

from __future__ import annotations

import asyncio
import datetime
from typing import Any, Awaitable, Callable

from ringleader import topology
from ringleader.api.status import ExperimentStatus, Phase, TrialStatus
from ringleader.api.trial import Expansion
from ringleader.controller import admission, kube, rendering, trials
from ringleader.controller.settings import Settings

Publish = Callable[[ExperimentStatus, ExperimentStatus], Awaitable[None]]
"""Writes a status change (old, new) and announces it."""
KUEUE_MESSAGE_CHARACTERS = 32768  # a condition message's limit in Kubernetes


def _record(status: ExperimentStatus, index: int) -> TrialStatus:
    return next(t for t in status.trials if t.index == index)


async def _creation_failed(status: ExperimentStatus, record: TrialStatus, error: Exception, at: datetime.datetime,
                           publish: Publish) -> ExperimentStatus:
    failed = trials.create_failed(record, str(error), at)
    new = status.model_copy(update=dict(trials=[failed if t.index == record.index else t for t in status.trials]))
    await publish(status, new)
    return new


async def create_trials(kube_: kube.Kube, settings: Settings, body: dict[str, Any], expansion: Expansion,
                        status: ExperimentStatus, indices: tuple[int, ...], *, now: Callable[[], datetime.datetime],
                        publish: Publish) -> ExperimentStatus:
    """Each trial's Services and ConfigMaps, then its pods; returns the status with the trials that failed so."""
    by_index = {t.index: t for t in expansion.trials}
    for index in indices:
        record = _record(status, index)
        try:
            objects = rendering.objects(by_index[index], body, settings, record.run_id, record.restarts + 1)
            for obj in (o for o in objects if o["kind"] != "Pod"):  # first: pods resolve and mount them
                await kube_.create(obj)
            await asyncio.gather(*(kube_.create(o) for o in objects if o["kind"] == "Pod"))
        except (kube.InvalidObject, topology.TemplateError) as error:
            status = await _creation_failed(status, record, error, now(), publish)
    return status


async def act_on_workloads(kube_: kube.Kube, settings: Settings, body: dict[str, Any], expansion: Expansion,
                           status: ExperimentStatus, actions: tuple[tuple[int, admission.Action], ...],
                           found: dict[str, dict[str, Any]], *, now: Callable[[], datetime.datetime],
                           publish: Publish) -> ExperimentStatus:
    """Queue, finish or delete the trials' Kueue Workloads (`found`: the existing ones by trial name), after
    their pods were dealt with."""
    by_index = {t.index: t for t in expansion.trials}
    namespace = body["metadata"]["namespace"]
    for index, action in actions:
        trial, record = by_index[index], _record(status, index)
        existing = found.get(trial.name)
        if action == admission.Action.CREATE:
            try:
                await kube_.create(rendering.workload(trial, body, settings))
            except (kube.InvalidObject, topology.TemplateError) as error:
                status = await _creation_failed(status, record, error, now(), publish)
        elif existing is None:
            continue
        elif action == admission.Action.DELETE:
            await kube_.delete_workload(namespace, existing["metadata"]["name"], existing["metadata"].get("uid"))
        else:
            # Kueue's own reasons for a finished Workload; its quota is released at once.
            await kube_.finish_workload(namespace, existing["metadata"]["name"], {
                "type": "Finished", "status": "True",
                "reason": "Succeeded" if record.phase == Phase.SUCCEEDED else "Failed",
                "message": (record.message or record.phase.value)[:KUEUE_MESSAGE_CHARACTERS],
                "lastTransitionTime": now().strftime("%Y-%m-%dT%H:%M:%SZ"),
            })
    return status
