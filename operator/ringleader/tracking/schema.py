"""The MLflow schema: tag keys, run names, params from a trial; metric names are metric_names.py's.

One MLflow experiment per DistributedTrainingExperiment, tagged as a model-training experiment; a
parent run per sweep (one `ringleader run` or one CR generation); a child run per trial whose params
are the resolved spec, less what the trial does not use; a nested run per rank with step-indexed
metrics. Used by runs.py, sessions.py and publisher.py; the operator reads the tag keys.
"""

from __future__ import annotations

import collections
import json
import re
import urllib.parse
from typing import Any, Iterable, Mapping

from ringleader.api.experiment import DistributedTrainingExperiment
from ringleader.api import variants
from ringleader.api.spec import ExperimentSpec, OptimizerName
from ringleader.api import trial as trial_
from ringleader.contract import provenance as provenance_

# MLflow's own tags: nesting in the UI and the run's display name.
TAG_PARENT_RUN_ID = "mlflow.parentRunId"
TAG_RUN_NAME = "mlflow.runName"
TAG_NOTE = "mlflow.note.content"

# MLflow 3's experiment tag choosing what its UI shows: model training (runs, charts) or GenAI (traces, judges).
TAG_EXPERIMENT_KIND = "mlflow.experimentKind"
EXPERIMENT_KIND_TRAINING = "custom_model_development"

# The MLflow UI of recent releases (3.17 here) chooses that view from a switch kept in the browser, GenAI unless
# changed, and no longer from the tag: this query in a link opens the model-training view.
UI_TRAINING_VIEW = "workflowType=machine_learning"

# ringleader's tags, for filtering in the UI ("tags.`ringleader.kind` = 'trial'") and for finding runs again.
TAG_KIND = "ringleader.kind"
TAG_EXPERIMENT = "ringleader.experiment"
TAG_NAMESPACE = "ringleader.namespace"
TAG_TRIAL = "ringleader.trial"
TAG_TRIAL_INDEX = "ringleader.trialIndex"
# On a trial run, for the runs list's columns (the shared view TRIALS_VIEW selects them): what it runs, in short
# names. MLflow 3.17 draws a tag's column 100 px wide, headed by the tag's key, and keeps no width in a view: a
# key or a value wider than about 11 characters is cut ("architecture" is), so these are short, not under "ringleader.".
TAG_ARCHITECTURE = "arch"
TAG_PARADIGM = "paradigm"
TAG_WORKERS = "workers"
TAG_ROLE = "ringleader.role"
TAG_RANK = "ringleader.rank"
TAG_ATTEMPT = "ringleader.attempt"
TAG_NODE = "ringleader.node"  # on a rank run: the node the rank ran on (contract.NODE_NAME)
TAG_POD = "ringleader.pod"  # on a rank run: its pod's host name ("worker-1"), shared by the pod's ranks
TAG_LOCAL_RANK = "ringleader.localRank"  # on a rank run: its place in its pod (contract.LOCAL_RANK)
TAG_PLACEMENT = "ringleader.placement"  # on a trial run: where its ranks ran ("3 nodes, 100% across")
TAG_STATUS_REASON = "ringleader.reason"
TAG_STATUS_MESSAGE = "ringleader.message"
TAG_SOURCE = "ringleader.source"
# A token chosen on disk before a run is created: finding it again makes creation idempotent when a
# create succeeded but its answer was lost (server went away mid-request).
TAG_PROVENANCE = "ringleader.provenance"
"""TAG_PROVENANCE prefixes a sweep run's provenance tags: ringleader.provenance.host, .cpus, .loadBefore, ..."""
TAG_TOKEN = "ringleader.token"

KIND_SWEEP = "sweep"
KIND_TRIAL = "trial"
KIND_RANK = "rank"

# Run statuses written by ringleader (MLflow's RunStatus names).
RUNNING = "RUNNING"
FINISHED = "FINISHED"
FAILED = "FAILED"
KILLED = "KILLED"
TERMINAL_STATUSES = (FINISHED, FAILED, KILLED)

# MLflow's limits: a param value, a tag value, entities per batch.
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000
MAX_PARAMS_PER_BATCH = 100
MAX_PARAM_KEY = 250
_PARAM_KEY_REFUSED = re.compile(r"[^\w\-./: ]")

