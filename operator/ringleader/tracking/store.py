"""An MLflow store that retries with a bounded backoff and creates runs exactly once; used by runs.py and
publisher.py."""

from __future__ import annotations

import dataclasses
import fcntl
import logging
import pathlib
import time
from typing import Callable, Iterable, TypeVar

import mlflow.entities
import mlflow.exceptions
import mlflow.tracking

from ringleader.contract import layout, redaction
from ringleader.tracking import schema
from ringleader.tracking import settings as settings_

log = logging.getLogger(__name__)
T = TypeVar("T")
# MLflow logs each step of creating or migrating a sqlite store at INFO, on every first run into a new
# file: news to no ringleader user, and it buries the run's own lines. Problems still show (WARNING up).
for _chatty in ("mlflow.store.db.utils", "alembic"):
    logging.getLogger(_chatty).setLevel(logging.WARNING)

# Errors that say the request itself is wrong: retrying them can never succeed.
PERMANENT_ERROR_CODES = frozenset({
    "INVALID_PARAMETER_VALUE", "RESOURCE_DOES_NOT_EXIST", "RESOURCE_ALREADY_EXISTS", "BAD_REQUEST",
    "MALFORMED_REQUEST", "PERMISSION_DENIED", "UNAUTHENTICATED", "CUSTOMER_UNAUTHORIZED", "INVALID_STATE",
    "ENDPOINT_NOT_FOUND", "NOT_FOUND", "ALREADY_EXISTS", "FEATURE_DISABLED", "NOT_IMPLEMENTED",
})


class TrackingUnavailable(RuntimeError):
    """The tracking store did not answer within the retries; the records stay on disk for a later publish."""


# Faults of the calling code, not of the store: retrying repeats them, and "MLflow did not answer" would hide them.
PROGRAMMING_ERRORS = (TypeError, AttributeError, NameError, LookupError, AssertionError, NotImplementedError,
                      ImportError)


def is_transient(error: BaseException) -> bool:
    """Whether retrying may help: every error but a rejected request or a fault of the caller. Connection
    failures, timeouts, 5xx, a locked or unreadable sqlite file, a store that cannot be created: the store is
    unavailable, the records wait."""
    if isinstance(error, mlflow.exceptions.MlflowException):
        return error.error_code not in PERMANENT_ERROR_CODES
    return isinstance(error, Exception) and not isinstance(error, PROGRAMMING_ERRORS)


