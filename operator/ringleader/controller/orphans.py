"""Ends the MLflow runs of experiments deleted while the operator was down; started once at startup by `reconciler`.

A deletion never waits for the operator (no finalizer), so an experiment deleted while it is down
leaves its runs RUNNING. At startup the operator looks on its own tracking server (the one it holds
credentials for; experiments' other servers are theirs to tidy) for RUNNING sweep runs it made whose
experiment no longer exists, or exists with another uid (deleted and recreated), and ends them and
their open trial runs KILLED. Bounded (at most MAX_SWEEPS sweeps, MAX_CHILDREN trial runs each) and
idempotent: a run already ended is not found again.
"""

from __future__ import annotations

import asyncio
import logging

import kopf

from ringleader.controller import kube, reasons, recording
from ringleader.controller.settings import Settings

logger = logging.getLogger(__name__)
MAX_SWEEPS = 500  # open sweep runs looked at per startup: far more than any cluster runs at once
MAX_CHILDREN = 256  # trial runs of one sweep (api.spec.MAX_TRIALS)
ATTEMPTS = 10  # tries while MLflow is away, retry_seconds apart
MESSAGE = "the DistributedTrainingExperiment was deleted while the operator was down"


async def end_orphaned_runs(recorder: recording.MlflowCalls, kube_: kube.Kube, settings: Settings) -> int:
    """End the runs of experiments gone while the operator was down; the number of runs ended."""
    uri = settings.tracking.default_uri
    if uri is None:
        return 0
    for _ in range(ATTEMPTS):
        try:
            return await _end(recorder, kube_, settings, uri)
        except (recording.Unavailable, kopf.TemporaryError) as error:  # MLflow or the API server away
            logger.info("looking for runs of deleted experiments later: %s", error)
            await asyncio.sleep(settings.tracking.retry_seconds)
    logger.warning("gave up looking for MLflow runs of experiments deleted while the operator was down")
    return 0


async def _end(recorder: recording.MlflowCalls, kube_: kube.Kube, settings: Settings, uri: str) -> int:
    watched = settings.scope.namespaces
    ended = 0
    for sweep in await recorder.open_sweeps(uri, MAX_SWEEPS):
        if watched and sweep.namespace not in watched:
            continue  # another operator's, or one this operator may not look at
        body = await kube_.get_experiment(sweep.namespace, sweep.name)
        if body is not None and recording.parent_token(body["metadata"]["uid"]) == sweep.token:
            continue  # alive: its own passes close its runs
        children = await recorder.open_children(uri, sweep.run_id, MAX_CHILDREN)
        for run_id in [*children, sweep.run_id]:  # the parent last: a retry finds it still open
            await recorder.finish(uri, run_id, recording.KILLED, reason=reasons.EXPERIMENT_DELETED, message=MESSAGE)
            ended += 1
        logger.info("ended %d MLflow runs of %s/%s, deleted while the operator was down",
                    len(children) + 1, sweep.namespace, sweep.name)
    return ended
