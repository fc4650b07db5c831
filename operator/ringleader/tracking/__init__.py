"""MLflow tracking: runs per experiment, trial and rank, metrics from the records on disk, replay after outages.

The schema (tag keys, run names, params, metrics) is in schema.py; the operator uses runs.py,
the launcher publisher.py, ranks in pods live.py, `ringleader publish` replay.py.
"""

import os

# MLflow 3 sends usage telemetry from a thread it starts at `import mlflow`, unless told not to before
# that import. ringleader talks to the tracking store and nothing else (pods often have no egress at
# all); users who want MLflow's telemetry set MLFLOW_DISABLE_TELEMETRY=false themselves.
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from ringleader.tracking.live import LivePublisher  # noqa: E402 - after the telemetry opt-out
from ringleader.tracking.replay import Replayed, publish_dir
from ringleader.tracking.runs import (ensure_experiment, attach_report, finish_run, log_sweep_metrics, start_parent_run,
                                     start_trial_run)
from ringleader.tracking.settings import TrackingSettings, resolve_uri
from ringleader.tracking.store import Store, TrackingUnavailable

__all__ = [
    "LivePublisher", "Replayed", "publish_dir", "ensure_experiment", "attach_report", "finish_run", "log_sweep_metrics",
    "start_parent_run", "start_trial_run", "TrackingSettings", "resolve_uri", "Store", "TrackingUnavailable",
]
