"""The reconcile loop of one experiment: observe, decide (`plan`), record, act; run by the work queue that `handlers`
feed.

Level-based: every pass starts from the API server's current state (the experiment, its pods) and
the status written by earlier passes, never from remembered events, so an operator restarted at any
point resumes correctly. Within a pass the status is written before pods are deleted or created:
a crash in between repeats the action (idempotently) instead of losing or double-counting it.

One exception keeps running experiments cheap: when a pass is due only because a running trial's
progress is (no event since the last full pass, no deadline, TTL or recheck due), it reads that one
log and writes the progress, nothing else. A full pass still follows every event, and comes at least
every `recheck_seconds`, which bounds what a lost watch event can hide.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import logging
import math
import time
from typing import Any

import kopf

from ringleader import api
from ringleader.api.spec import RunPolicy
from ringleader.api.status import ConditionType, ExperimentStatus, Phase
from ringleader.controller import (actions, admitter, conditions, due, estimates, events, experiment_runs, kube,
                                   notices, observation, orphans, plan, polling, progress_logs, reasons, recording,
                                   refusals, statuses, workqueue)
from ringleader.controller.settings import Settings

logger = logging.getLogger(__name__)
RECONCILE_FAILED = ConditionType.RECONCILE_FAILED
Key = tuple[str, str]  # (namespace, name)


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def key_of(body: dict[str, Any]) -> Key:
    return body["metadata"]["namespace"], body["metadata"]["name"]


@dataclasses.dataclass
class _Running:
    """What a progress-only pass needs, from the last full pass of an experiment with a running trial."""

    body: dict[str, Any]
    status: ExperimentStatus
    sweep: estimates.PlannedSweep
    """What the estimate needs of the spec, so a progress pass need not parse it."""
    reporters: dict[str, dict[str, Any] | None]
    """The pod whose log tells each running trial's progress (`progress_logs.reporter`), None while there is none."""
    full_at: float
    """Monotonic time of the next full pass: the earliest deadline, TTL expiry, tracking retry or recheck."""


def _slim(body: dict[str, Any]) -> dict[str, Any]:
    """What Events and the ReconcileFailed condition need of an experiment: its identity and conditions."""
    metadata = body["metadata"]
    return {"apiVersion": body.get("apiVersion"), "kind": body.get("kind"),
            "metadata": {k: metadata[k] for k in ("name", "namespace", "uid", "generation") if k in metadata},
            "status": {"conditions": (body.get("status") or {}).get("conditions") or []}}


