"""Publishes records on disk into MLflow, exactly once: a rank's into its nested run, a trial's into its run.

The launcher calls `publish_trial` after each trial (one writer, so sqlite is safe), sessions.py
for every trial of a session, live.py `RankPublisher` every few seconds inside a rank. Every step
first checks the cursor beside the records and advances it only after MLflow accepted the step,
so replays never duplicate.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import tempfile
import time
from typing import Any, Mapping

import mlflow.entities

from ringleader.models import placement_notes
from ringleader.models.summary import TrialSummary
from ringleader.api.trial import Trial
from ringleader.contract import keys, layout
from ringleader.contract import records as record_files
from ringleader.tracking import cursor as cursor_
from ringleader.tracking import metric_names, schema
from ringleader.tracking.store import Store

log = logging.getLogger(__name__)

# Keys a record's wall-clock time may carry (seconds since the epoch); without one, the cursor's clock stands in.
TIMESTAMP_KEYS = (keys.TIMESTAMP,)
ITERATION_TIME = keys.TIME_ITERATION
USED_SERIES = "usedSeries"
"""USED_SERIES, in a rank cursor's extra: the metric_names.ZERO_UNTIL_USED keys already logged (non-zero once)."""
# Artifacts `ringleader report` reads back from MLflow: <trial run>/summary.json, <rank run>/records/iterations.jsonl.
ITERATIONS_ARTIFACT_DIR = "records"


def ms(seconds: float | None) -> int | None:
    """Seconds since the epoch -> MLflow's milliseconds (None stays None: "now" to MLflow)."""
    return None if seconds is None else int(seconds * 1000)


def record_timestamp_ms(record: Mapping[str, Any], fallback_ms: int) -> int:
    for key in TIMESTAMP_KEYS:
        value = record.get(key)
        if metric_names.is_metric_value(value):
            return int(value * 1000)
    return fallback_ms


@dataclasses.dataclass
class RankPublisher:
    """One rank directory -> one nested run under the trial run."""

    store: Store
    rank_dir: pathlib.Path
    experiment_id: str
    trial_run_id: str
    trial_name: str
    rank: int
    role: str
    start_time: float | None = None
    """start_time of the rank (seconds since the epoch), the base of its metrics' timestamps; default: now."""
    node: str | None = None
    """node the rank runs on, when known at its run's creation (a pod's); else its summary.json's, at the end."""
    attempt: int = 1
    """attempt of the trial the rank belongs to (contract.ATTEMPT): a restarted trial's ranks get new runs."""
    pod: str | None = None
    """pod is the host name of the rank's pod ("worker-1"), its local_rank its place there: tags of its run."""
    local_rank: int = 0

    def publish(self, final_status: str | None = None, end_time: float | None = None) -> int:
        """Publish records not yet published; with `final_status`, also the rank's summary and status.
        Returns the number of metric values logged. Raises TrackingUnavailable when the store is away."""
        cursor = cursor_.Cursor.load(cursor_.path_for(self.rank_dir, self.store.uri), self.start_time)
        run_id = self._run(cursor)
        logged = self._iterations(cursor, run_id)
        if final_status is None:
            return logged
        if not cursor.is_done("summary"):
            summary = layout.read_json(self.rank_dir / layout.SUMMARY_FILE)
            if isinstance(summary, dict):
                if isinstance(summary.get(keys.NODE), str) and not self.node:
                    self.store.set_tags(run_id, {schema.TAG_NODE: summary[keys.NODE]})
                metrics = metric_names.rank(summary)
                at = ms(end_time) or int(time.time() * 1000)
                logged += self.store.log_metrics(run_id, [mlflow.entities.Metric(k, v, at, 0)
                                                         for k, v in sorted(metrics.items())])
            cursor.mark_done("summary")
        # The rank has ended, so its file is whole: `ringleader report` reads it from here.
        artifact_once(self.store, cursor, run_id, self.rank_dir / layout.ITERATIONS_FILE, ITERATIONS_ARTIFACT_DIR)
        if not cursor.is_done("status"):
            self.store.set_status(run_id, final_status, ms(end_time))
            cursor.mark_done("status")
        return logged

    def _run(self, cursor: cursor_.Cursor) -> str:
        if cursor.run_id is None:
            cursor.save()  # the token must be on disk before the run that carries it exists
            tags = schema.rank_tags(self.trial_name, self.rank, self.role, self.trial_run_id, self.node,
                                     self.attempt, self.pod, self.local_rank)
            cursor.run_id = self.store.create_run_once(self.experiment_id, cursor.token, tags, cursor.created_ms)
            cursor.save()
        return cursor.run_id

    def _iterations(self, cursor: cursor_.Cursor, run_id: str) -> int:
        path = self.rank_dir / layout.ITERATIONS_FILE
        logged = 0
        while True:
            problems: list[tuple[int, str]] = []
            lines, reached = record_files.read_lines(path, cursor.offset, problems=problems)
            if reached == cursor.offset:
                return logged
            for offset, problem in problems:
                log.warning("%s: the line at byte %d: %s", path, offset, problem)
            # Group whole records into batches of at most metrics_per_batch values, so the cursor always
            # lands on a line end and a batch in flight during an outage is the most a replay repeats.
            batch: list[mlflow.entities.Metric] = []
            batch_end, batch_records, elapsed = cursor.offset, 0, cursor.elapsed_ms
            used = set(filter(None, cursor.extra.get(USED_SERIES, "").split(",")))
            for record, end in lines:
                line = cursor.records + batch_records
                step = record.get(keys.STEP)
                step = int(step) if metric_names.is_metric_value(step) else line
                at = record_timestamp_ms(record, int(cursor.created_ms + elapsed))
                metrics = [mlflow.entities.Metric(k, v, at, step) for k, v in
                           metric_names.without_leading_zeros(metric_names.series(record), used).items()]
                if batch and len(batch) + len(metrics) > self.store.settings.metrics_per_batch:
                    logged += self._commit(cursor, run_id, batch, batch_end, batch_records, elapsed, used)
                    batch, batch_records = [], 0
                batch += metrics
                batch_end, batch_records = end, batch_records + 1
                # At least 1 ms apart, so points of the same key never share a timestamp.
                elapsed += max(1.0, 1000.0 * float(record.get(ITERATION_TIME) or 0.0))
            # To `reached`, not the last record's end: lines skipped after it are read too, and a cursor
            # left before them would read them again forever.
            logged += self._commit(cursor, run_id, batch, reached, batch_records, elapsed, used)

    def _commit(self, cursor: cursor_.Cursor, run_id: str, batch: list, end: int, records: int, elapsed: float,
                used: set[str]) -> int:
        logged = self.store.log_metrics(run_id, batch) if batch else 0
        cursor.offset, cursor.records, cursor.elapsed_ms = end, cursor.records + records, elapsed
        # Keys seen non-zero in a record not committed yet too: that record logs its non-zero value when replayed.
        cursor.extra[USED_SERIES] = ",".join(sorted(used))
        cursor.save()
        return logged


