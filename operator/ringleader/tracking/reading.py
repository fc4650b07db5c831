"""A sweep's results (models.results.SweepResult) read from a `ringleader run` directory or from MLflow.

    result = from_directory("ringleader-runs/quickstart-20250101-120000")
    result, sweep_run_id = from_mlflow(store, "default/quickstart")   # or an experiment id, or a sweep run id

Used by `ringleader report` and `ringleader whatif`, the launcher's session end (sessions.py) and the operator. Both
sources read the same files: on disk, or as the runs' artifacts (trial.json and summary.json at a trial run's
root, records/iterations.jsonl on each rank run, layers/rank-<r>.layers.json on the trial run). A
missing file leaves its part empty: a trial without records still has its row.
"""

from __future__ import annotations

import json
import pathlib
import tempfile

import mlflow.exceptions

from ringleader.models import results
from ringleader.models import summary as summary_
from ringleader.api.trial import Trial
from ringleader.contract import layout, provenance, redaction
from ringleader.contract import records as record_files
from ringleader.tracking import links, schema, settings
from ringleader.tracking import store as store_

RECORDS_ARTIFACT = "records/iterations.jsonl"
"""RECORDS_ARTIFACT is where a rank run keeps its iterations.jsonl."""
LAYERS_DIR = "layers"
"""LAYERS_DIR holds a trial run's rank-<r>.layers.json (publisher.py uploads them)."""
MAX_RUNS = 5000
"""MAX_RUNS a search returns: a sweep has at most 256 trials (api.spec.MAX_TRIALS) of at most 1024 ranks each."""


class SourceNotFound(LookupError):
    """The source names no run directory, MLflow experiment or sweep run; the message says what was tried."""


# -- a run directory ------------------------------------------------------------------------

def session_directory(path: str | pathlib.Path) -> tuple[pathlib.Path, str | None]:
    """The session at `path`: itself, or the newest session inside it (with a sentence saying it was picked)."""
    path = pathlib.Path(path)
    try:
        found = layout.find_sessions(path)
    except FileNotFoundError:
        found = []
    if not found:
        raise SourceNotFound(f"{path}: no `ringleader run` directory ({layout.SESSION_FILE}) there or inside it")
    if found == [path]:
        return path, None
    newest = found[-1]  # find_sessions orders by the start each recorded
    runs = f"{len(found)} run{'s' if len(found) != 1 else ''}"
    return newest, f"{path} holds {runs}; taking the newest, {newest.name}"


def from_directory(path: str | pathlib.Path) -> results.SweepResult:
    """The session at `path` (or the newest inside it), each trial directory that holds a trial.json."""
    directory, _ = session_directory(path)
    session = layout.Session.load(directory)
    trials = []
    for name in session.trials:
        trial_dir = directory / name
        if (trial_dir / layout.TRIAL_FILE).is_file():
            try:
                trials.append(trial_from_directory(trial_dir))
            except layout.DamagedFile:
                continue  # a report of the trials that can be read; publishing says which was left out
    return results.SweepResult(session.experiment.name, trials, tuple(session.trials),
                               provenance.words(session.provenance) if session.provenance else None)


def trial_from_directory(trial_dir: pathlib.Path) -> results.TrialResult:
    """One trial directory of a session (it holds trial.json): its records, layers, summary and outcome."""
    trial = layout.read_trial(trial_dir)
    outcome = layout.read_outcome(trial_dir)
    status = outcome.status if outcome else schema.RUNNING
    message = (outcome.message or outcome.reason) if outcome and outcome.status != schema.FINISHED else None
    summary = layout.read_json(trial_dir / layout.SUMMARY_FILE)
    records, layers = {}, {}
    for rank, rank_dir in layout.rank_dirs(trial_dir).items():
        records[rank] = record_files.read_iterations(rank_dir / layout.ITERATIONS_FILE)
        document = layout.read_json(rank_dir / layout.LAYERS_FILE)
        if isinstance(document, dict):
            layers[rank] = document
    return results.TrialResult(trial, status, message, summary_.read(summary), records, layers)


# -- MLflow ---------------------------------------------------------------------------------