class Controller:
    """What the handlers share: settings, API access, tracking, the work queue and a little memory."""

    def __init__(self, settings: Settings, kube_: kube.Kube, recorder: recording.MlflowCalls) -> None:
        self.settings = settings
        self.kube = kube_
        self.runs = experiment_runs.Runs(recorder, settings.tracking, settings.pods.render.image)
        self.admitter = admitter.Admitter(kube_, settings)
        self.queue = workqueue.WorkQueue(self.reconcile, error_backoff=settings.timing.error_backoff_seconds,
                                         max_backoff=settings.timing.max_error_backoff_seconds,
                                         max_errors=settings.timing.max_error_retries,
                                         on_failure=self._failed, on_success=self._succeeded,
                                         max_concurrent=settings.api.reconciles)
        # Memory that only saves work; losing it on restart repeats idempotent calls, nothing more.
        self._bodies: dict[Key, dict[str, Any]] = {}
        """Each experiment's identity and conditions (`_slim`), for telling the outcome of its last pass."""
        self.polls = polling.PollSchedule(settings.timing.progress_poll_seconds,
                                          settings.timing.max_progress_backoff_seconds,
                                          settings.timing.progress_start_poll_seconds,
                                          settings.timing.progress_start_window_seconds)
        self._running: dict[Key, _Running] = {}
        self._news: set[Key] = set()
        """Experiments with an event since their last full pass."""
        self._generations: dict[Key, int | None] = {}
        """The spec generation of each experiment's last event that asked for a pass (`is_news`)."""
        self._orphans: asyncio.Task | None = None

    def start(self) -> None:
        """Work that runs once per operator start, in the background: ending runs of experiments deleted meanwhile."""
        self._orphans = asyncio.get_running_loop().create_task(
            orphans.end_orphaned_runs(self.runs.recorder, self.kube, self.settings), name="end orphaned runs")

    async def close(self) -> None:
        if self._orphans is not None:
            self._orphans.cancel()
        await self.queue.close()
        await self.runs.close()
        self.kube.close()

    def request(self, key: Key, delay: float = 0.0) -> None:
        """News of an experiment (a change, an event of its pods): a full pass, in `delay` seconds or sooner if
        one is due sooner. A delay only gathers news into fewer passes: the pass is due until it has run."""
        self._news.add(key)
        self.queue.request(key, delay)

    def is_news(self, event_type: str | None, body: dict[str, Any]) -> bool:
        """Whether an experiment's watch event asks for a pass: it was listed (an operator's start, a watch
        resumed after a gap), created, or its spec changed (a new generation). Its status and metadata
        changes, most of its events, do not. The memory of generations only saves passes: lost on a restart,
        the listing that follows asks for a pass of every experiment."""
        if event_type == "DELETED":
            return False
        key, generation = key_of(body), body["metadata"].get("generation")
        if event_type == "MODIFIED" and key in self._generations and self._generations[key] == generation:
            return False
        self._generations[key] = generation
        return True

    # -- the pass -------------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> float | None:
        """One pass over one experiment; returns seconds until the next pass is due (None: on the next event)."""
        try:
            return await self._pass(key)
        except kube.NamespaceTerminating:
            self._namespace_deleted(key)
            return None
        finally:
            # Kept between passes for `_failed` and `_succeeded`: a slim copy, since a thousand whole
            # experiments (spec, status, managedFields) would cost tens of MB.
            if key in self._bodies:
                self._bodies[key] = _slim(self._bodies[key])

    async def _pass(self, key: Key) -> float | None:
        running = self._running.pop(key, None)
        if running is not None and key not in self._news and time.monotonic() < running.full_at:
            return await self._progress_pass(key, running)
        self._news.discard(key)
        namespace, name = key
        body = await self.kube.get_experiment(namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        self._bodies[key] = body
        seen_at, old = now(), statuses.read(body)
        try:
            experiment = api.parse({k: v for k, v in body.items() if k != "status"}, f"{namespace}/{name}")
            expansion = api.expand(experiment)
        except api.SpecError as error:
            return await self._refuse(body, old, (reasons.INVALID_SPEC, "; ".join(error.problems)), seen_at)
        refused = refusals.refusal_condition(experiment, expansion, self.settings.pods,
                                             self.runs.recorder.refusal(experiment.spec.tracking.uri))
        if refused is not None:
            return await self._refuse(body, old, refused, seen_at)
        seen, workloads = await observation.observe(self.kube, self.polls, body, old, expansion, at=seen_at,
                                                    queue_name=experiment.spec.scheduling.queue_name)
        room = await self.admitter.room(body, experiment, expansion, old)
        # No await from here to `settle`: no other pass admits into the room this one takes.
        decision = plan.decide(experiment, expansion, old, dataclasses.replace(seen, capacity=room),
                               startup_deadline_seconds=self.settings.timing.startup_deadline_seconds,
                               capacity_retry_seconds=self.settings.timing.capacity_retry_seconds)
        self.admitter.settle(body, decision, room)
        if plan.pods_went(old, decision.status) and await self.kube.namespace_terminating(namespace):
            self._namespace_deleted(key)  # the namespace controller took the pods: no restart
            return None
        new, retry_in = await self._act(key, body, experiment, expansion, old, decision, workloads)
        return await self._next_pass(key, body, experiment, expansion, old, new, decision, retry_in, seen.pods)

    async def _act(self, key: Key, body: dict[str, Any], experiment, expansion, old: ExperimentStatus,
                   decision: plan.Plan, workloads: dict[str, dict[str, Any]]) -> tuple[ExperimentStatus, float | None]:
        """Carry out the decision: runs, status, pods, Workloads, then the runs of ended trials. Returns the status
        written and when MLflow, if it failed, is to be tried again."""
        # Runs first: a starting trial's run id goes into its pods' environment.
        new, retry_tracking = await self.runs.start(key, body, experiment, expansion, decision.status, decision.create)
        await self._publish(body, old, new)
        namespace = body["metadata"]["namespace"]
        force = set(decision.force_delete)
        await asyncio.gather(*(self.kube.delete_pod(namespace, pod, force=pod in force)
                               for pod in sorted(set(decision.delete) | force)))
        publish = functools.partial(self._publish, body)
        new = await actions.act_on_workloads(self.kube, self.settings, body, expansion, new, decision.workloads,
                                             workloads, now=now, publish=publish)
        new = await actions.create_trials(self.kube, self.settings, body, expansion, new, decision.create, now=now,
                                          publish=publish)
        reported, retry_end = await self.runs.end(key, body, experiment, expansion, new)
        if reported is not new:
            await self._publish(body, new, reported)
            new = reported
        retries = [r for r in (retry_tracking, retry_end) if r is not None]
        return new, min(retries) if retries else None

    async def _next_pass(self, key: Key, body: dict[str, Any], experiment, expansion, old: ExperimentStatus,
                         new: ExperimentStatus, decision: plan.Plan, retry_in: float | None,
                         pods: dict[str, list[dict[str, Any]]]) -> float | None:
        """Seconds until the next pass (None: on the next event); deletes an experiment whose TTL expired."""
        run_policy = experiment.spec.run_policy
        expiry = due.expiry_of(new, run_policy)
        if expiry is not None and now() >= expiry:
            await self._expire(body, run_policy)
            return None
        if [t.phase for t in old.trials] != [t.phase for t in new.trials]:
            # A transition may need a follow-up no pod event will announce (a trial restarting with no pod
            # left to delete, a freed slot): look again, after the pod-event delay, so that the events of the
            # pods this pass created or deleted share that pass; a pass that changes nothing ends the chain.
            return self.settings.timing.pod_event_delay_seconds
        full_in = due.next_wake(new, run_policy, now(), self.settings.timing, retry_tracking_in=retry_in,
                                pods_due=decision.due)
        running_now = [t.name for t in new.trials if t.phase == Phase.RUNNING]
        if not running_now:
            return full_in
        # Until the next full pass, progress-only passes read the running trials' logs.
        clock = time.monotonic()
        full_in = min(math.inf if full_in is None else full_in, self.settings.timing.recheck_seconds)
        self._running[key] = _Running(body, new, estimates.PlannedSweep.of(expansion),
                                      {n: progress_logs.reporter(pods.get(n, [])) for n in running_now},
                                      clock + full_in)
        progress_in = self.polls.next_in(key, clock)
        return min(full_in, self.settings.timing.progress_poll_seconds if progress_in is None else progress_in)

    async def _progress_pass(self, key: Key, running: _Running) -> float:
        """Only the progress of the running trials, from the last full pass's pods: one log read and one small
        status patch per due trial. Any event makes the next pass a full one."""
        self._running[key] = running
        fresh = await progress_logs.read(self.kube, self.polls, running.body, running.status, running.reporters)
        if plan.records_news(running.status, self.polls.waiting(key)):
            # A rank now waits for MLflow to take its records: a full pass says RecordsPending.
            self._running.pop(key, None)
            self._news.add(key)
            return 0.0
        new = plan.with_progress(running.status, fresh, running.sweep)
        await self._publish(running.body, running.status, new)
        running.status = new
        clock = time.monotonic()
        progress_in = self.polls.next_in(key, clock)
        return max(0.0, min(running.full_at - clock, math.inf if progress_in is None else progress_in))

    async def _refuse(self, body: dict[str, Any], old: ExperimentStatus, refusal: tuple[str, str],
                      at: datetime.datetime) -> None:
        reason, message = refusal
        generation = body["metadata"].get("generation")
        await self._publish(body, old, plan.invalid(old, reason, message, now=at, generation=generation))

    async def _publish(self, body: dict[str, Any], old: ExperimentStatus, new: ExperimentStatus) -> None:
        """Write the new status (a minimal merge patch), then announce each transition as an Event."""
        patch = statuses.merge_patch(body.get("status") or {}, statuses.dump(new))
        if patch:
            namespace, name = key_of(body)
            await self.kube.patch_status(namespace, name, patch)
            body["status"] = statuses.dump(new)
        for event in events.transitions(old, new):
            kopf.event(body, type=event.type, reason=event.reason, message=event.message)
        line = events.log_line(old, new)
        if line is not None:
            logger.info("experiment %s/%s: %s", *key_of(body), line)

    # -- acting on objects -------------------------------------------------------------------

    async def _expire(self, body: dict[str, Any], run_policy: RunPolicy) -> None:
        seconds = run_policy.ttl_seconds_after_finished
        kopf.info(body, reason="TTLExpired",
                  message=f"deleting the experiment {seconds}s after it finished (runPolicy.ttlSecondsAfterFinished)")
        namespace, name = key_of(body)
        await self.kube.delete_experiment(namespace, name, body["metadata"]["uid"])

    # -- deletion -------------------------------------------------------------------------------

    def _namespace_deleted(self, key: Key) -> None:
        """The experiment's namespace is being deleted: no restart and no retry; its runs end KILLED saying so."""
        body = self._bodies.get(key)
        logger.info("experiment %s/%s: its namespace is being deleted; its MLflow runs end KILLED", *key)
        if body is not None:
            self.forget(body, reasons.NAMESPACE_DELETED, f"the namespace {key[0]} was deleted")

    def forget(self, body: dict[str, Any], reason: str = reasons.EXPERIMENT_DELETED,
               message: str = "the DistributedTrainingExperiment was deleted") -> None:
        """The experiment is gone: stop reconciling it, and end its open MLflow runs (KILLED) in the background."""
        key = key_of(body)
        self.queue.forget(key)
        self._bodies.pop(key, None)
        self.polls.forget(key)
        self._running.pop(key, None)
        self._news.discard(key)
        self._generations.pop(key, None)
        self.admitter.forget(*key)
        self.runs.forget(key, body, reason, message)

    # -- errors, where users look --------------------------------------------------------------

    async def _failed(self, key: Key, failure: workqueue.PassFailure) -> None:
        """A failed pass: a Warning Event and the ReconcileFailed condition, with the count and the next attempt."""
        body = self._bodies.get(key)
        notice = notices.notice(failure)
        if body is None or notice is None:
            return
        kopf.warn(body, reason=notice.reason, message=notice.message)
        await self._set_reconcile_failed(body, True, notice.reason, notice.message)

    async def _succeeded(self, key: Key) -> None:
        body = self._bodies.get(key)
        if body is not None and conditions.is_true(statuses.read_conditions(body), RECONCILE_FAILED):
            message = "the operator's last pass over the experiment succeeded"
            kopf.info(body, reason=reasons.RECONCILED, message=message)
            await self._set_reconcile_failed(body, False, reasons.RECONCILED, message)

    async def _set_reconcile_failed(self, body: dict[str, Any], value: bool, reason: str, message: str) -> None:
        # Only the conditions are written: they parse even when the rest of the status does not.
        found = statuses.read_conditions(body)
        new = conditions.set_condition(found, RECONCILE_FAILED, value, reason, message, now=now(),
                                       generation=body["metadata"].get("generation"))
        if new is found:
            return
        dumped = statuses.dump_conditions(new)
        namespace, name = key_of(body)
        try:
            await self.kube.patch_status(namespace, name, {"conditions": dumped})
        except kopf.TemporaryError as error:  # the status itself may be what the operator may not write
            logger.warning("could not write the ReconcileFailed condition of %s/%s: %s", namespace, name, error)
            return
        body.setdefault("status", {})["conditions"] = dumped
