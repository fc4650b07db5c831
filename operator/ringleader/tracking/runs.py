"""The MLflow runs of an experiment, for the operator and the launcher: experiment, sweep, trial, finish, compare.

Every function takes an optional `tracking_uri` (default: MLflow's own, i.e. $MLFLOW_TRACKING_URI)
and an optional `token`: runs created with the same token are found again instead of created twice,
so an operator that restarts between "create run" and "record its id in status" does not leave a
duplicate run behind (use e.g. "<cr uid>.<generation>.<trial name>.<restart>").
"""

from __future__ import annotations

import functools
import pathlib
import re
import tempfile
import time
import uuid
from typing import Any, Mapping, Sequence

import mlflow.entities
import mlflow.tracking

from ringleader.api import experiment as experiment_
from ringleader.api import trial as trial_
from ringleader.tracking import schema, sessions
from ringleader.tracking import settings as settings_
from ringleader.tracking import store as store_

TOKEN_PATTERN = re.compile(r"^[A-Za-z0-9._:/-]{1,200}$")


@functools.lru_cache(maxsize=8)
def store_for(tracking_uri: str | None = None) -> store_.Store:
    """One Store per URI for this process; None is MLflow's configured default."""
    uri = tracking_uri or mlflow.tracking.get_tracking_uri()
    return store_.Store(settings_.absolute_uri(uri) if uri.startswith("sqlite:") else uri)


def _token(token: str | None) -> str:
    if token is None:
        return uuid.uuid4().hex
    if not TOKEN_PATTERN.match(token):
        raise ValueError(f"token {token!r} must be 1-200 characters of letters, digits and . _ : / -")
    return token


def ensure_experiment(name: str, *, tracking_uri: str | None = None) -> str:
    """The id of the MLflow experiment `name` (DistributedTrainingExperiment.mlflow_experiment_name()), created if absent."""
    return store_for(tracking_uri).ensure_experiment(name)


def start_parent_run(experiment_id: str, experiment: experiment_.DistributedTrainingExperiment, *,
                     token: str | None = None, source: str | None = None,
                     tracking_uri: str | None = None) -> str:
    """The sweep's parent run (RUNNING), with the experiment's spec as params; returns its run id."""
    store = store_for(tracking_uri)
    run_id = store.create_run_once(experiment_id, _token(token), sessions.sweep_tags(experiment, source),
                                   int(time.time() * 1000))
    store.log_params(run_id, sessions.sweep_params(experiment))
    return run_id


def start_trial_run(experiment_id: str, parent_run_id: str | None, trial: trial_.Trial, *,
                    token: str | None = None, tracking_uri: str | None = None) -> str:
    """A trial's run (RUNNING), child of the parent run, with the resolved spec as params; returns its run id.
    Pods get it as RINGLEADER_MLFLOW_RUN_ID and nest their rank runs under it (live.py)."""
    store = store_for(tracking_uri)
    run_id = store.create_run_once(experiment_id, _token(token), schema.trial_tags(trial, parent_run_id),
                                   int(time.time() * 1000))
    store.log_params(run_id, schema.trial_params(trial))
    return run_id


def finish_run(run_id: str, status: str, summary: Mapping[str, Any] | Any | None = None, *,
               reason: str | None = None, message: str | None = None,
               tracking_uri: str | None = None) -> None:
    """End a run as FINISHED, FAILED or KILLED; a summary (api.status.Summary or its wire dict) becomes metrics.

    In a cluster the lowest worker rank already logs the trial summary from its pod (live.py); pass
    `summary` only when no rank did, or its points appear twice in the metric history."""
    if status not in schema.TERMINAL_STATUSES:
        raise ValueError(f"status must be one of {', '.join(schema.TERMINAL_STATUSES)}, not {status!r}")
    store = store_for(tracking_uri)
    if summary is not None:
        document = summary.wire() if hasattr(summary, "wire") else dict(summary)
        now = int(time.time() * 1000)
        store.log_metrics(run_id, [mlflow.entities.Metric(k, v, now, 0)
                                   for k, v in sorted(schema.numeric_items(document).items())])
    tags = {k: v for k, v in ((schema.TAG_STATUS_REASON, reason), (schema.TAG_STATUS_MESSAGE, message)) if v}
    if tags:
        store.set_tags(run_id, tags)
    store.set_status(run_id, status)


def log_comparison(parent_run_id: str, rows: Sequence[Any], *, tracking_uri: str | None = None) -> None:
    """The comparison table of `rows` (analysis.tables.ComparisonRow, e.g. from `tables.row_for(trial, summary,
    status)`) as comparison.txt, .csv and .md artifacts of the parent run."""
    from ringleader.analysis import tables

    rows = list(rows)
    store = store_for(tracking_uri)
    with tempfile.TemporaryDirectory(prefix="ringleader-comparison-") as staging:
        directory = pathlib.Path(staging)
        for name, text in (("comparison.txt", tables.format_table(rows)), ("comparison.csv", tables.to_csv(rows)),
                           ("comparison.md", tables.to_markdown(rows))):
            (directory / name).write_text(text)
            store.log_artifact(parent_run_id, directory / name, None)
