"""The MLflow schema: tag keys, run names, params from a trial, metrics from records.

One MLflow experiment per DistributedTrainingExperiment; a parent run per sweep (one `ringleader run`
or one CR generation); a child run per trial whose params are the resolved spec; a nested run per
rank with step-indexed metrics. Used by runs.py and publisher.py; the operator reads the tag keys.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable, Mapping

from ringleader.api import trial as trial_

# MLflow's own tags: nesting in the UI and the run's display name.
TAG_PARENT_RUN_ID = "mlflow.parentRunId"
TAG_RUN_NAME = "mlflow.runName"
TAG_NOTE = "mlflow.note.content"

# ringleader's tags, for filtering in the UI ("tags.`ringleader.kind` = 'trial'") and for finding runs again.
TAG_KIND = "ringleader.kind"
TAG_EXPERIMENT = "ringleader.experiment"
TAG_NAMESPACE = "ringleader.namespace"
TAG_TRIAL = "ringleader.trial"
TAG_TRIAL_INDEX = "ringleader.trialIndex"
TAG_ROLE = "ringleader.role"
TAG_RANK = "ringleader.rank"
TAG_STATUS_REASON = "ringleader.reason"
TAG_STATUS_MESSAGE = "ringleader.message"
TAG_SOURCE = "ringleader.source"
# A token chosen on disk before a run is created: finding it again makes creation idempotent when a
# create succeeded but its answer was lost (server went away mid-request).
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

# Record keys that are indexes or labels, not metrics.
NOT_METRICS = frozenset({"step", "rank", "role", "warmup", "timestamp", "time", "wall_time", "worker"})
# A rank's summary.json is logged under this prefix so it never adds points to an iteration metric's history.
RANK_SUMMARY_PREFIX = "summary/"


def param_key(key: str) -> str:
    """`key` as MLflow accepts a param name: characters other than letters, digits and _ - . / : and space
    (a newline in a nodeSelector key, say) become "_", and at most MAX_PARAM_KEY characters."""
    return _PARAM_KEY_REFUSED.sub("_", key)[:MAX_PARAM_KEY] or "_"


def flatten(document: Any, prefix: str = "") -> dict[str, str]:
    """{"sync": {"paradigm": "BSP"}, "workers": {"groups": [{"name": "a"}]}} ->
    {"sync.paradigm": "BSP", "workers.groups.0.name": "a"}; empty maps and lists are kept as "{}"/"[]"."""
    if isinstance(document, Mapping):
        if not document and prefix:
            return {prefix: "{}"}
        items: dict[str, str] = {}
        for key, value in document.items():
            items.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return items
    if isinstance(document, (list, tuple)):
        if not document:
            return {prefix: "[]"}
        items = {}
        for index, value in enumerate(document):
            items.update(flatten(value, f"{prefix}.{index}"))
        return items
    if isinstance(document, bool):
        return {prefix: "true" if document else "false"}
    return {prefix: "" if document is None else str(document)[:MAX_PARAM_VALUE]}


def trial_params(trial: trial_.Trial) -> dict[str, str]:
    """A trial run's params: the resolved spec in dotted camelCase keys, plus the trial's identity."""
    params = flatten(trial.spec.model_dump(mode="json", by_alias=True, exclude_none=True))
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
    }
    if parent_run_id:
        tags[TAG_PARENT_RUN_ID] = parent_run_id
    return tags


def trial_run_name(trial: trial_.Trial) -> str:
    """"quickstart-1 (PeerToPeer, SSP, 4 workers)": the swept values are what tells trials apart in the UI."""
    spec = trial.spec
    label = f"{spec.architecture.value}, {spec.sync.paradigm.value}, {spec.workers.replicas} workers"
    if "repetition" in trial.parameters:
        label += f", repetition {trial.repetition}"
    return f"{trial.name} ({label})"


def rank_tags(trial_name: str, rank: int, role: str, trial_run_id: str) -> dict[str, str]:
    return {
        TAG_KIND: KIND_RANK,
        TAG_TRIAL: trial_name,
        TAG_RANK: str(rank),
        TAG_ROLE: role,
        TAG_PARENT_RUN_ID: trial_run_id,
        TAG_RUN_NAME: f"rank-{rank} ({role})",
    }


def is_metric_value(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def record_metrics(record: Mapping[str, Any]) -> dict[str, float]:
    """The metrics of one iteration or server record: every finite number that is not an index or label."""
    return {key: float(value) for key, value in record.items() if key not in NOT_METRICS and is_metric_value(value)}


def numeric_items(document: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Finite numbers of a (nested) summary as flat metric names; text, lists and nulls are left out."""
    items: dict[str, float] = {}
    for key, value in document.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            items.update(numeric_items(value, name + "."))
        elif is_metric_value(value):
            items[name] = float(value)
    return items


def chunks(items: Iterable[Any], size: int) -> Iterable[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