def lookup_store(tracking_uri: str | None, source: str, tried: str) -> store_.Store:
    """The MLflow store to look `source` up in (`tracking_uri`, else the default `ringleader run` uses).
    SourceNotFound, naming what was `tried` first, when it is a sqlite file that does not exist: opening it
    would create an empty store, and a typo would leave an mlflow.db behind."""
    refused = layout.experiment_file(source)
    if refused:
        raise SourceNotFound(refused)
    uri = settings.resolve_uri(tracking_uri)
    database = store_.sqlite_path(uri)
    if database is not None and not pathlib.Path(database).is_file():
        raise SourceNotFound(f"{source}: {tried}, and no MLflow store at {redaction.redact(uri)} to look it up in "
                             "(--tracking-uri URI names another)")
    return store_.Store(uri)


def picked_sweep(source: str, run_id: str) -> str | None:
    """The sentence saying which sweep run an experiment's name or id took (its newest), None when `source` named
    the run itself: said as session_directory says which run of a directory it took."""
    return None if source == run_id else f"{source}: taking its newest sweep run, {run_id}"


def from_mlflow(store: store_.Store, source: str) -> tuple[results.SweepResult, str]:
    """(the sweep, its run id) for `source`: a sweep run id, or an MLflow experiment (name or id) whose newest
    sweep run is taken. Raises SourceNotFound naming what was tried."""
    run = _sweep_run(store, source)
    experiment = run.data.tags.get(schema.TAG_EXPERIMENT, "")
    trial_runs = _search(store, run.info.experiment_id, f"tags.`{schema.TAG_KIND}` = '{schema.KIND_TRIAL}' and "
                                                        f"tags.`{schema.TAG_PARENT_RUN_ID}` = '{run.info.run_id}'")
    with tempfile.TemporaryDirectory(prefix="ringleader-report-") as staging:
        read = [(trial_run, found) for trial_run in latest_attempts(trial_runs)
                if (found := _trial_from_run(store, trial_run, pathlib.Path(staging)))]
    read.sort(key=lambda pair: pair[1][0].trial.index)
    trials = [trial for _, (trial, _) in read]
    base = schema.ui_base(store.uri)
    pages = {} if base is None else links.run_pages(base, run.info.experiment_id, [
        (trial.trial.name, trial_run.info.run_id, ranks) for trial_run, (trial, ranks) in read])
    taken = schema.provenance_of(run.data.tags)
    return results.SweepResult(experiment or (trials[0].trial.experiment if trials else ""), trials,
                               provenance=provenance.words(taken) if taken else None,
                               mlflow_pages=pages), run.info.run_id


def latest_attempts(trial_runs: list) -> list:
    """One run per trial: a resumed sweep (`ringleader run --resume`) holds a trial's unfinished attempt and the
    attempt that followed it; the one started last is the trial's."""
    latest: dict[str, object] = {}
    for run in sorted(trial_runs, key=lambda r: r.info.start_time or 0):
        latest[run.data.tags.get(schema.TAG_TRIAL, run.info.run_id)] = run
    return list(latest.values())


def trial_from_mlflow(store: store_.Store, run_id: str) -> results.TrialResult | None:
    """The trial run `run_id`'s result; None when there is no such run or it is not a trial run."""
    run = _get_run(store, run_id)
    if run is None or run.data.tags.get(schema.TAG_KIND) != schema.KIND_TRIAL:
        return None
    with tempfile.TemporaryDirectory(prefix="ringleader-trial-") as staging:
        found = _trial_from_run(store, run, pathlib.Path(staging))
    return found[0] if found else None


def _sweep_run(store: store_.Store, source: str):
    tried = []
    run = _get_run(store, source)
    if run is not None:
        if run.data.tags.get(schema.TAG_KIND) == schema.KIND_SWEEP:
            return run
        tried.append(f"run {source} is a {run.data.tags.get(schema.TAG_KIND, 'non-ringleader')} run, not a sweep run")
    else:
        tried.append(f"no run {source}")
    candidates = [source] + ([f"default/{source}"] if "/" not in source else [])
    for name in candidates:
        experiment = store.call("get experiment",
                                lambda client: client.get_experiment_by_name(name))  # noqa: B023 - called at once
        if experiment is None:
            tried.append(f"no experiment named {name!r}")
            continue
        return _newest_sweep(store, experiment.experiment_id, f"experiment {name!r}")
    if source.isdigit():
        try:
            experiment = store.call("get experiment", lambda client: client.get_experiment(source))
            return _newest_sweep(store, experiment.experiment_id, f"experiment id {source}")
        except mlflow.exceptions.MlflowException:
            tried.append(f"no experiment with id {source}")
    raise SourceNotFound(f"{source}: " + "; ".join(tried))


