"""Tracking settings in one object: where runs go and how hard to try; built once by the CLI, the launcher or a rank."""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Mapping, MutableMapping

TRACKING_URI_VARIABLE = "MLFLOW_TRACKING_URI"
DEFAULT_LOCAL_URI = "sqlite:///mlflow.db"

# MLflow's own HTTP retries (7, exponential) can block a caller for minutes when the server is away;
# ringleader retries by itself with a bounded backoff and keeps the records on disk meanwhile.
MLFLOW_HTTP_RETRIES_VARIABLE = "MLFLOW_HTTP_REQUEST_MAX_RETRIES"
MLFLOW_HTTP_TIMEOUT_VARIABLE = "MLFLOW_HTTP_REQUEST_TIMEOUT"
# MLflow prints "View run ... at: <tracking URI>" when a run ends, credentials in the URI included;
# ringleader says where to look itself, with the URI redacted.
MLFLOW_PRINT_URL_VARIABLE = "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"


@dataclasses.dataclass(frozen=True)
class TrackingSettings:
    attempts: int = 4
    """attempts per tracking call before the store is declared away. 4 rides over a server restart
    of a few seconds without holding up a trial for long."""
    backoff_initial_seconds: float = 0.5
    """backoff_initial_seconds before the second attempt; doubled after each failure."""
    backoff_max_seconds: float = 8.0
    """backoff_max_seconds caps one wait, so a stop() or the end of a trial is never held up for minutes."""
    http_timeout_seconds: int = 15
    """http_timeout_seconds per MLflow HTTP request: long enough for a batch of 1000 metrics on a busy
    server, short enough that an unreachable host is noticed within a live-publish interval or two."""
    http_retries: int = 0
    """http_retries inside MLflow's client; 0 because the backoff above already retries."""
    metrics_per_batch: int = 1000
    """metrics_per_batch in one `log_batch`: MLflow's limit (MAX_METRICS_PER_BATCH)."""
    live_interval_seconds: float = 5.0
    """live_interval_seconds between live publishes from a rank: the MLflow UI lags training by this much."""

    def apply(self, environ: MutableMapping[str, str] | None = None) -> None:
        """Give MLflow's HTTP client our timeout and retries, and keep it from printing run URLs, unless
        the user set them explicitly."""
        environ = os.environ if environ is None else environ
        environ.setdefault(MLFLOW_HTTP_RETRIES_VARIABLE, str(self.http_retries))
        environ.setdefault(MLFLOW_HTTP_TIMEOUT_VARIABLE, str(self.http_timeout_seconds))
        environ.setdefault(MLFLOW_PRINT_URL_VARIABLE, "true")


def resolve_uri(explicit: str | None = None, spec_uri: str | None = None,
                environ: Mapping[str, str] = os.environ, cwd: pathlib.Path | None = None) -> str:
    """The tracking URI for a local run: the flag, else the spec's tracking.uri, else $MLFLOW_TRACKING_URI,
    else sqlite:///mlflow.db in the working directory. Relative sqlite paths become absolute, so a later
    `ringleader publish` from another directory writes into the same store."""
    uri = explicit or spec_uri or environ.get(TRACKING_URI_VARIABLE) or DEFAULT_LOCAL_URI
    return absolute_uri(uri, cwd)


def absolute_uri(uri: str, cwd: pathlib.Path | None = None) -> str:
    """sqlite:///relative.db -> sqlite:////abs/dir/relative.db; plain paths -> file URIs; others unchanged."""
    cwd = cwd or pathlib.Path.cwd()
    if uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///"):]
        if path.startswith("/") or path == ":memory:":
            return uri
        return "sqlite:///" + str((cwd / path).resolve())
    if "://" not in uri and not uri.startswith("databricks"):
        return (cwd / uri).resolve().as_uri()
    return uri


def local_artifact_root(uri: str) -> pathlib.Path | None:
    """Where a sqlite store keeps artifacts: `mlruns/` beside the database file (MLflow's own default is
    the process's working directory, which scatters artifacts when the store is used from elsewhere)."""
    if uri.startswith("sqlite:////"):
        return pathlib.Path(uri[len("sqlite:///"):]).parent / "mlruns"
    return None
