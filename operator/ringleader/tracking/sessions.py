"""A `ringleader run` session in MLflow: its experiment, its parent (sweep) run, its trials, its report.

Used by the launcher (launch/tracker.py) while it runs and by replay.py (`ringleader publish DIR`)
afterwards; the session's own cursor keeps the experiment and parent run ids, so both write into
the same runs.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import time
from typing import Any, Mapping

import mlflow.entities

from ringleader.api.experiment import DistributedTrainingExperiment
from ringleader.api import trial as trial_
from ringleader.contract import layout
from ringleader.models import summary as summary_
from ringleader.tracking import cursor as cursor_
from ringleader.tracking import metric_names, publisher, schema
from ringleader.tracking.store import Store

log = logging.getLogger(__name__)

REPORT_DIR = "report"
NOT_RUN = "NOT RUN"
"""NOT_RUN is the comparison table's status of a trial that never started (the sweep was stopped before it)."""


@dataclasses.dataclass(frozen=True)
class SessionResult:
    directory: pathlib.Path
    experiment_id: str
    parent_run_id: str
    trials: list[publisher.PublishedTrial]
    damaged: list[str] = dataclasses.field(default_factory=list)
    """Trials left out: their trial.json is not what ringleader wrote (layout.DamagedFile, said in a warning)."""


def sweep_tags(experiment: DistributedTrainingExperiment, source: str | None) -> dict[str, str]:
    tags = {schema.TAG_KIND: schema.KIND_SWEEP, schema.TAG_EXPERIMENT: experiment.name,
            schema.TAG_NAMESPACE: experiment.namespace, schema.TAG_RUN_NAME: f"{experiment.name} (sweep)"}
    if source:
        tags[schema.TAG_SOURCE] = source
    return tags


def open_session(store: Store, session: layout.Session) -> tuple[str, str, cursor_.Cursor]:
    """The session's MLflow experiment and parent run, created once: (experiment id, parent run id, cursor)."""
    cursor = cursor_.Cursor.load(cursor_.path_for(session.directory, store.uri))
    experiment_id = cursor.extra.get("experimentId")
    if experiment_id is None:
        experiment_id = store.ensure_experiment(session.experiment.mlflow_experiment_name())
        cursor.extra["experimentId"] = experiment_id
        cursor.save()
    if cursor.run_id is None:
        outcome = layout.read_outcome(session.directory)
        cursor.run_id = store.create_run_once(experiment_id, cursor.token,
                                              sweep_tags(session.experiment, session.source),
                                              publisher.ms(outcome.start_time) if outcome else None)
        cursor.save()
    if not cursor.is_done("params"):
        store.log_params(cursor.run_id, schema.sweep_params(session.experiment))
        cursor.mark_done("params")
    if cursor.extra.get(REOPENED):
        store.set_status(cursor.run_id, schema.RUNNING)
        del cursor.extra[REOPENED]
        cursor.save()
    return experiment_id, cursor.run_id, cursor


REOPENED = "reopened"
"""REOPENED, in a session cursor's extra: the sweep run is to be marked RUNNING again (a resumed session)."""
SWEEP_STEPS = ("sweep-metrics", "report", "status")
"""SWEEP_STEPS are published once the sweep is over, and once more after each resumption."""


def reopen(session_dir: pathlib.Path) -> None:
    """A resumed session: in every store it was published to, its sweep run is RUNNING again and its comparison,
    report and status are published again when it ends."""
    for path in session_dir.glob(cursor_.FILE_PATTERN):
        cursor = cursor_.Cursor.load(path)
        cursor.done = [step for step in cursor.done if step not in SWEEP_STEPS]
        cursor.extra[REOPENED] = "true"
        cursor.save()


