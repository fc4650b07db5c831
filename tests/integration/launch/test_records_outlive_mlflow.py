"""A pod's ranks whose tracking server is away when they finish: nothing they recorded is lost, nothing sent twice.

Real rank processes of a 2-worker ring trial, with the environment pods get when MLflow was away as they were
made (the trial run's token, not its id), against a real `mlflow server` on 127.0.0.1 that is not running.
- Back within `tracking.recordsWaitSeconds`: the ranks hold on, saying so, and once the server is back and the
  trial run made (as the operator makes it), publish every iteration once, end their runs FINISHED and exit 0.
- Never back within it: each rank prints its records into its log and fails RecordsIncomplete; later,
  `ringleader publish --from-log` sends them from that log, once, however often it is run.
"""

from __future__ import annotations

import os

# Before MLflow is imported: its telemetry thread starts at import time (ringleader.tracking does the same).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import subprocess
import sys

import pytest

import launching
from ringleader.contract import environment as contract
from ringleader.contract import unpublished
from ringleader.tracking import runs, schema

pytestmark = pytest.mark.integration
ITERATIONS = 20
TOKEN = "uid-1.away-0"  # what the operator gives pods made before their trial run exists (recording.trial_token)
MLFLOW_EXPERIMENT = "default/away"
ITERATION_METRICS = ("time/iteration_ms", "warmup/time/iteration_ms")


def away_trial(make_trial, wait_seconds: int):
    return make_trial({"model": {"iterations": ITERATIONS}, "tracking": {"recordsWaitSeconds": wait_seconds}},
                      name="away-0")


def start_without_mlflow(start_trial, trial, uri: str):
    return start_trial(trial, extra_env={contract.TRACKING_URI: uri, contract.RUN_TOKEN: TOKEN,
                                         contract.MLFLOW_EXPERIMENT: MLFLOW_EXPERIMENT}, peer_timeout=60)


def make_trial_run(trial, uri: str) -> tuple[str, str]:
    """What the operator does once MLflow answers: the experiment and the trial's run, with the pods' token."""
    experiment_id = runs.ensure_experiment(MLFLOW_EXPERIMENT, tracking_uri=uri)
    return experiment_id, runs.start_trial_run(experiment_id, None, trial, token=TOKEN, tracking_uri=uri)


def published_steps(uri: str, experiment_id: str, trial_run_id: str) -> dict[int, tuple[str, list[int]]]:
    """Each rank run under the trial run: its status and the steps of its iterations, as MLflow holds them."""
    client = runs.store_for(uri).client
    found = {}
    for run in client.search_runs([experiment_id], f"tags.`{schema.TAG_PARENT_RUN_ID}` = '{trial_run_id}'"):
        steps = sorted(m.step for key in ITERATION_METRICS for m in client.get_metric_history(run.info.run_id, key))
        found[int(run.data.tags[schema.TAG_RANK])] = (run.info.status, steps)
    return found


def assert_everything_once(uri: str, experiment_id: str, trial_run_id: str) -> None:
    assert published_steps(uri, experiment_id, trial_run_id) == {
        rank: ("FINISHED", list(range(ITERATIONS))) for rank in (0, 1)}
    client = runs.store_for(uri).client
    [throughput] = client.get_metric_history(trial_run_id, "throughput_samples_per_s")  # the trial summary, once
    assert throughput.value > 0
    assert "summary.json" in {a.path for a in client.list_artifacts(trial_run_id)}


def test_ranks_that_finish_while_mlflow_is_away_hold_on_and_publish_everything_once_it_is_back(
        make_trial, start_trial, tracking_server):
    trial = away_trial(make_trial, wait_seconds=600)
    running = start_without_mlflow(start_trial, trial, tracking_server.uri)
    running.wait_until(lambda: all("waiting for MLflow at" in (running.logs_dir / f"rank-{r}.err").read_text()
                                   for r in (0, 1)), timeout=240, what="both ranks waiting for MLflow")
    waiting = unpublished.last_waiting((running.logs_dir / "rank-1.err").read_text())
    assert (waiting.rank, waiting.published, waiting.recorded, waiting.wait_seconds) == (1, 0, ITERATIONS, 600)
    assert all(p.poll() is None for p in running.processes.values())  # holding their "pods"

    tracking_server.start()
    experiment_id, trial_run_id = make_trial_run(trial, tracking_server.uri)
    result = running.wait(300)
    assert result.ok, result.explain()
    assert_everything_once(tracking_server.uri, experiment_id, trial_run_id)


def publish_from_log(log_path, work_dir, uri: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ringleader.cli", "publish", "--from-log", str(log_path),
                           "--work-dir", str(work_dir), "--tracking-uri", uri], env=launching.launcher_environ(),
                          capture_output=True, text=True, timeout=300)


def test_ranks_that_mlflow_never_answered_hand_their_records_over_and_publish_from_log_sends_them_once(
        make_trial, start_trial, tracking_server, tmp_path):
    trial = away_trial(make_trial, wait_seconds=3)
    result = start_without_mlflow(start_trial, trial, tracking_server.uri).wait(300)
    assert result.returncodes == {0: 1, 1: 1}, result.explain()
    for rank in (0, 1):
        assert (f"failed (permanent): records incomplete: 0 of {ITERATIONS} iterations of rank {rank} published: "
                f"MLflow at {tracking_server.uri} did not take the rest within 3 s") in result.stderr(rank)
        assert f"{unpublished.MARK} end " in result.stdout(rank)

    tracking_server.start()
    experiment_id, trial_run_id = make_trial_run(trial, tracking_server.uri)
    for rank in (0, 1):
        published = publish_from_log(result.logs_dir / f"rank-{rank}.out", tmp_path / "handover", tracking_server.uri)
        assert published.returncode == 0, published.stderr
        assert f"trial away-0 rank {rank}: published into rank run " in published.stdout
    assert_everything_once(tracking_server.uri, experiment_id, trial_run_id)

    again = publish_from_log(result.logs_dir / "rank-0.out", tmp_path / "handover", tracking_server.uri)
    assert again.returncode == 0, again.stderr
    assert_everything_once(tracking_server.uri, experiment_id, trial_run_id)  # nothing twice
    rank_runs = runs.store_for(tracking_server.uri).client.search_runs(
        [experiment_id], f"tags.`{schema.TAG_PARENT_RUN_ID}` = '{trial_run_id}'")
    assert {r.data.tags[schema.TAG_STATUS_REASON] for r in rank_runs} == {"RecordsPublished"}
