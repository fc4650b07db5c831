"""The reconcile loop of one experiment: observe, decide (`plan`), record, act; run by the work queue that `handlers` feed.

Level-based: every pass starts from the API server's current state (the experiment, its pods) and
the status written by earlier passes, never from remembered events, so an operator restarted at any
point resumes correctly. Within a pass the status is written before pods are deleted or created:
a crash in between repeats the action (idempotently) instead of losing or double-counting it.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
from typing import Any, Hashable

import kopf

from ringleader import api
from ringleader.api import constants
from ringleader.api import spec as spec_
from ringleader.api import status as status_
from ringleader.controller import due, events, kube, plan, progress, recording, rendering, statuses, trials, workqueue
from ringleader.controller import pods as pods_
from ringleader.controller import settings as settings_
from ringleader.topology import render as render_

logger = logging.getLogger(__name__)
Phase = status_.Phase
Key = tuple[str, str]  # (namespace, name)
PODGROUPS_DISABLED = "PodGroupsDisabled"
TRACKING_UNAVAILABLE = "TrackingUnavailable"
TRACKING_AVAILABLE = "TrackingAvailable"
KILL_ATTEMPTS = 10  # tries to mark a deleted experiment's runs KILLED while MLflow is away


def now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def key_of(body: dict[str, Any]) -> Key:
    return body["metadata"]["namespace"], body["metadata"]["name"]


def _owned_by(pod: dict[str, Any], uid: str) -> bool:
    # The label selects by name; the owner uid excludes pods of an older experiment that had the same name.
    return any(ref.get("uid") == uid for ref in pod["metadata"].get("ownerReferences") or [])


class Controller:
    """What the handlers share: settings, API access, tracking, the work queue and a little memory."""

    def __init__(self, settings: settings_.Settings, kube_: kube.Kube, recorder: recording.Recorder) -> None:
        self.settings = settings
        self.kube = kube_
        self.recorder = recorder
        self.render_settings = rendering.render_settings(settings)
        self.queue = workqueue.WorkQueue(self.reconcile, error_backoff=settings.timing.error_backoff_seconds,
                                         max_errors=settings.timing.max_error_retries, on_give_up=self._gave_up)
        # Memory that only saves work; losing it on restart repeats idempotent calls, nothing more.
        self._bodies: dict[Key, dict[str, Any]] = {}
        self._progress: dict[Key, tuple[float, dict[str, int]]] = {}
        self._closed_runs: set[str] = set()
        self._late_runs: set[str] = set()  # runs created after their pods: no rank logged their summary
        self._tracking_down: set[Key] = set()
        self._background: set[asyncio.Task] = set()

    async def close(self) -> None:
        await self.queue.close()
        for task in list(self._background):
            task.cancel()
        self.recorder.close()

    # -- the pass -------------------------------------------------------------------------------

    async def reconcile(self, key: Hashable) -> float | None:
        """One pass over one experiment; returns seconds until the next pass is due (None: on the next event)."""
        namespace, name = key
        body = await self.kube.get_experiment(namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        self._bodies[key] = body
        seen_at = now()
        generation = body["metadata"].get("generation")
        old = statuses.read(body)
        try:
            experiment = api.parse({k: v for k, v in body.items() if k != "status"}, f"{namespace}/{name}")
            expansion = api.expand(experiment)
        except api.SpecError as error:
            return await self._refuse(body, old, plan.INVALID_SPEC, "; ".join(error.problems), seen_at, generation)
        if not self.settings.pods.pod_groups and self._uses_pod_groups(experiment, expansion):
            message = ("`scheduling.podGroup` needs PodGroups, which this operator was installed without: "
                       "install the chart with podGroups.enabled=true (and a gang scheduler), or set podGroup to None")
            return await self._refuse(body, old, PODGROUPS_DISABLED, message, seen_at, generation)

        uid = body["metadata"]["uid"]
        found = [p for p in await self.kube.list_pods(namespace, rendering.pod_selector(name)) if _owned_by(p, uid)]
        by_trial: dict[str, list[dict[str, Any]]] = {}
        for pod in found:
            by_trial.setdefault(pods_.labels(pod).get(constants.LABEL_TRIAL, ""), []).append(pod)
        seen = plan.Observation(
            now=seen_at, generation=generation, pods=by_trial,
            expected={t.name: rendering.expected_pods(t) for t in expansion.trials},
            progress=await self._read_progress(key, old, by_trial),
        )
        decision = plan.decide(experiment, expansion, old, seen)
        uri = self.recorder.uri_for(experiment.spec.tracking.uri)
        new, retry_tracking = await self._start_runs(key, body, experiment, expansion, decision, uri)

        await self._publish(body, old, new)
        await asyncio.gather(*(self.kube.delete_pod(namespace, pod) for pod in decision.delete))
        new = await self._create_trials(body, expansion, new, decision.create)
        retry_end = await self._end_runs(key, body, expansion, new, uri)

        run_policy = experiment.spec.run_policy
        expiry = due.expiry_of(new, run_policy)
        if expiry is not None and now() >= expiry:
            await self._expire(body, run_policy)
            return None
        if [t.phase for t in old.trials] != [t.phase for t in new.trials]:
            # A transition may need a follow-up no pod event will announce (a trial restarting with no pod
            # left to delete, a freed slot): look again at once; a pass that changes nothing ends the chain.
            return 0.0
        retries = [r for r in (retry_tracking, retry_end) if r is not None]
        return due.next_wake(new, run_policy, now(), self.settings.timing,
                             retry_tracking_in=min(retries) if retries else None)

    @staticmethod
    def _uses_pod_groups(experiment, expansion) -> bool:
        return any(t.spec.scheduling.pod_group != spec_.PodGroupScheduler.NONE for t in expansion.trials)

    async def _refuse(self, body, old, reason: str, message: str, at: datetime.datetime, generation) -> None:
        await self._publish(body, old, plan.invalid(old, reason, message, now=at, generation=generation))
        return None

    async def _publish(self, body: dict[str, Any], old: status_.ExperimentStatus, new: status_.ExperimentStatus) -> None:
        """Write the new status (a minimal merge patch), then announce each transition as an Event."""
        patch = statuses.merge_patch(body.get("status") or {}, statuses.dump(new))
        if patch:
            namespace, name = key_of(body)
            await self.kube.patch_status(namespace, name, patch)
            body["status"] = statuses.dump(new)
        for event in events.transitions(old, new):
            kopf.event(body, type=event.type, reason=event.reason, message=event.message)

    # -- acting on pods -------------------------------------------------------------------------

    async def _create_trials(self, body, expansion, status: status_.ExperimentStatus,
                             indices: tuple[int, ...]) -> status_.ExperimentStatus:
        by_index = {t.index: t for t in expansion.trials}
        for index in indices:
            trial = by_index[index]
            record = next(t for t in status.trials if t.index == index)
            try:
                objects = rendering.objects(trial, body, self.settings, self.render_settings, record.run_id)
                others = [o for o in objects if o["kind"] != "Pod"]
                for obj in others:  # Service and ConfigMap first: pods resolve and mount them
                    await self.kube.create(obj)
                await asyncio.gather(*(self.kube.create(o) for o in objects if o["kind"] == "Pod"))
            except (kube.InvalidObject, render_.TemplateError) as error:
                failed = trials.create_failed(record, str(error), now())
                new = status.model_copy(update=dict(
                    trials=[failed if t.index == index else t for t in status.trials]))
                await self._publish(body, status, new)
                status = new
        return status

    async def _expire(self, body: dict[str, Any], run_policy: spec_.RunPolicy) -> None:
        seconds = run_policy.ttl_seconds_after_finished
        kopf.info(body, reason="TTLExpired",
                  message=f"deleting the experiment {seconds}s after it finished (runPolicy.ttlSecondsAfterFinished)")
        namespace, name = key_of(body)
        await self.kube.delete_experiment(namespace, name, body["metadata"]["uid"])

    # -- progress -------------------------------------------------------------------------------

    async def _read_progress(self, key: Key, old: status_.ExperimentStatus,
                             by_trial: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
        """The slowest worker's iteration of each running trial, read at most once per poll interval."""
        running = [t.name for t in old.trials if t.phase == Phase.RUNNING]
        if not running:
            self._progress.pop(key, None)
            return {}
        polled_at, known = self._progress.get(key, (None, {}))
        clock = time.monotonic()
        if polled_at is not None and clock - polled_at < self.settings.timing.progress_poll_seconds * 0.95:
            return known
        fresh: dict[str, int] = {}
        for name in running:
            workers = progress.readable_workers(by_trial.get(name, []))
            if not workers:
                continue
            texts = await asyncio.gather(*(
                self.kube.read_log(key[0], pods_.name(p), (p["spec"].get("containers") or [{}])[0].get("name"),
                                   tail_lines=progress.TAIL_LINES, limit_bytes=progress.LIMIT_BYTES)
                for p in workers))
            if any(text is None for text in texts):
                if name in known:  # an unreadable log says nothing; keep what was known
                    fresh[name] = known[name]
                continue
            fresh[name] = progress.slowest(progress.last_iteration(text) for text in texts)
        self._progress[key] = (clock, fresh)
        return fresh

    # -- tracking -------------------------------------------------------------------------------

    def _tracking_failed(self, key: Key, body, error: recording.Unavailable) -> float:
        if key not in self._tracking_down:
            self._tracking_down.add(key)
            kopf.warn(body, reason=TRACKING_UNAVAILABLE,
                      message=f"{error}; the experiment goes on and its runs are recorded when MLflow answers")
        return self.settings.tracking.retry_seconds

    def _tracking_worked(self, key: Key, body) -> None:
        if key in self._tracking_down:
            self._tracking_down.discard(key)
            kopf.info(body, reason=TRACKING_AVAILABLE, message="MLflow answers again; runs are being recorded")

    async def _start_runs(self, key: Key, body, experiment, expansion, decision: plan.Plan,
                          uri: str | None) -> tuple[status_.ExperimentStatus, float | None]:
        """The parent run, and a run for each trial about to start (its id goes into the pods' environment)."""
        status = decision.status
        if uri is None:
            return status, None
        uid = body["metadata"]["uid"]
        by_name = {t.name: t for t in expansion.trials}
        mlflow = status.mlflow
        records = list(status.trials)
        retry = None
        try:
            if not (mlflow.experiment_id and mlflow.run_id):
                experiment_id, run_id = await self.recorder.start_parent(uri, experiment, uid)
                mlflow = status_.MlflowStatus(experiment_id=experiment_id, run_id=run_id,
                                              url=self.recorder.ui_url(uri, experiment_id))
            for position, record in enumerate(records):
                starting = record.index in decision.create
                started = record.phase not in (Phase.PENDING, Phase.SUSPENDED)
                if record.run_id is None and (starting or started):
                    run_id = await self.recorder.start_trial(uri, mlflow.experiment_id, mlflow.run_id,
                                                             by_name[record.name], uid)
                    if not starting:
                        self._late_runs.add(run_id)
                    records[position] = record.model_copy(update={"run_id": run_id})
        except recording.Unavailable as error:
            retry = self._tracking_failed(key, body, error)
        else:
            self._tracking_worked(key, body)
        return status.model_copy(update=dict(mlflow=mlflow, trials=records)), retry

    async def _end_runs(self, key: Key, body, expansion, status: status_.ExperimentStatus,
                        uri: str | None) -> float | None:
        """End the runs of finished trials, and at the end of the experiment its comparison and parent run."""
        if uri is None:
            return None
        try:
            for record in status.trials:
                if record.phase in trials.TERMINAL_PHASES and record.run_id and record.run_id not in self._closed_runs:
                    outcome = recording.FINISHED if record.phase == Phase.SUCCEEDED else recording.FAILED
                    summary = record.summary if record.run_id in self._late_runs else None
                    await self.recorder.finish(uri, record.run_id, outcome, summary=summary,
                                               reason=record.reason, message=record.message)
                    self._closed_runs.add(record.run_id)
            parent = status.mlflow.run_id
            if plan.is_finished(status) and parent and parent not in self._closed_runs:
                if len(status.trials) > 1:
                    await self.recorder.compare(uri, parent, self._comparison(expansion, status))
                failed = next((c for c in status.conditions
                               if c.type == status_.ConditionType.FAILED and c.status == status_.ConditionStatus.TRUE), None)
                await self.recorder.finish(uri, parent, recording.FAILED if failed else recording.FINISHED,
                                           reason=failed.reason if failed else None,
                                           message=failed.message if failed else None)
                self._closed_runs.add(parent)
        except recording.Unavailable as error:
            return self._tracking_failed(key, body, error)
        return None

    @staticmethod
    def _comparison(expansion, status: status_.ExperimentStatus) -> list[tuple[Any, dict | None, str, str | None]]:
        records = {t.name: t for t in status.trials}
        entries = []
        for trial in expansion.trials:
            record = records[trial.name]
            outcome = recording.FINISHED if record.phase == Phase.SUCCEEDED else recording.FAILED
            summary = record.summary.wire() if record.summary else None
            entries.append((trial, summary, outcome, None if outcome == recording.FINISHED else record.message))
        return entries

    # -- deletion -------------------------------------------------------------------------------

    def forget(self, body: dict[str, Any]) -> None:
        """The experiment is gone: stop reconciling it, and end its open MLflow runs (KILLED) in the background."""
        key = key_of(body)
        self.queue.forget(key)
        self._bodies.pop(key, None)
        self._progress.pop(key, None)
        self._tracking_down.discard(key)
        task = asyncio.get_running_loop().create_task(self._kill_runs(body), name=f"end runs of {key}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _kill_runs(self, body: dict[str, Any]) -> None:
        try:
            status = statuses.read(body)
        except kopf.PermanentError:
            return
        uri = self.recorder.uri_for(((body.get("spec") or {}).get("tracking") or {}).get("uri"))
        if uri is None:
            return
        finished = plan.is_finished(status)
        ends = [(t.run_id, recording.FINISHED if t.phase == Phase.SUCCEEDED else
                 recording.FAILED if t.phase == Phase.FAILED else recording.KILLED)
                for t in status.trials if t.run_id]
        if status.mlflow.run_id:
            failed = any(c.type == status_.ConditionType.FAILED and c.status == status_.ConditionStatus.TRUE
                         for c in status.conditions)
            ends.append((status.mlflow.run_id, (recording.FAILED if failed else recording.FINISHED) if finished
                         else recording.KILLED))
        pending = [(run_id, outcome) for run_id, outcome in ends if run_id not in self._closed_runs]
        for _ in range(KILL_ATTEMPTS):
            try:
                while pending:
                    run_id, outcome = pending[0]
                    await self.recorder.finish(uri, run_id, outcome, reason="ExperimentDeleted" if outcome ==
                                               recording.KILLED else None,
                                               message="the DistributedTrainingExperiment was deleted"
                                               if outcome == recording.KILLED else None)
                    self._closed_runs.add(run_id)
                    pending.pop(0)
                return
            except recording.Unavailable:
                await asyncio.sleep(self.settings.tracking.retry_seconds)
        logger.warning("gave up ending %d MLflow runs of deleted experiment %s/%s", len(pending), *key_of(body))

    def _gave_up(self, key: Hashable, error: BaseException) -> None:
        body = self._bodies.get(key)
        if body is not None:
            kopf.warn(body, reason="ReconcileFailing",
                      message=f"the operator keeps failing on this experiment ({error}); it retries at the next change")
