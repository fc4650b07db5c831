"""The MLflow runs of an experiment, for the operator and the launcher: experiment, sweep, trial, finish, report.

Every function takes an optional `tracking_uri` (default: MLflow's own, i.e. $MLFLOW_TRACKING_URI)
and an optional `token`: runs created with the same token are found again instead of created twice,
so an operator that restarts between "create run" and "record its id in status" does not leave a
duplicate run behind (use e.g. "<cr uid>.<generation>.<trial name>.<restart>").
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib
import re
import tempfile
import threading
import time
import uuid
from typing import Any, Iterable, Mapping

import mlflow.entities
import mlflow.exceptions
import mlflow.tracking

from ringleader.api.experiment import DistributedTrainingExperiment
from ringleader.api.trial import Trial
from ringleader.models.results import SweepResult
from ringleader.models.summary import TrialSummary
from ringleader.contract import layout, records
from ringleader.contract import provenance as provenance_
from ringleader.tracking import metric_names, reading, reports, schema, sessions
from ringleader.tracking import settings as settings_
from ringleader.tracking.store import Store, TrackingUnavailable

TOKEN_PATTERN = re.compile(r"^[A-Za-z0-9._:/-]{1,200}$")
# What a call raises when the tracking server is away or refuses: callers retry these, and only these.
TRACKING_ERRORS = (TrackingUnavailable, mlflow.exceptions.MlflowException)
# Rank runs a trial run may have: one per rank and attempt, a trial of hundreds of ranks restarted a few times.
MAX_OPEN_RANKS = 5000
# pyplot keeps global state: one report draws at a time in a process whose threads may make several.
_FIGURES = threading.Lock()


_settings = settings_.TrackingSettings()


def configure(settings: settings_.TrackingSettings) -> None:
    """The settings of every store this process makes from now on; the operator's (one attempt: its
    reconciler owns the retries) are set once, at startup, before the first call."""
    global _settings
    _settings = settings
    store_for.cache_clear()


@functools.lru_cache(maxsize=8)
def store_for(tracking_uri: str | None = None) -> Store:
    """One Store per URI for this process; None is MLflow's configured default."""
    uri = tracking_uri or mlflow.tracking.get_tracking_uri()
    return Store(settings_.absolute_uri(uri) if uri.startswith("sqlite:") else uri, _settings)


def _token(token: str | None) -> str:
    if token is None:
        return uuid.uuid4().hex
    if not TOKEN_PATTERN.match(token):
        raise ValueError(f"token {token!r} must be 1-200 characters of letters, digits and . _ : / -")
    return token


def ensure_experiment(name: str, *, tracking_uri: str | None = None) -> str:
    """The id of the MLflow experiment `name` (DistributedTrainingExperiment.mlflow_experiment_name()), created if
    absent."""
    return store_for(tracking_uri).ensure_experiment(name)


def start_parent_run(experiment_id: str, experiment: DistributedTrainingExperiment, *,
                     token: str | None = None, source: str | None = None,
                     provenance: Mapping[str, object] | None = None,
                     tracking_uri: str | None = None) -> str:
    """The sweep's parent run (RUNNING), with the experiment's spec as params and its `provenance`
    (contract/provenance.py) as tags; returns its run id."""
    store = store_for(tracking_uri)
    tags = {**sessions.sweep_tags(experiment, source), **schema.provenance_tags(dict(provenance or {}))}
    run_id = store.create_run_once(experiment_id, _token(token), tags, int(time.time() * 1000))
    store.log_params(run_id, schema.sweep_params(experiment))
    return run_id


def start_trial_run(experiment_id: str, parent_run_id: str | None, trial: Trial, *,
                    token: str | None = None, tracking_uri: str | None = None) -> str:
    """A trial's run (RUNNING), child of the parent run, with the resolved spec as params and trial.json (what the
    report reads) as an artifact; returns its run id. Pods get it as RINGLEADER_MLFLOW_RUN_ID and nest their
    rank runs under it (live.py)."""
    store = store_for(tracking_uri)
    run_id = store.create_run_once(experiment_id, _token(token), schema.trial_tags(trial, parent_run_id),
                                   int(time.time() * 1000))
    store.log_params(run_id, schema.trial_params(trial))
    with tempfile.TemporaryDirectory(prefix="ringleader-trial-") as staging:
        path = pathlib.Path(staging) / layout.TRIAL_FILE
        records.write_json(path, trial.model_dump(mode="json", by_alias=True))
        store.log_artifact(run_id, path, None)
    return run_id


def finish_run(run_id: str, status: str, summary: Mapping[str, Any] | None = None, *,
               reason: str | None = None, message: str | None = None,
               tracking_uri: str | None = None) -> None:
    """End a run as FINISHED, FAILED or KILLED; a summary (api.status.Summary's wire dict) becomes metrics.

    In a cluster the lowest worker rank already logs the trial summary from its pod (live.py); pass
    `summary` only when no rank did, or its points appear twice in the metric history."""
    if status not in schema.TERMINAL_STATUSES:
        raise ValueError(f"status must be one of {', '.join(schema.TERMINAL_STATUSES)}, not {status!r}")
    store = store_for(tracking_uri)
    if summary is not None:
        now = int(time.time() * 1000)
        store.log_metrics(run_id, [mlflow.entities.Metric(k, v, now, 0)
                                   for k, v in sorted(metric_names.trial(dict(summary)).items())])
    tags = {k: v for k, v in ((schema.TAG_STATUS_REASON, reason), (schema.TAG_STATUS_MESSAGE, message)) if v}
    if tags:
        store.set_tags(run_id, tags)
    store.set_status(run_id, status)
    _end_open_ranks(store, run_id)