def _get_run(store: store_.Store, run_id: str):
    try:
        return store.call("get run", lambda client: client.get_run(run_id))
    except mlflow.exceptions.MlflowException:  # RESOURCE_DOES_NOT_EXIST, or an id of the wrong shape
        return None


def _newest_sweep(store: store_.Store, experiment_id: str, what: str):
    runs = store.call("search runs", lambda client: client.search_runs(
        [experiment_id], filter_string=f"tags.`{schema.TAG_KIND}` = '{schema.KIND_SWEEP}'",
        order_by=["attributes.start_time DESC"], max_results=1))
    if not runs:
        raise SourceNotFound(f"{what} has no sweep run (tag {schema.TAG_KIND}={schema.KIND_SWEEP})")
    return runs[0]


def _search(store: store_.Store, experiment_id: str, filter_string: str) -> list:
    return list(store.call("search runs", lambda client: client.search_runs(
        [experiment_id], filter_string=filter_string, max_results=MAX_RUNS)))


def _artifacts(store: store_.Store, run_id: str, path: str | None = None) -> set[str]:
    listed = store.call("list artifacts", lambda client: client.list_artifacts(run_id, path))
    return {artifact.path for artifact in listed}


def _download(store: store_.Store, run_id: str, path: str, staging: pathlib.Path) -> pathlib.Path:
    target = staging / run_id
    target.mkdir(exist_ok=True)
    return pathlib.Path(store.call("download artifact",
                                   lambda client: client.download_artifacts(run_id, path, str(target))))


def _trial_from_run(store: store_.Store, run,
                    staging: pathlib.Path) -> tuple[results.TrialResult, dict[int, str]] | None:
    """A trial run's result and its rank runs' ids by rank; None when it has no trial.json (nothing says what it
    was)."""
    run_id = run.info.run_id
    root = _artifacts(store, run_id)
    if layout.TRIAL_FILE not in root:
        return None
    trial = Trial.model_validate_json(_download(store, run_id, layout.TRIAL_FILE, staging).read_text())
    summary = None
    if layout.SUMMARY_FILE in root:
        summary = summary_.read(json.loads(_download(store, run_id, layout.SUMMARY_FILE, staging).read_text()))
    layers = {}
    if LAYERS_DIR in root:
        for path in sorted(_artifacts(store, run_id, LAYERS_DIR)):
            name = pathlib.PurePosixPath(path).name
            if name.startswith("rank-") and name.endswith(".layers.json"):
                rank = int(name[len("rank-"):-len(".layers.json")])
                layers[rank] = json.loads(_download(store, run_id, path, staging).read_text())
    records, rank_run_ids = {}, {}
    rank_runs = _search(store, run.info.experiment_id, f"tags.`{schema.TAG_KIND}` = '{schema.KIND_RANK}' and "
                                                       f"tags.`{schema.TAG_PARENT_RUN_ID}` = '{run_id}'")
    for rank_run in rank_runs:
        rank = int(rank_run.data.tags.get(schema.TAG_RANK, "-1"))
        rank_run_ids[rank] = rank_run.info.run_id
        if RECORDS_ARTIFACT.split("/")[0] in _artifacts(store, rank_run.info.run_id):
            downloaded = _download(store, rank_run.info.run_id, RECORDS_ARTIFACT, staging)
            records[rank] = record_files.read_iterations(downloaded)
    message = None
    if run.info.status != schema.FINISHED:
        message = run.data.tags.get(schema.TAG_STATUS_MESSAGE) or run.data.tags.get(schema.TAG_STATUS_REASON)
    return (results.TrialResult(trial, run.info.status, message, summary, dict(sorted(records.items())), layers),
            rank_run_ids)
