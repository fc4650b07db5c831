"""MLflow tracking: runs per experiment, trial and rank, metrics from the records on disk, replay after outages.

The schema (DESIGN.md "Timing and MLflow schema") is in schema.py; the operator uses runs.py,
the launcher publisher.py, ranks in pods live.py, `ringleader publish` replay.py.
"""

from ringleader.tracking.live import LivePublisher
from ringleader.tracking.replay import Replayed, publish_dir
from ringleader.tracking.runs import ensure_experiment, finish_run, log_comparison, start_parent_run, start_trial_run
from ringleader.tracking.settings import TrackingSettings, resolve_uri
from ringleader.tracking.store import Store, TrackingUnavailable

__all__ = [
    "LivePublisher", "Replayed", "publish_dir", "ensure_experiment", "finish_run", "log_comparison",
    "start_parent_run", "start_trial_run", "TrackingSettings", "resolve_uri", "Store", "TrackingUnavailable",
]
