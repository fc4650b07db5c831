"""An experiment's MLflow runs over its life: opened before pods start, closed as trials end, KILLED on deletion; used
by `reconciler`.

MLflow never holds an experiment up: when the server is away, the pass goes on without it, a
Warning Event says so once, and the work is retried at the next pass (at most `retry_seconds`
later). The Events follow what MLflow answered (`Availability`): a pass that made no call to it says
nothing about it, so it announces nothing. What decides correctness is kept in status, not memory: who logs a trial's
summary (`runSummarySource`: a run made after its pods started gets it from the operator), which runs are
ended (`runEnded`, the parent's too) and the report (`reportUrl`). Status rather than MLflow tags:
status is read and written by every pass anyway, while asking MLflow would cost a call per run per
pass. A crash between ending a run and writing status ends it once more, which is harmless.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from ringleader.api.status import (Condition, ConditionStatus, ConditionType, ExperimentStatus, MlflowStatus, Phase,
                                   RunSummarySource, TrialStatus)
from ringleader.controller import plan, reasons, recording, statuses, trials
from ringleader.controller.settings import MlflowSettings

logger = logging.getLogger(__name__)
Key = tuple[str, str]
KILL_ATTEMPTS = 10  # tries to end a deleted experiment's runs while MLflow is away, retry_seconds apart


def _outcome(phase: Phase) -> str:
    return {Phase.SUCCEEDED: recording.FINISHED, Phase.FAILED: recording.FAILED}.get(phase, recording.KILLED)


def _summary_to_log(trial: TrialStatus) -> dict[str, Any] | None:
    """The summary (its wire dict) the operator logs when it ends a trial's run: only where no rank could (ranks
    log theirs)."""
    if trial.summary is None or trial.run_summary_source != RunSummarySource.OPERATOR:
        return None
    return trial.summary.wire()


def _with_trial(status: ExperimentStatus, trial: TrialStatus) -> ExperimentStatus:
    return status.model_copy(update={"trials": [trial if t.name == trial.name else t for t in status.trials]})


def _failed_condition(status: ExperimentStatus) -> Condition | None:
    return next((c for c in status.conditions
                 if c.type == ConditionType.FAILED and c.status == ConditionStatus.TRUE), None)


class Availability:
    """Whether each experiment was last told that MLflow is away: an Event is due only when that changes."""

    def __init__(self) -> None:
        self._down: set[Key] = set()

    def failed(self, key: Key) -> bool:
        """A call failed; True when the experiment is to be told (it was not told already)."""
        told = key in self._down
        self._down.add(key)
        return not told

    def answered(self, key: Key) -> bool:
        """Calls were made and all answered; True when the experiment is to be told MLflow is back."""
        told = key in self._down
        self._down.discard(key)
        return told

    def forget(self, key: Key) -> None:
        self._down.discard(key)


class Runs:
    def __init__(self, recorder: recording.MlflowCalls, settings: MlflowSettings, image: str) -> None:
        self.recorder = recorder
        self._settings = settings
        self._image = image  # of the pods of experiments that name none (spec.image)
        self._availability = Availability()
        self._background: set[asyncio.Task] = set()

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        self.recorder.close()

    def _failed(self, key: Key, body: dict[str, Any], error: recording.Unavailable) -> float:
        if self._availability.failed(key):
            kopf.warn(body, reason=reasons.TRACKING_UNAVAILABLE,
                      message=f"{error}; the experiment goes on, and its runs are recorded when MLflow answers")
        return self._settings.retry_seconds

    def _worked(self, key: Key, body: dict[str, Any], calls: int) -> None:
        """`calls` MLflow calls answered in a pass; none says nothing of whether MLflow is back."""
        if calls and self._availability.answered(key):
            kopf.info(body, reason=reasons.TRACKING_AVAILABLE,
                      message="MLflow answers again; the runs are being recorded")

    async def start(self, key: Key, body: dict[str, Any], experiment, expansion, status: ExperimentStatus,
                    starting: tuple[int, ...]) -> tuple[ExperimentStatus, float | None]:
        """The parent run, and a run for each trial about to start or started without one; the status with their ids."""
        uri = self.recorder.uri_for(experiment.spec.tracking.uri)
        if uri is None:
            return status, None
        uid = body["metadata"]["uid"]
        by_name = {t.name: t for t in expansion.trials}
        mlflow, records, retry, calls = status.mlflow, list(status.trials), None, 0
        try:
            if not (mlflow.experiment_id and mlflow.run_id):
                calls += 1
                experiment_id, run_id = await self.recorder.start_parent(uri, experiment, uid,
                                                                         experiment.spec.image or self._image)
                mlflow = MlflowStatus(experiment_id=experiment_id, run_id=run_id,
                                      url=self.recorder.ui_url(uri, experiment_id))
            for position, record in enumerate(records):
                now_starting = record.index in starting
                if record.run_id is None and (now_starting or record.phase not in (Phase.PENDING, Phase.SUSPENDED)):
                    calls += 1
                    run_id = await self.recorder.start_trial(uri, mlflow.experiment_id, mlflow.run_id,
                                                             by_name[record.name], uid)
                    # Pods started without the run's id log nothing into it: the operator logs their summary.
                    source = RunSummarySource.RANKS if now_starting else RunSummarySource.OPERATOR
                    records[position] = record.model_copy(update={"run_id": run_id, "run_summary_source": source})
        except recording.Unavailable as error:
            retry = self._failed(key, body, error)
        else:
            self._worked(key, body, calls)
        return status.model_copy(update=dict(mlflow=mlflow, trials=records)), retry

    async def end(self, key: Key, body: dict[str, Any], experiment, expansion,
                  status: ExperimentStatus) -> tuple[ExperimentStatus, float | None]:
        """End the runs of finished trials; at the end, the sweep's metrics, its report and the parent run.

        Returns the status marking what was done (`runEnded`, `mlflow.reportUrl`), also when MLflow went away
        midway: status, not memory, says it is done, so an operator that restarts does each thing once."""
        uri = self.recorder.uri_for(experiment.spec.tracking.uri)
        if uri is None:
            return status, None
        calls = 0
        try:
            for record in status.trials:
                if record.phase in trials.TERMINAL_PHASES and record.run_id and not record.run_ended:
                    calls += 1
                    await self.recorder.finish(uri, record.run_id, _outcome(record.phase),
                                               summary=_summary_to_log(record), reason=record.reason,
                                               message=record.message)
                    status = _with_trial(status, record.model_copy(update={"run_ended": True}))
            mlflow = status.mlflow
            if plan.is_finished(status) and mlflow.run_id and not mlflow.run_ended:
                calls += 1
                # Logged again after a restart or an outage midway, the same values are harmless.
                await self.recorder.log_sweep_metrics(uri, mlflow.run_id, {
                    t.name: t.summary.wire() if t.summary else None for t in status.trials}, expansion.trials)
                if not mlflow.report_url:
                    status = await self._report(uri, body, status)
                failed = _failed_condition(status)
                await self.recorder.finish(uri, mlflow.run_id, recording.FAILED if failed else recording.FINISHED,
                                           reason=failed.reason if failed else None,
                                           message=failed.message if failed else None)
                status = status.model_copy(update={"mlflow": status.mlflow.model_copy(update={"run_ended": True})})
        except recording.Unavailable as error:
            return status, self._failed(key, body, error)
        self._worked(key, body, calls)
        return status, None

    async def _report(self, uri: str, body: dict[str, Any], status: ExperimentStatus) -> ExperimentStatus:
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
        report = "the sweep's report" if len(status.trials) > 1 else "the trial's report"
        kopf.info(body, reason=reasons.REPORT_READY, message=f"{report} is attached to its MLflow run: {url}")
        return status.model_copy(update={"mlflow": mlflow.model_copy(update={"report_url": url})})

    def forget(self, key: Key, body: dict[str, Any], reason: str = reasons.EXPERIMENT_DELETED,
               message: str = "the DistributedTrainingExperiment was deleted") -> None:
        """The experiment was deleted (or its namespace is): end its open runs in the background (KILLED unless
        already finished), tagged with `reason` and `message`."""
        self._availability.forget(key)
        task = asyncio.get_running_loop().create_task(self._kill(body, reason, message), name=f"end the runs of {key}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _kill(self, body: dict[str, Any], reason: str, message: str) -> None:
        try:
            status = statuses.read(body)
        except kopf.PermanentError:
            return
        spec_uri = ((body.get("spec") or {}).get("tracking") or {}).get("uri")
        uri = self.recorder.uri_for(spec_uri)
        if uri is None or self.recorder.refusal(spec_uri) is not None:
            return
        # The last status seen says which runs are ended already; those keep their outcome.
        ends = [(t.run_id, _outcome(t.phase), _summary_to_log(t))
                for t in status.trials if t.run_id and not t.run_ended]
        if status.mlflow.run_id and not status.mlflow.run_ended:
            finished = plan.is_finished(status)
            parent = ((recording.FAILED if _failed_condition(status) else recording.FINISHED) if finished
                      else recording.KILLED)
            ends.append((status.mlflow.run_id, parent, None))
        pending = list(ends)
        for _ in range(KILL_ATTEMPTS):
            try:
                while pending:
                    run_id, outcome, summary = pending[0]
                    killed = outcome == recording.KILLED
                    await self.recorder.finish(
                        uri, run_id, outcome, summary=summary, reason=reason if killed else None,
                        message=message if killed else None)
                    pending.pop(0)
                return
            except recording.Unavailable:
                await asyncio.sleep(self._settings.retry_seconds)
        namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
        logger.warning("gave up ending %d MLflow runs of the deleted experiment %s/%s", len(pending), namespace, name)
