"""An experiment's MLflow runs over its life: opened before pods start, closed as trials end, KILLED on deletion; used by `reconciler`.

MLflow never holds an experiment up: when the server is away, the pass goes on without it, a
Warning Event says so once, and the work is retried at the next pass (at most `retry_seconds`
later). What was done is remembered in memory only to save calls: after an operator restart the
runs of finished trials are closed once more, which is harmless.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from ringleader.api import status as status_
from ringleader.controller import plan, reasons, recording, statuses, trials
from ringleader.controller import settings as settings_

logger = logging.getLogger(__name__)
Phase = status_.Phase
Key = tuple[str, str]
KILL_ATTEMPTS = 10  # tries to end a deleted experiment's runs while MLflow is away, retry_seconds apart


def _outcome(phase: Phase) -> str:
    return {Phase.SUCCEEDED: recording.FINISHED, Phase.FAILED: recording.FAILED}.get(phase, recording.KILLED)


def _failed_condition(status: status_.ExperimentStatus) -> status_.Condition | None:
    return next((c for c in status.conditions
                 if c.type == status_.ConditionType.FAILED and c.status == status_.ConditionStatus.TRUE), None)


class Runs:
    def __init__(self, recorder: recording.Recorder, settings: settings_.MlflowSettings) -> None:
        self.recorder = recorder
        self._settings = settings
        self._closed: set[str] = set()
        self._late: set[str] = set()  # runs created after their pods started: no rank logged their summary
        self._swept: set[str] = set()  # parent runs that have their metrics comparing the trials
        self._down: set[Key] = set()  # experiments told that MLflow is away
        self._background: set[asyncio.Task] = set()

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        self.recorder.close()

    def _failed(self, key: Key, body: dict[str, Any], error: recording.Unavailable) -> float:
        if key not in self._down:
            self._down.add(key)
            kopf.warn(body, reason=reasons.TRACKING_UNAVAILABLE,
                      message=f"{error}; the experiment goes on, and its runs are recorded when MLflow answers")
        return self._settings.retry_seconds

    def _worked(self, key: Key, body: dict[str, Any]) -> None:
        if key in self._down:
            self._down.discard(key)
            kopf.info(body, reason=reasons.TRACKING_AVAILABLE, message="MLflow answers again; the runs are being recorded")

    async def start(self, key: Key, body: dict[str, Any], experiment, expansion, status: status_.ExperimentStatus,
                    starting: tuple[int, ...]) -> tuple[status_.ExperimentStatus, float | None]:
        """The parent run, and a run for each trial about to start or started without one; the status with their ids."""
        uri = self.recorder.uri_for(experiment.spec.tracking.uri)
        if uri is None:
            return status, None
        uid = body["metadata"]["uid"]
        by_name = {t.name: t for t in expansion.trials}
        mlflow, records, retry = status.mlflow, list(status.trials), None
        try:
            if not (mlflow.experiment_id and mlflow.run_id):
                experiment_id, run_id = await self.recorder.start_parent(uri, experiment, uid)
                mlflow = status_.MlflowStatus(experiment_id=experiment_id, run_id=run_id,
                                              url=self.recorder.ui_url(uri, experiment_id))
            for position, record in enumerate(records):
                now_starting = record.index in starting
                if record.run_id is None and (now_starting or record.phase not in (Phase.PENDING, Phase.SUSPENDED)):
                    run_id = await self.recorder.start_trial(uri, mlflow.experiment_id, mlflow.run_id,
                                                             by_name[record.name], uid)
                    if not now_starting:
                        self._late.add(run_id)
                    records[position] = record.model_copy(update={"run_id": run_id})
        except recording.Unavailable as error:
            retry = self._failed(key, body, error)
        else:
            self._worked(key, body)
        return status.model_copy(update=dict(mlflow=mlflow, trials=records)), retry

    async def end(self, key: Key, body: dict[str, Any], experiment, expansion,
                  status: status_.ExperimentStatus) -> tuple[status_.ExperimentStatus, float | None]:
        """Close the runs of finished trials; at the end, the sweep's report and the parent run.

        Returns the status with `mlflow.reportUrl` once the report is attached: status, not memory, says it
        is done, so an operator that restarts does not make it twice."""
        uri = self.recorder.uri_for(experiment.spec.tracking.uri)
        if uri is None:
            return status, None
        try:
            for record in status.trials:
                if record.phase in trials.TERMINAL_PHASES and record.run_id and record.run_id not in self._closed:
                    # Ranks log the summary into runs they knew of; only late runs get it from here.
                    summary = record.summary if record.run_id in self._late else None
                    await self.recorder.finish(uri, record.run_id, _outcome(record.phase), summary=summary,
                                               reason=record.reason, message=record.message)
                    self._closed.add(record.run_id)
            parent = status.mlflow.run_id
            if plan.is_finished(status) and parent and parent not in self._closed:
                if parent not in self._swept:
                    await self.recorder.log_sweep_metrics(uri, parent, {
                        t.name: t.summary.wire() if t.summary else None for t in status.trials})
                    self._swept.add(parent)
                if not status.mlflow.report_url:
                    status = await self._report(uri, body, status)
                failed = _failed_condition(status)
                await self.recorder.finish(uri, parent, recording.FAILED if failed else recording.FINISHED,
                                           reason=failed.reason if failed else None,
                                           message=failed.message if failed else None)
                self._closed.add(parent)
        except recording.Unavailable as error:
            return status, self._failed(key, body, error)
        self._worked(key, body)
        return status, None

    async def _report(self, uri: str, body: dict[str, Any], status: status_.ExperimentStatus) -> status_.ExperimentStatus:
        """The sweep's report on the parent run, linked from status; a report that cannot be made is a Warning
        Event, never a reason to keep the parent run open (Unavailable, MLflow away, is retried by the caller)."""
        mlflow = status.mlflow
        summaries = {t.name: t.summary.wire() for t in status.trials if t.summary}
        try:
            await self.recorder.report(uri, mlflow.run_id, summaries)
        except recording.ReportFailed as error:
            kopf.warn(body, reason=reasons.REPORT_FAILED, message=str(error))
            return status
        url = self.recorder.report_url(uri, mlflow.experiment_id, mlflow.run_id)
        kopf.info(body, reason=reasons.REPORT_READY, message=f"the sweep's report is attached to its MLflow run: {url}")
        return status.model_copy(update={"mlflow": mlflow.model_copy(update={"report_url": url})})

    def forget(self, key: Key, body: dict[str, Any]) -> None:
        """The experiment was deleted: end its open runs in the background (KILLED unless already finished)."""
        self._down.discard(key)
        task = asyncio.get_running_loop().create_task(self._kill(body), name=f"end the runs of {key}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _kill(self, body: dict[str, Any]) -> None:
        try:
            status = statuses.read(body)
        except kopf.PermanentError:
            return
        spec_uri = ((body.get("spec") or {}).get("tracking") or {}).get("uri")
        uri = self.recorder.uri_for(spec_uri)
        if uri is None or self.recorder.refusal(spec_uri) is not None:
            return
        ends = [(t.run_id, _outcome(t.phase)) for t in status.trials if t.run_id]
        if status.mlflow.run_id:
            finished = plan.is_finished(status)
            parent = (recording.FAILED if _failed_condition(status) else recording.FINISHED) if finished else recording.KILLED
            ends.append((status.mlflow.run_id, parent))
        pending = [(run_id, outcome) for run_id, outcome in ends if run_id not in self._closed]
        for _ in range(KILL_ATTEMPTS):
            try:
                while pending:
                    run_id, outcome = pending[0]
                    killed = outcome == recording.KILLED
                    await self.recorder.finish(uri, run_id, outcome, reason="ExperimentDeleted" if killed else None,
                                               message="the DistributedTrainingExperiment was deleted" if killed else None)
                    self._closed.add(run_id)
                    pending.pop(0)
                return
            except recording.Unavailable:
                await asyncio.sleep(self._settings.retry_seconds)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        logger.warning("gave up ending %d MLflow runs of the deleted experiment %s/%s", len(pending), namespace, name)
