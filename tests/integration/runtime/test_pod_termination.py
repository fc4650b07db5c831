"""A pod being stopped (its experiment deleted, preempted, its node drained) loses nothing it recorded.

Real rank processes of a 2-worker ring trial publish live into a real MLflow store (SQLite), as pods do.
Both get SIGTERM mid-training, as the kubelet sends it to every pod of a deleted experiment; each rank
publishes its records so far, ends its rank run KILLED and exits with 143 well inside the grace period.
In a container the rank is PID 1, which the kernel treats apart: that case runs in a PID namespace of its own.
"""

import os

# Before MLflow is imported: its telemetry thread starts at import time (ringleader.tracking does the same).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import pathlib
import signal
import subprocess
import sys
import time

import mlflow.tracking
import pytest

from ringleader.contract import environment as contract
from ringleader.contract import records
from ringleader.tracking import schema
from ringleader.tracking import settings as tracking_settings
from ringleader.tracking import store as store_

SOURCE = pathlib.Path(__file__).resolve().parents[3] / "operator"

pytestmark = pytest.mark.timing  # each rank must exit inside its grace period


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


PID_ONE = """
import sys, time
import torch  # starts threads of its own, which do not block SIGTERM
from ringleader.runtime import termination
termination.on_termination(lambda: print("published", flush=True))
print("ready", flush=True)
time.sleep(60)
"""


def test_sigterm_reaches_a_rank_that_is_pid_1_as_in_a_container(tmp_path):
    # The kernel discards signals that PID 1 leaves at their default action, so a pod's rank must handle SIGTERM.
    process = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", sys.executable, "-c", PID_ONE],
                               stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(SOURCE)})
    try:
        assert process.stdout.readline().strip() == "ready"
        rank = next(int(pid) for pid in subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True,
                                                       text=True, check=True).stdout.split())
        ids = next(line for line in pathlib.Path(f"/proc/{rank}/status").read_text().splitlines()
                   if line.startswith("NSpid:")).split()[1:]
        assert ids == [str(rank), "1"]  # PID 1 in its own namespace, as a container's first process
        os.kill(rank, signal.SIGTERM)
        assert process.stdout.readline().strip() == "published"
        assert process.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        process.kill()