# Param values that say "nothing here": a param is left out rather than shown with one of them.
PLACEHOLDERS = frozenset({"", "{}", "[]", "None", "null"})


def param_key(key: str) -> str:
    """`key` as MLflow accepts a param name: characters other than letters, digits and _ - . / : and space
    (a newline in a nodeSelector key, say) become "_", and at most MAX_PARAM_KEY characters."""
    return _PARAM_KEY_REFUSED.sub("_", key)[:MAX_PARAM_KEY] or "_"


def flatten(document: Any, prefix: str = "") -> dict[str, str]:
    """{"sync": {"paradigm": "BSP"}, "workers": {"groups": [{"name": "a"}]}} ->
    {"sync.paradigm": "BSP", "workers.groups.0.name": "a"}; empty maps, lists and nulls are left out."""
    if isinstance(document, Mapping):
        items: dict[str, str] = {}
        for key, value in document.items():
            items.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return items
    if isinstance(document, (list, tuple)):
        items = {}
        for index, value in enumerate(document):
            items.update(flatten(value, f"{prefix}.{index}"))
        return items
    if isinstance(document, bool):
        return {prefix: "true" if document else "false"}
    text = "" if document is None else str(document)[:MAX_PARAM_VALUE]
    return {} if text in PLACEHOLDERS else {prefix: text}


TRANSFORMER = "transformer"  # the built-in model that reads tokens (sequenceLength), not images


def unused(spec: ExperimentSpec) -> tuple[str, ...]:
    """The dotted spec fields a trial of `spec` never reads (api/spec.py says which each setting needs): shown
    as params they would suggest, say, parameter servers in a ring."""
    ignored = [] if variants.ARCHITECTURES[spec.architecture].has_servers else ["parameterServers"]
    ignored += [f"sync.{field}" for field in variants.STALENESS_FIELDS
                if field not in variants.PARADIGMS[spec.sync.paradigm].staleness_fields]
    if spec.network.bandwidth is None:  # nothing to enforce: Emulated by default would read as if it were
        ignored.append("network.enforcement")
    if spec.model.optimizer.name != OptimizerName.SGD:
        ignored.append("model.optimizer.momentum")
    if spec.model.name == TRANSFORMER:
        ignored.append("data.synthetic.imageSize")
    elif ":" not in spec.model.name:  # a built-in image model; a user's own may read either
        ignored.append("data.synthetic.sequenceLength")
    ignored += [f"compression.{field}" for field in variants.COMPRESSION_FIELDS
                if field not in variants.CODECS[spec.compression.method].parameters]
    return tuple(ignored)


def without(params: Mapping[str, str], prefixes: Iterable[str]) -> dict[str, str]:
    """`params` less every key that is, or lies under, one of `prefixes`."""
    prefixes = tuple(prefixes)
    return {key: value for key, value in params.items()
            if not any(key == p or key.startswith(p + ".") for p in prefixes)}


def spec_params(spec: ExperimentSpec) -> dict[str, str]:
    """A resolved spec as params in dotted camelCase keys: what the trial uses, nothing empty."""
    document = spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"sweep"})
    return without(flatten(document), unused(spec))


def sweep_params(experiment: DistributedTrainingExperiment) -> dict[str, str]:
    """The parent run's params: the settings its trials share, and each swept axis with its values
    ("sweep.architecture" = "ParameterServer, RingAllReduce"), never the base value an axis replaces."""
    spec = experiment.spec
    document = spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"sweep"})
    params = flatten(document)
    if spec.sweep is not None:
        axes = spec.sweep.matrix.axes()
        params = without(params, (".".join(trial_.AXIS_PATHS[axis]) for axis in axes))
        for axis, values in axes.items():
            params[f"sweep.{axis}"] = ", ".join(trial_.axis_text(value) for value in values)
        params["sweep.repetitions"] = str(spec.sweep.repetitions)
        params["sweep.maxParallel"] = str(spec.sweep.max_parallel)
    unused_by_all = set.intersection(*(set(unused(t.spec)) for t in trial_.expand(experiment).trials))
    return without(params, unused_by_all)


def trial_params(trial: trial_.Trial) -> dict[str, str]:
    """A trial run's params: the resolved spec it uses (spec_params), plus the trial's identity."""
    params = spec_params(trial.spec)
    params["trial.name"] = trial.name
    params["trial.index"] = str(trial.index)
    params["trial.repetition"] = str(trial.repetition)
    params["trial.worldSize"] = str(trial.world_size)
    for axis, value in trial.parameters.items():
        params[f"trial.parameters.{axis}"] = value
    return params


