"""An MLflow store that retries with a bounded backoff and creates runs exactly once; used by runs.py and publisher.py."""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import re
import time
from typing import Any, Callable, Iterable, TypeVar

import mlflow.entities
import mlflow.exceptions
import mlflow.tracking

from ringleader.api import trial as trial_
from ringleader.contract import redaction
from ringleader.tracking import schema
from ringleader.tracking import settings as settings_

log = logging.getLogger(__name__)
T = TypeVar("T")

# Errors that say the request itself is wrong: retrying them can never succeed.
PERMANENT_ERROR_CODES = frozenset({
    "INVALID_PARAMETER_VALUE", "RESOURCE_DOES_NOT_EXIST", "RESOURCE_ALREADY_EXISTS", "BAD_REQUEST",
    "MALFORMED_REQUEST", "PERMISSION_DENIED", "UNAUTHENTICATED", "CUSTOMER_UNAUTHORIZED", "INVALID_STATE",
    "ENDPOINT_NOT_FOUND", "NOT_FOUND", "ALREADY_EXISTS", "FEATURE_DISABLED", "NOT_IMPLEMENTED",
})


class TrackingUnavailable(RuntimeError):
    """The tracking store did not answer within the retries; the records stay on disk for a later publish."""


def is_transient(error: BaseException) -> bool:
    """Connection failures, timeouts, 5xx and a locked sqlite file pass; a rejected request does not."""
    if isinstance(error, mlflow.exceptions.MlflowException):
        return error.error_code not in PERMANENT_ERROR_CODES
    return isinstance(error, OSError)  # requests' errors are OSErrors too


@dataclasses.dataclass
class Store:
    """One tracking URI and the client for it; every call goes through `call` and its retries."""

    uri: str
    settings: settings_.TrackingSettings = dataclasses.field(default_factory=settings_.TrackingSettings)
    sleep: Callable[[float], None] = time.sleep

    def __post_init__(self) -> None:
        self.settings.apply()
        self.client = mlflow.tracking.MlflowClient(tracking_uri=self.uri)

    def call(self, what: str, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`function(*args, **kwargs)`, retried on transient errors; TrackingUnavailable after the last attempt."""
        delay = self.settings.backoff_initial_seconds
        for attempt in range(1, self.settings.attempts + 1):
            try:
                return function(*args, **kwargs)
            except Exception as error:  # noqa: BLE001 - classified right below; permanent ones re-raise
                if not is_transient(error):
                    raise
                if attempt == self.settings.attempts:
                    raise TrackingUnavailable(f"MLflow at {redaction.redact(self.uri)} did not answer ({what}): "
                                              f"{_first_line(error)}") from error
                log.debug("%s failed (attempt %d): %s", what, attempt, redaction.redact(str(error)))
                self.sleep(min(delay, self.settings.backoff_max_seconds))
                delay *= 2
        raise AssertionError("unreachable")

    # Experiments and runs.

    def ensure_experiment(self, name: str) -> str:
        existing = self.call("get experiment", self.client.get_experiment_by_name, name)
        if existing is not None:
            if existing.lifecycle_stage == "deleted":
                self.call("restore experiment", self.client.restore_experiment, existing.experiment_id)
            return existing.experiment_id
        artifact_location = None
        root = settings_.local_artifact_root(self.uri)
        if root is not None:
            artifact_location = (root / _slug(name)).as_uri()
        try:
            return self.call("create experiment", self.client.create_experiment, name,
                             artifact_location=artifact_location)
        except mlflow.exceptions.MlflowException as error:
            # Someone else (another operator replica, a retried request) created it meanwhile.
            if error.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            return self.call("get experiment", self.client.get_experiment_by_name, name).experiment_id

    def find_run(self, experiment_id: str, token: str) -> str | None:
        runs = self.call("search runs", self.client.search_runs, [experiment_id],
                         filter_string=f"tags.`{schema.TAG_TOKEN}` = '{token}'", max_results=1)
        return runs[0].info.run_id if runs else None

    def create_run_once(self, experiment_id: str, token: str, tags: dict[str, str],
                        start_time_ms: int | None = None) -> str:
        """The run carrying `token`, created if none does: a create whose answer was lost is found, not repeated."""
        found = self.find_run(experiment_id, token)
        if found:
            return found
        tags = {**tags, schema.TAG_TOKEN: token}
        run_name = tags.get(schema.TAG_RUN_NAME)
        run = self.call("create run", self.client.create_run, experiment_id, start_time=start_time_ms,
                        tags=tags, run_name=run_name)
        return run.info.run_id

    def experiment_of(self, run_id: str) -> str:
        return self.call("get run", self.client.get_run, run_id).info.experiment_id

    def log_params(self, run_id: str, params: dict[str, str]) -> None:
        items = [mlflow.entities.Param(k, v) for k, v in sorted(params.items())]
        for batch in schema.chunks(items, schema.MAX_PARAMS_PER_BATCH):
            self.call("log params", self.client.log_batch, run_id, params=batch)

    def log_metrics(self, run_id: str, metrics: Iterable[mlflow.entities.Metric]) -> int:
        """Log in batches of at most `metrics_per_batch`; the store drops exact repeats, so a replay is harmless."""
        count = 0
        for batch in schema.chunks(metrics, self.settings.metrics_per_batch):
            self.call("log metrics", self.client.log_batch, run_id, metrics=batch)
            count += len(batch)
        return count

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        items = [mlflow.entities.RunTag(k, v[: schema.MAX_TAG_VALUE]) for k, v in tags.items()]
        for batch in schema.chunks(items, schema.MAX_PARAMS_PER_BATCH):
            self.call("set tags", self.client.log_batch, run_id, tags=batch)

    def log_artifact(self, run_id: str, path: pathlib.Path, artifact_path: str | None = None) -> None:
        self.call("log artifact", self.client.log_artifact, run_id, str(path), artifact_path)

    def set_status(self, run_id: str, status: str, end_time_ms: int | None = None) -> None:
        if status == schema.RUNNING:
            self.call("set status", self.client.update_run, run_id, status=status)
        else:
            self.call("set status", self.client.set_terminated, run_id, status, end_time_ms)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return redaction.redact(text[0])[:300] if text else type(error).__name__


# An MLflow experiment's name may be 317 characters ("<namespace>/<name>"); a file name holds 255 bytes.
MAX_SLUG = 100


def _slug(name: str) -> str:
    """A directory name for the experiment `name`: safe characters; a long one keeps a prefix and a hash."""
    return trial_.bounded_name(re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "experiment", MAX_SLUG)
