"""A pod being stopped (its experiment deleted, preempted, its node drained) loses nothing it recorded.

Real rank processes of a 2-worker ring trial publish live into a real MLflow store (SQLite), as pods do.
Both get SIGTERM mid-training, as the kubelet sends it to every pod of a deleted experiment; each rank
publishes its records so far, ends its rank run KILLED and exits with 143 well inside the grace period.
"""

import os

# Before MLflow is imported: its telemetry thread starts at import time (ringleader.tracking does the same).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import signal
import time

import mlflow.tracking

from ringleader.contract import environment as contract
from ringleader.contract import records
from ringleader.tracking import schema
from ringleader.tracking import settings as tracking_settings
from ringleader.tracking import store as store_


def test_stopped_ranks_publish_what_they_recorded_and_end_their_runs_killed(make_trial, start_trial, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    trial = make_trial({"architecture": "RingAllReduce", "model": {"iterations": 100000, "warmupIterations": 1}})
    store = store_.Store(uri, tracking_settings.TrackingSettings())
    experiment_id = store.ensure_experiment("default/stopped")
    trial_run = store.create_run_once(experiment_id, "uid.stopped-0", schema.trial_tags(trial, None))
    running = start_trial(trial, extra_env={contract.TRACKING_URI: uri, contract.RUN_ID: trial_run})
    running.wait_until(lambda: all(running.iterations_written(r) >= 20 for r in (0, 1)), timeout=120,
                       what="20 iterations on each rank")

    written_before = {rank: running.iterations_written(rank) for rank in (0, 1)}
    stopped_at = time.monotonic()
    for rank in (0, 1):
        os.kill(running.processes[rank].pid, signal.SIGTERM)  # the rank alone, as the kubelet signals a container
    for rank in (0, 1):
        assert running.processes[rank].wait(timeout=60) == 128 + signal.SIGTERM
    assert time.monotonic() - stopped_at < 30  # inside Kubernetes' default grace period

    client = mlflow.tracking.MlflowClient(uri)
    rank_runs = client.search_runs([experiment_id], f"tags.`{schema.TAG_PARENT_RUN_ID}` = '{trial_run}'")
    assert len(rank_runs) == 2 and {r.info.status for r in rank_runs} == {"KILLED"}
    for run in rank_runs:
        rank = int(run.data.tags[schema.TAG_RANK])
        published = sorted(m.step for name in ("time/iteration_ms", "warmup/time/iteration_ms")
                           for m in client.get_metric_history(run.info.run_id, name))
        on_disk = records.read_iterations(running.output_dir / trial.name / f"rank-{rank}" / records.ITERATIONS_FILE)
        assert len(published) >= written_before[rank]  # everything recorded before the signal is in MLflow
        assert published == [r["step"] for r in on_disk][:len(published)]  # in order, once each