def publish_session(store: Store, session: layout.Session) -> SessionResult:
    """Publish every trial directory that exists, then, once the sweep is over, the metrics comparing the trials,
    its report and status."""
    experiment_id, parent_run_id, cursor = open_session(store, session)
    results, damaged = [], []
    for name in session.trials:
        if (session.directory / name / layout.TRIAL_FILE).is_file():
            try:
                results.append(publisher.publish_trial(store, session.directory / name, experiment_id, parent_run_id))
            except layout.DamagedFile as error:
                log.warning("%s", error)
                damaged.append(name)
    outcome = layout.read_outcome(session.directory)
    if outcome is not None and outcome.status in schema.TERMINAL_STATUSES:
        if not cursor.is_done("sweep-metrics"):
            log_sweep_metrics(store, parent_run_id, trial_summaries(session),
                              schema.sweep_labels(trial_.expand(session.experiment).trials))
            cursor.mark_done("sweep-metrics")
        if not cursor.is_done("report"):
            publish_report(store, session, parent_run_id)
            cursor.mark_done("report")
        if not cursor.is_done("status"):
            if session.provenance:
                store.set_tags(parent_run_id, schema.provenance_tags(session.provenance))
            publisher.end_run(store, parent_run_id, outcome)
            cursor.mark_done("status")
    return SessionResult(session.directory, experiment_id, parent_run_id, results, damaged)


def trial_summaries(session: layout.Session) -> dict[str, dict | None]:
    """{trial name: its summary.json document, None when it wrote none} for the trials of the session that ran."""
    summaries = {}
    for name in session.trials:
        if (session.directory / name / layout.TRIAL_FILE).is_file():
            summary = layout.read_json(session.directory / name / layout.SUMMARY_FILE)
            summaries[name] = summary if isinstance(summary, dict) else None
    return summaries


def log_sweep_metrics(store: Store, parent_run_id: str, summaries: Mapping[str, Any],
                      labels: dict[str, str] | None = None) -> int:
    """The sweep run's metrics comparing its trials (metric_names.sweep), each under its label ({trial name: what it
    varies}, schema.sweep_labels); the number logged."""
    now = int(time.time() * 1000)
    return store.log_metrics(parent_run_id, [mlflow.entities.Metric(key, value, now, 0) for key, value
                                             in sorted(metric_names.sweep(summaries, labels).items())])


def report_directory(session_dir: pathlib.Path) -> pathlib.Path:
    """Where a session's report is written: <session>/report/."""
    return session_dir / REPORT_DIR


def publish_report(store: Store, session: layout.Session, parent_run_id: str) -> None:
    """Build the session's report into <session>/report/ and attach it to the sweep run."""
    # Imported here: matplotlib costs a second at import, and reading.py reads sessions through this module.
    from ringleader.report import assembly
    from ringleader.tracking import links, reading, reports

    result = dataclasses.replace(reading.from_directory(session.directory),
                                 mlflow_pages=links.session_pages(store, session, parent_run_id))
    built = assembly.build(result, report_directory(session.directory))
    reports.attach(store, parent_run_id, built)


def comparison_rows(session: layout.Session) -> list:
    """tables.ComparisonRow per trial of the session, from the trial directories; a trial that never ran has a row
    too, with status NOT RUN."""
    from ringleader.report import tables

    planned = {t.name: t for t in trial_.expand(session.experiment).trials}
    rows = []
    for name in session.trials:
        trial_dir = session.directory / name
        if not (trial_dir / layout.TRIAL_FILE).is_file():
            if name in planned:
                rows.append(tables.row_for(planned[name], None, NOT_RUN, None))
            continue
        try:
            trial = layout.read_trial(trial_dir)
        except layout.DamagedFile:
            continue  # said once, by whoever publishes the session
        outcome = layout.read_outcome(trial_dir)
        summary = layout.read_json(trial_dir / layout.SUMMARY_FILE)
        status = outcome.status if outcome else schema.RUNNING
        message = outcome.message if outcome and outcome.status != schema.FINISHED else None
        rows.append(tables.row_for(trial, summary_.read(summary), status, message))
    return rows