@dataclasses.dataclass(frozen=True)
class PublishedTrial:
    trial: str
    run_id: str
    status: str
    metrics: int


def publish_trial(store: Store, trial_dir: pathlib.Path, experiment_id: str,
                  parent_run_id: str | None) -> PublishedTrial:
    """Publish one trial directory: its run, params and trial.json at once; rank records as they come;
    summary, series, traces, breakdown plot, logs and status once its outcome is final."""
    trial = layout.read_trial(trial_dir)
    outcome = layout.read_outcome(trial_dir)
    cursor = cursor_.Cursor.load(cursor_.path_for(trial_dir, store.uri))
    if cursor.run_id is None:
        cursor.save()
        start = ms(outcome.start_time) if outcome else None
        cursor.run_id = store.create_run_once(experiment_id, cursor.token,
                                              schema.trial_tags(trial, parent_run_id), start)
        cursor.save()
    run_id = cursor.run_id
    if not cursor.is_done("params"):
        store.log_params(run_id, schema.trial_params(trial))
        cursor.mark_done("params")
    artifact_once(store, cursor, run_id, trial_dir / layout.TRIAL_FILE, None)
    artifact_once(store, cursor, run_id, trial_dir / layout.TOPOLOGY_FILE, None)

    final = outcome if outcome is not None and outcome.status in schema.TERMINAL_STATUSES else None
    if final is not None:  # every rank has ended: what one recorded last before dying may be only in its journal
        for directory in layout.rank_dirs(trial_dir).values():
            record_files.restore(directory)
    rank_status = {r.rank: r for r in outcome.ranks} if outcome else {}
    slots = {slot.rank: slot for slot in trial.slots()}
    metrics = 0
    for rank, directory in layout.rank_dirs(trial_dir).items():
        slot = slots.get(rank)
        status = None
        if final is not None:
            status = rank_status[rank].status if rank in rank_status else final.status
        metrics += RankPublisher(store, directory, experiment_id, run_id, trial.name, rank,
                                 slot.role if slot else "unknown", outcome.start_time if outcome else None,
                                 pod=slot.hostname if slot else None,
                                 local_rank=slot.local_rank if slot else 0).publish(
            status, outcome.end_time if outcome else None)
    if final is None:
        return PublishedTrial(trial.name, run_id, outcome.status if outcome else schema.RUNNING, metrics)

    metrics += summary_once(store, cursor, run_id, trial_dir, ms(final.end_time) or int(time.time() * 1000))
    for rank, directory in layout.rank_dirs(trial_dir).items():
        artifact_once(store, cursor, run_id, directory / layout.TRACE_FILE, "traces", f"rank-{rank}.trace.json")
        artifact_once(store, cursor, run_id, directory / layout.LAYERS_FILE, "layers", f"rank-{rank}.layers.json")
        artifact_once(store, cursor, run_id, directory / layout.PROFILE_FILE, "traces", f"rank-{rank}.profile.json")
    for log_file in sorted((trial_dir / layout.LOGS_DIR).glob("rank-*")):
        artifact_once(store, cursor, run_id, log_file, "logs")
    if not cursor.is_done("artifact:breakdown.png"):
        _log_breakdown(store, run_id, trial, trial_dir)
        cursor.mark_done("artifact:breakdown.png")
    if not cursor.is_done("status"):
        end_run(store, run_id, final)
        cursor.mark_done("status")
    return PublishedTrial(trial.name, run_id, final.status, metrics)