def trial_tags(trial: trial_.Trial, parent_run_id: str | None) -> dict[str, str]:
    tags = {
        TAG_KIND: KIND_TRIAL,
        TAG_EXPERIMENT: trial.experiment,
        TAG_NAMESPACE: trial.namespace,
        TAG_TRIAL: trial.name,
        TAG_TRIAL_INDEX: str(trial.index),
        TAG_RUN_NAME: trial_run_name(trial),
        TAG_ARCHITECTURE: variants.label(trial.spec.architecture, trial.spec.parameter_servers.replicas),
        TAG_PARADIGM: trial.spec.sync.paradigm.value,
        TAG_WORKERS: str(len(trial.worker_slots())),
    }
    if parent_run_id:
        tags[TAG_PARENT_RUN_ID] = parent_run_id
    return tags


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


# How a swept axis reads in a trial's run name, after architecture, paradigm and worker count (always there).
AXIS_LABELS = {
    "parameterServers": lambda value: _count(int(value), "server"),
    "staleness": lambda value: f"staleness {value}",
    "batchSize": lambda value: f"batch {value}",
    "model": lambda value: f"model {value}",
    "bandwidth": lambda value: f"bandwidth {value}",
    "compression": lambda value: f"compression {value}",
    "repetition": lambda value: f"repetition {value}",
}
ALWAYS_NAMED = ("architecture", "paradigm", "workers")


def _label_parts(trial: trial_.Trial) -> list[tuple[str, str]]:
    """(axis, how it reads) for the trial's topology, then every other value the sweep varies that it uses."""
    spec = trial.spec
    parts = [("architecture", spec.architecture.value), ("paradigm", spec.sync.paradigm.value),
             ("workers", _count(len(trial.worker_slots()), "worker"))]
    ignored = unused(spec)
    for axis, value in trial.parameters.items():
        path = ".".join(trial_.AXIS_PATHS.get(axis, (axis,)))
        if axis not in ALWAYS_NAMED and without({path: value}, ignored):
            parts.append((axis, AXIS_LABELS.get(axis, lambda v, a=axis: f"{a} {v}")(value)))
    return parts


def trial_run_name(trial: trial_.Trial) -> str:
    """"study-3-2 (RingAllReduce, BSP, 4 workers, bandwidth 100Mbit, repetition 1)": the topology, then every
    other value the sweep varies that the trial uses (no staleness under BSP): what tells trials apart in the
    UI's lists and chart legends."""
    return f"{trial.name} ({', '.join(text for _, text in _label_parts(trial))})"


# A metric key holds letters, digits and _ - . / : and space (MLflow); a sweep label holds no "/" or ":".
_NOT_IN_A_LABEL = re.compile(r"[^A-Za-z0-9_.-]")
MAX_LABEL = 200
"""MAX_LABEL leaves room within MLflow's 250-character key for the metric's name before the label."""


def sweep_labels(trials: Iterable[trial_.Trial]) -> dict[str, str]:
    """{trial name: what sets it apart from the sweep's other trials}, as the sweep run's metric keys end:
    "RingAllReduce", "ParameterServer-BSP-4_workers", "SSP-staleness_2-repetition_1". Only what varies between
    the trials is named, as the run names read, spaces made "_"; a trial whose label is not its own (nothing
    varies, or two read alike) is named by its trial name."""
    trials = list(trials)
    parts = {t.name: _label_parts(t) for t in trials}
    varying = {axis for axis in {a for found in parts.values() for a, _ in found}
               if len({dict(found).get(axis) for found in parts.values()}) > 1}
    labels = {name: _NOT_IN_A_LABEL.sub("_", "-".join(text for axis, text in found if axis in varying))[:MAX_LABEL]
              for name, found in parts.items()}
    taken = collections.Counter(labels.values())
    return {name: label if label.strip("_.-") and taken[label] == 1 else name for name, label in labels.items()}


def rank_run_name(trial_name: str, rank: int, role: str, attempt: int = 1) -> str:
    """"study-3-2/rank-1 (worker)": with its trial, so rank runs of different trials differ in a chart legend;
    "study-3-2/rank-1 (worker, attempt 2)" after the operator restarted the trial once, so each attempt's rank
    runs, all under the one trial run, differ too."""
    return f"{trial_name}/rank-{rank} ({role}{f', attempt {attempt}' if attempt > 1 else ''})"