@dataclasses.dataclass
class Store:
    """One tracking URI and the client for it; every call goes through `call` and its retries."""

    uri: str
    settings: settings_.TrackingSettings = dataclasses.field(default_factory=settings_.TrackingSettings)
    sleep: Callable[[float], None] = time.sleep

    def __post_init__(self) -> None:
        self.settings.apply()
        self._client: mlflow.tracking.MlflowClient | None = None

    @property
    def client(self) -> mlflow.tracking.MlflowClient:
        """MLflow's client, made on first use: for a sqlite file that creates or migrates the database, which
        may fail (a locked or unreadable file) and is retried like any call."""
        if self._client is None:
            self._client = self._connect()
        return self._client

    def _connect(self) -> mlflow.tracking.MlflowClient:
        database = sqlite_path(self.uri)
        if database is None:
            return mlflow.tracking.MlflowClient(tracking_uri=self.uri)
        # MLflow creates a new database's schema in many steps; two processes doing it at once leave a
        # half-migrated file for good. Under a lock on <db>.lock, the second one finds the work done.
        with open(f"{database}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released on close, or when this process dies
            return mlflow.tracking.MlflowClient(tracking_uri=self.uri)

    def call(self, what: str, request: Callable[[mlflow.tracking.MlflowClient], T]) -> T:
        """`request(client)`, e.g. `lambda client: client.get_run(run_id)`, retried on transient errors;
        TrackingUnavailable after the last attempt. It runs before `call` returns, so a lambda may use a loop's
        variable (ruff's B023 is told so where it happens)."""
        delay = self.settings.backoff_initial_seconds
        for attempt in range(1, self.settings.attempts + 1):
            try:
                return request(self.client)
            except Exception as error:  # noqa: BLE001 - classified right below; permanent ones re-raise
                if not is_transient(error):
                    raise
                if attempt == self.settings.attempts:
                    raise TrackingUnavailable(f"MLflow at {redaction.redact(self.uri)} did not answer ({what}): "
                                              f"{first_line(error)}") from error
                log.debug("%s failed (attempt %d): %s", what, attempt, redaction.redact(str(error)))
                self.sleep(min(delay, self.settings.backoff_max_seconds))
                delay *= 2
        raise AssertionError("unreachable")

    # Experiments and runs.

    def ensure_experiment(self, name: str) -> str:
        """The id of experiment `name`, created if absent, and tagged as model training (schema.TAG_EXPERIMENT_KIND)
        unless it says its kind already: MLflow 3 opens an untagged experiment in its GenAI view; and with the runs
        list's view of its trials (schema.TRIALS_VIEW)."""
        existing = self.call("get experiment", lambda client: client.get_experiment_by_name(name))
        if existing is not None:
            if existing.lifecycle_stage == "deleted":
                self.call("restore experiment", lambda client: client.restore_experiment(existing.experiment_id))
            if schema.TAG_EXPERIMENT_KIND not in existing.tags:  # a kind chosen in the UI is the user's to keep
                self.call("tag experiment", lambda client: client.set_experiment_tag(
                    existing.experiment_id, schema.TAG_EXPERIMENT_KIND, schema.EXPERIMENT_KIND_TRAINING))
            view = schema.trials_view_state()
            if existing.tags.get(schema.TAG_SHARED_VIEW + schema.TRIALS_VIEW) != view:
                self.call("tag experiment", lambda client: client.set_experiment_tag(
                    existing.experiment_id, schema.TAG_SHARED_VIEW + schema.TRIALS_VIEW, view))
            return existing.experiment_id
        artifact_location = None
        root = settings_.local_artifact_root(self.uri)
        if root is not None:
            artifact_location = (root / layout.directory_name(name)).as_uri()
        try:
            return self.call("create experiment", lambda client: client.create_experiment(
                name, artifact_location=artifact_location,
                tags={schema.TAG_EXPERIMENT_KIND: schema.EXPERIMENT_KIND_TRAINING,
                      schema.TAG_SHARED_VIEW + schema.TRIALS_VIEW: schema.trials_view_state()}))
        except mlflow.exceptions.MlflowException as error:
            # Someone else (another operator replica, a retried request) created it meanwhile.
            if error.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            return self.ensure_experiment(name)

    def experiment_id(self, name: str) -> str | None:
        """The id of experiment `name`, None if there is none (a rank's lookup: it never creates one)."""
        found = self.call("get experiment", lambda client: client.get_experiment_by_name(name))
        return found.experiment_id if found is not None and found.lifecycle_stage != "deleted" else None

    def find_run(self, experiment_id: str, token: str) -> str | None:
        runs = self.call("search runs", lambda client: client.search_runs(
            [experiment_id], filter_string=f"tags.`{schema.TAG_TOKEN}` = '{token}'", max_results=1))
        return runs[0].info.run_id if runs else None

    def create_run_once(self, experiment_id: str, token: str, tags: dict[str, str],
                        start_time_ms: int | None = None) -> str:
        """The run carrying `token`, created if none does: a create whose answer was lost is found, not repeated."""
        found = self.find_run(experiment_id, token)
        if found:
            return found
        tags = {**tags, schema.TAG_TOKEN: token}
        run_name = tags.get(schema.TAG_RUN_NAME)
        run = self.call("create run", lambda client: client.create_run(
            experiment_id, start_time=start_time_ms, tags=tags, run_name=run_name))
        return run.info.run_id

    def experiment_of(self, run_id: str) -> str:
        return self.call("get run", lambda client: client.get_run(run_id)).info.experiment_id

    def log_params(self, run_id: str, params: dict[str, str]) -> list[str]:
        """Log `params` (keys made acceptable to MLflow, schema.param_key); returns the keys MLflow still refused.

        A refused param is skipped with a warning rather than refusing the run everything else for good."""
        items = [mlflow.entities.Param(schema.param_key(k), v) for k, v in sorted(params.items())]
        refused = []
        for batch in schema.chunks(items, schema.MAX_PARAMS_PER_BATCH):
            try:
                self.call("log params", lambda client: client.log_batch(run_id, params=batch))  # noqa: B023
            except mlflow.exceptions.MlflowException as error:
                if error.error_code != "INVALID_PARAMETER_VALUE":
                    raise
                refused += self._log_params_one_by_one(run_id, batch)
        return refused

    def _log_params_one_by_one(self, run_id: str, params: list[mlflow.entities.Param]) -> list[str]:
        refused = []
        for param in params:
            try:
                self.call("log param", lambda client: client.log_batch(run_id, params=[param]))  # noqa: B023
            except mlflow.exceptions.MlflowException as error:
                if error.error_code != "INVALID_PARAMETER_VALUE":
                    raise
                log.warning("MLflow refused param %r of run %s, skipped (the rest is published): %s",
                            param.key[:100], run_id, first_line(error))
                refused.append(param.key)
        return refused

    def log_metrics(self, run_id: str, metrics: Iterable[mlflow.entities.Metric]) -> int:
        """Log in batches of at most `metrics_per_batch`; the store drops exact repeats, so a replay is harmless."""
        count = 0
        for batch in schema.chunks(metrics, self.settings.metrics_per_batch):
            self.call("log metrics", lambda client: client.log_batch(run_id, metrics=batch))  # noqa: B023
            count += len(batch)
        return count

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        items = [mlflow.entities.RunTag(k, v[: schema.MAX_TAG_VALUE]) for k, v in tags.items()]
        for batch in schema.chunks(items, schema.MAX_PARAMS_PER_BATCH):
            self.call("set tags", lambda client: client.log_batch(run_id, tags=batch))  # noqa: B023

    def log_artifact(self, run_id: str, path: pathlib.Path, artifact_path: str | None = None) -> None:
        self.call("log artifact", lambda client: client.log_artifact(run_id, str(path), artifact_path))

    def set_status(self, run_id: str, status: str, end_time_ms: int | None = None) -> None:
        if status == schema.RUNNING:
            self.call("set status", lambda client: client.update_run(run_id, status=status))
        else:
            self.call("set status", lambda client: client.set_terminated(run_id, status, end_time_ms))


def sqlite_path(uri: str) -> str | None:
    """The database file of a sqlite:/// URI; None for other stores and in-memory databases."""
    path = uri[len("sqlite:///"):] if uri.startswith("sqlite:///") else None
    return path if path and path != ":memory:" else None


def first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return redaction.redact(text[0])[:300] if text else type(error).__name__


# An MLflow experiment's name may be 317 characters ("<namespace>/<name>"); a file name holds 255 bytes.