def summary_once(store: Store, cursor: cursor_.Cursor, run_id: str, trial_dir: pathlib.Path,
                 at_ms: int) -> int:
    """The trial's summary values (logged at `at_ms`) and its series on the trial run, and summary.json as an
    artifact, each once; the number of metric values logged. Used here and by the rank that wrote them (live.py)."""
    logged = 0
    if not cursor.is_done("summary"):
        summary = layout.read_json(trial_dir / layout.SUMMARY_FILE)
        if isinstance(summary, dict):
            logged += store.log_metrics(run_id, [mlflow.entities.Metric(k, v, at_ms, 0) for k, v in
                                                 sorted(metric_names.trial(summary).items())])
            placement = TrialSummary.from_document(summary).placement
            placed = placement_notes.describe(placement.node_count, placement.cross_node_byte_share)
            if placed:
                store.set_tags(run_id, {schema.TAG_PLACEMENT: placed})
        cursor.mark_done("summary")
    series = trial_dir / layout.SERIES_FILE
    if not cursor.is_done("series") and series.is_file():
        # Written whole before the summary: a replay of a batch that was in flight repeats points the store drops.
        used: set[str] = set()
        logged += store.log_metrics(run_id, [
            mlflow.entities.Metric(k, v, record_timestamp_ms(record, at_ms), int(record[keys.STEP]))
            for record in record_files.read_iterations(series) if metric_names.is_metric_value(record.get(keys.STEP))
            for k, v in metric_names.without_leading_zeros(metric_names.series(record), used).items()])
        cursor.mark_done("series")
    artifact_once(store, cursor, run_id, trial_dir / layout.SUMMARY_FILE, None)
    return logged


def end_run(store: Store, run_id: str, outcome: layout.Outcome) -> None:
    """The run's final status and end time, with why it ended as tags."""
    tags = {k: v for k, v in ((schema.TAG_STATUS_REASON, outcome.reason), (schema.TAG_STATUS_MESSAGE, outcome.message))
            if v}
    if tags:
        store.set_tags(run_id, tags)
    store.set_status(run_id, outcome.status, ms(outcome.end_time))


def artifact_once(store: Store, cursor: cursor_.Cursor, run_id: str, path: pathlib.Path,
                   artifact_path: str | None, name: str | None = None) -> None:
    """Upload `path` (as `name`) unless already uploaded; absent files are skipped, not marked."""
    step = f"artifact:{artifact_path + '/' if artifact_path else ''}{name or path.name}"
    if cursor.is_done(step) or not path.is_file():
        return
    if name and name != path.name:
        with tempfile.TemporaryDirectory(prefix="ringleader-artifact-") as staging:
            renamed = pathlib.Path(staging) / name
            renamed.write_bytes(path.read_bytes())
            store.log_artifact(run_id, renamed, artifact_path)
    else:
        store.log_artifact(run_id, path, artifact_path)
    cursor.mark_done(step)


def _log_breakdown(store: Store, run_id: str, trial: Trial, trial_dir: pathlib.Path) -> None:
    # Imported here: matplotlib costs a second at import and only finished trials need it.
    from ringleader.report import figures

    breakdowns = [b for rank, directory in layout.rank_dirs(trial_dir).items()
                  if (b := figures.rank_breakdown(rank,
                                                  record_files.read_iterations(directory / layout.ITERATIONS_FILE)))]
    if not breakdowns:
        return
    with tempfile.TemporaryDirectory(prefix="ringleader-plot-") as staging:
        path = pathlib.Path(staging) / "breakdown.png"
        figures.plot_rank_breakdown(breakdowns, path, title=f"{schema.trial_run_name(trial)}\nmean time per "
                                                           "iteration after warm-up, per rank")
        store.log_artifact(run_id, path, None)