def rank_tags(trial_name: str, rank: int, role: str, trial_run_id: str, node: str | None = None,
              attempt: int = 1, pod: str | None = None, local_rank: int = 0) -> dict[str, str]:
    """A rank run's tags: which rank of which trial and attempt, and where it ran (its node when known, its pod
    and its local rank there)."""
    tags = {
        TAG_KIND: KIND_RANK,
        TAG_TRIAL: trial_name,
        TAG_RANK: str(rank),
        TAG_ROLE: role,
        TAG_ATTEMPT: str(attempt),
        TAG_PARENT_RUN_ID: trial_run_id,
        TAG_RUN_NAME: rank_run_name(trial_name, rank, role, attempt),
        TAG_LOCAL_RANK: str(local_rank),
    }
    if node:
        tags[TAG_NODE] = node
    if pod:
        tags[TAG_POD] = pod
    return tags


def ui_url(base: str, experiment_id: str, run_id: str | None = None, artifact: str | None = None) -> str:
    """The MLflow UI's page of an experiment, of one of its runs, or of one of a run's artifacts (the run's
    Artifacts tab with that file open), under `base` (http://127.0.0.1:5000)."""
    page = f"{base.rstrip('/')}/#/experiments/{experiment_id}"
    if run_id:
        page += f"/runs/{run_id}" + (f"/artifacts/{artifact}" if artifact else "")
    return f"{page}?{UI_TRAINING_VIEW}"


def ui_base(tracking_uri: str | None) -> str | None:
    """The MLflow UI's address for a tracking server's URI (http(s)://host:port/path), credentials and query left
    out; None for a local store (a path, sqlite:, file:), whose UI has no address until someone serves it."""
    parts = urllib.parse.urlsplit(tracking_uri or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path.rstrip('/')}"


# MLflow's runs list takes its filter, order and columns from an experiment tag mlflow.sharedViewState.<key> when a
# link says ?viewStateShareKey=<key>: ringleader's view lists the trial runs (flat, not folded under their sweep)
# with what sets them apart and what they measured as columns.
TAG_SHARED_VIEW = "mlflow.sharedViewState."
TRIALS_VIEW = "ringleader-trials"
TRIALS_VIEW_COLUMNS = (("tags", TAG_ARCHITECTURE), ("tags", TAG_PARADIGM), ("tags", TAG_WORKERS),
                       ("metrics", "throughput_samples_per_s"), ("metrics", "iteration_p50_ms"),
                       ("metrics", "share_comm_pct"), ("metrics", "share_wait_pct"))


def trials_view_state() -> str:
    """The shared view TRIALS_VIEW, as the experiment tag's JSON: sorted by trial index, which also keeps MLflow
    from folding the trials under their sweep run."""
    return json.dumps({
        "searchFilter": f"tags.`{TAG_KIND}` = '{KIND_TRIAL}'", "orderByKey": f"tags.`{TAG_TRIAL_INDEX}`",
        "orderByAsc": True, "selectedColumns": [f"{kind}.`{key}`" for kind, key in TRIALS_VIEW_COLUMNS]})


def trials_url(base: str, experiment_id: str) -> str:
    """The experiment's runs list in the shared view TRIALS_VIEW: one row per trial, its topology and results as
    columns."""
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs?viewStateShareKey={TRIALS_VIEW}&{UI_TRAINING_VIEW}"


def chunks(items: Iterable[Any], size: int) -> Iterable[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def provenance_tags(provenance: dict) -> dict[str, str]:
    """The sweep run's tags for its provenance (contract/provenance.py): one per item, shown as columns."""
    return {f"{TAG_PROVENANCE}.{key}": (provenance_.EARLIER_SEPARATOR.join(value) if isinstance(value, list)
                                         else str(value))[:5000]
            for key, value in provenance.items() if value is not None}


def provenance_of(tags: dict[str, str]) -> dict[str, str]:
    """The provenance a sweep run's tags hold (provenance_tags), values as strings; {} when it has none."""
    prefix = f"{TAG_PROVENANCE}."
    return {key.removeprefix(prefix): value for key, value in tags.items() if key.startswith(prefix)}