def _end_open_ranks(store: Store, trial_run_id: str) -> None:
    """Rank runs still RUNNING under an ended trial run: their rank ended without ending them (killed, or its
    last publish failed). KILLED, saying so: a run never stays RUNNING after its trial ended. A rank that
    publishes later still adds its points, and ends its run itself."""
    for run_id in _open_children(store, trial_run_id, MAX_OPEN_RANKS):
        store.set_tags(run_id, {
            schema.TAG_STATUS_REASON: "TrialEnded",
            schema.TAG_STATUS_MESSAGE: "the trial ended before this rank ended its run: records it had not "
                                       "published by then are missing"})
        store.set_status(run_id, schema.KILLED)


def log_sweep_metrics(parent_run_id: str, summaries: Mapping[str, Mapping[str, Any] | None], *,
                      trials: Iterable[Trial] = (), tracking_uri: str | None = None) -> int:
    """The sweep run's metrics comparing its trials (metric_names.sweep), from {trial name: summary wire dict or
    None}, each named by what it varies among `trials` (the sweep's, schema.sweep_labels; by its trial name
    without them); the number logged. Logged again, the same values are harmless: the Metrics tab shows the
    latest."""
    return sessions.log_sweep_metrics(store_for(tracking_uri), parent_run_id, summaries, schema.sweep_labels(trials))


def attach_report(parent_run_id: str, *, summaries: Mapping[str, Mapping[str, Any]] | None = None,
                  pods: bool = False, tracking_uri: str | None = None) -> None:
    """The sweep's report, made from what its runs hold in MLflow, attached to the sweep run (reports.attach).

    `summaries` ({trial name: summary wire dict}) stand in for trials whose runs hold no summary.json: in a
    cluster, a trial whose ranks could not log it, known to the operator from a pod's termination message.
    `pods`: the sweep ran in pods, and its provenance gains what their ranks recorded (provenance.of_pods) first."""
    from ringleader.report import assembly  # matplotlib: loaded by the first report only

    store = store_for(tracking_uri)
    result, run_id = reading.from_mlflow(store, parent_run_id)
    if pods:
        result = _with_pods_provenance(store, run_id, result)
    known = summaries or {}
    result = dataclasses.replace(result, trials=[
        t if t.summary or t.trial.name not in known else
        dataclasses.replace(t, summary=TrialSummary.from_document(known[t.trial.name]))
        for t in result.trials])
    with _FIGURES, tempfile.TemporaryDirectory(prefix="ringleader-report-") as staging:
        reports.attach(store, run_id, assembly.build(result, pathlib.Path(staging)))


def _with_pods_provenance(store: Store, run_id: str, result: SweepResult) -> SweepResult:
    """The sweep run tagged with what its trials' ranks recorded of where they ran, and `result` saying so."""
    found = provenance_.of_pods(t.summary.usage for t in result.trials if t.summary and t.summary.usage)
    if not found:
        return result
    store.set_tags(run_id, schema.provenance_tags(found))
    taken = schema.provenance_of(store.call("get run", lambda client: client.get_run(run_id)).data.tags)
    return dataclasses.replace(result, provenance=provenance_.words(taken))


@dataclasses.dataclass(frozen=True)
class OpenSweep:
    """A RUNNING sweep run the operator made, and the experiment it belongs to (from its tags)."""

    run_id: str
    namespace: str
    name: str
    token: str
    """The run's creation token: the operator derives it from the experiment's uid, so a newer experiment of the
    same name is told apart."""


def open_operator_sweeps(*, limit: int, tracking_uri: str | None = None) -> list[OpenSweep]:
    """The RUNNING sweep runs the operator made (tag ringleader.source = operator), at most `limit` of them."""
    store = store_for(tracking_uri)
    experiments = store.call("search experiments", lambda client: client.search_experiments(max_results=limit))
    query = (f"attributes.status = '{schema.RUNNING}' AND tags.`{schema.TAG_KIND}` = '{schema.KIND_SWEEP}' "
             f"AND tags.`{schema.TAG_SOURCE}` = 'operator'")
    found: list[OpenSweep] = []
    for ids in schema.chunks([e.experiment_id for e in experiments], 100):
        page = store.call("search runs", lambda client: client.search_runs(
            ids, filter_string=query, max_results=limit))  # noqa: B023 - called at once
        for run in page:
            tags = run.data.tags
            token = tags.get(schema.TAG_TOKEN, "")
            if schema.TAG_EXPERIMENT in tags and schema.TAG_NAMESPACE in tags and token:
                found.append(OpenSweep(run.info.run_id, tags[schema.TAG_NAMESPACE], tags[schema.TAG_EXPERIMENT], token))
        if len(found) >= limit:
            break
    return found[:limit]


def open_children(parent_run_id: str, *, limit: int, tracking_uri: str | None = None) -> list[str]:
    """Ids of the RUNNING runs nested under `parent_run_id` (a sweep's trial runs), at most `limit`."""
    return _open_children(store_for(tracking_uri), parent_run_id, limit)


def _open_children(store: Store, parent_run_id: str, limit: int) -> list[str]:
    query = f"attributes.status = '{schema.RUNNING}' AND tags.`{schema.TAG_PARENT_RUN_ID}` = '{parent_run_id}'"
    experiment_id = store.experiment_of(parent_run_id)
    runs = store.call("search runs", lambda client: client.search_runs(
        [experiment_id], filter_string=query, max_results=limit))
    return [run.info.run_id for run in runs]
