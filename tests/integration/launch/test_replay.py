"""A tracking server that goes away and comes back: records wait on disk and are replayed, none lost, none twice.

One real `mlflow server` on 127.0.0.1, stopped and started again. While it is away, a rank's live
publisher keeps spooling and a whole `ringleader run` completes; when it is back, both are published.
"""

from __future__ import annotations

import json
import pathlib
import threading

import pytest

import launching
from ringleader.api import experiment, trial
from ringleader.contract import environment as contract
from ringleader.contract import layout
from ringleader.tracking import cursor, live, replay, runs
from ringleader.tracking import settings as settings_

pytestmark = pytest.mark.integration


def a_trial() -> trial.Trial:
    return trial.expand(experiment.parse({
        "apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment",
        "metadata": {"name": "replay"}, "spec": {"architecture": "RingAllReduce", "workers": {"replicas": 2}},
    })).trials[0]


def record(step: int) -> dict:
    return {"step": step, "role": "worker", "warmup": step < 2, "time/forward": 0.01, "time/backward": 0.02,
            "time/comm": 0.005 + step / 1000, "time/wait": 0.0, "time/iteration": 0.04 + step / 1000,
            "bytes/sent": 4096.0, "loss": 1.0 / (step + 1)}


def append(rank_dir, steps: range) -> None:
    with open(rank_dir / layout.ITERATIONS_FILE, "a") as handle:
        for step in steps:
            handle.write(json.dumps(record(step)) + "\n")


def live_rank(tmp_path, the_trial, uri: str, trial_run_id: str) -> tuple[pathlib.Path, live.LivePublisher]:
    """Rank 1 of a pod, publishing live into `trial_run_id`, with short retries: its directory and publisher."""
    rank_dir = tmp_path / "pod" / the_trial.name / "rank-1"
    rank_dir.mkdir(parents=True)
    env = contract.PodEnvironment(role="worker", rank=1, world_size=2, master_addr="127.0.0.1", master_port=29500,
                                  trial_file="trial.json", output_dir=str(tmp_path / "pod"), run_id=trial_run_id,
                                  tracking_uri=uri)
    return rank_dir, live.LivePublisher(env, the_trial, rank_dir, settings_.TrackingSettings(
        live_interval_seconds=0.2, attempts=2, backoff_initial_seconds=0.1, http_timeout_seconds=5))


def test_records_spooled_while_the_server_is_away_are_replayed_once(tracking_server, workdir, tmp_path):
    tracking_server.start()
    uri = tracking_server.uri
    the_trial = a_trial()
    experiment_id = runs.ensure_experiment("default/replay", tracking_uri=uri)
    trial_run_id = runs.start_trial_run(experiment_id, None, the_trial, tracking_uri=uri)
    rank_dir, publisher = live_rank(tmp_path, the_trial, uri, trial_run_id)
    (rank_dir / layout.TRACE_FILE).write_text(json.dumps({"traceEvents": []}))
    client = runs.store_for(uri).client

    def published() -> list[tuple[int, float]]:
        state = cursor.Cursor.load(cursor.path_for(rank_dir, uri))
        if state.run_id is None:
            return []
        return sorted((m.step, m.value) for key in ("time/iteration_ms", "warmup/time/iteration_ms")
                      for m in client.get_metric_history(state.run_id, key))

    append(rank_dir, range(0, 10))
    publisher.start()
    launching.wait_for(lambda: len(published()) == 10, 30, "10 iterations live in MLflow")

    tracking_server.stop()
    append(rank_dir, range(10, 30))
    away = launching.run(workdir, str(launching.experiment_file(workdir, "offline", {"architecture": "RingAllReduce"})),
                        "--tracking-uri", uri)
    assert away.returncode == 0, away.output  # the trials ran; only publishing waits
    assert "did not answer" in away.output and "ringleader publish" in away.output
    assert cursor.Cursor.load(cursor.path_for(rank_dir, uri)).records == 10  # the rest is spooled on disk
    [session] = list((workdir / "ringleader-runs").iterdir())

    tracking_server.start()
    launching.wait_for(lambda: len(published()) == 30, 60, "the spooled iterations replayed by the live publisher")
    first = replay.publish_dir(workdir / "ringleader-runs")
    again = replay.publish_dir(session)
    append(rank_dir, range(30, 40))
    assert publisher.stop("FINISHED")

    # The live rank: every iteration exactly once, with its value.
    assert published() == [(step, pytest.approx(1000 * record(step)["time/iteration"])) for step in range(40)]
    rank_run = client.get_run(cursor.Cursor.load(cursor.path_for(rank_dir, uri)).run_id)
    assert rank_run.info.status == "FINISHED"
    assert rank_run.data.tags["mlflow.parentRunId"] == trial_run_id
    assert [a.path for a in client.list_artifacts(trial_run_id, "traces")] == ["traces/rank-1.trace.json"]

    # The session run while the server was away: published once, the second replay adds nothing.
    assert first.ok and again.ok
    assert sum(t.metrics for t in first.sessions[0].trials) > 0
    assert sum(t.metrics for t in again.sessions[0].trials) == 0
    offline = client.get_experiment_by_name("default/offline").experiment_id
    kinds = {}
    for run in client.search_runs([offline]):
        kinds.setdefault(run.data.tags["ringleader.kind"], []).append(run)
    assert [r.info.status for r in kinds["sweep"]] == ["FINISHED"]
    assert [r.info.status for r in kinds["trial"]] == ["FINISHED"]
    assert len(kinds["rank"]) == 2
    for rank in kinds["rank"]:
        steps = [m.step for key in ("time/iteration_ms", "warmup/time/iteration_ms")
                 for m in client.get_metric_history(rank.info.run_id, key)]
        assert sorted(steps) == list(range(20))


def test_a_rank_that_finishes_while_the_server_is_away_holds_on_until_it_is_back_and_loses_nothing(
        tracking_server, tmp_path, caplog):
    """The cluster's case (docs/operator.md): the pod of a rank that finished training stays up, retrying, until
    MLflow takes its last records; only then does the rank exit and its trial succeed."""
    tracking_server.start()
    uri = tracking_server.uri
    the_trial = a_trial()
    experiment_id = runs.ensure_experiment("default/away-at-the-end", tracking_uri=uri)
    trial_run_id = runs.start_trial_run(experiment_id, None, the_trial, tracking_uri=uri)
    rank_dir, publisher = live_rank(tmp_path, the_trial, uri, trial_run_id)
    append(rank_dir, range(0, 5))
    publisher.start()
    launching.wait_for(lambda: cursor.Cursor.load(cursor.path_for(rank_dir, uri)).records == 5, 90, "5 live records")

    tracking_server.stop()
    append(rank_dir, range(5, 25))  # the rest of training, while the server is away
    finished: list[bool] = []
    ending = threading.Thread(target=lambda: finished.append(publisher.finish("FINISHED", wait_seconds=240)))
    ending.start()
    # Each round that MLflow does not take the records ends with the waiting line: two rounds tried and failed.
    launching.wait_for(lambda: caplog.text.count("records: 5 of 25 iterations of rank 1 published; waiting") >= 2,
                       90, "2 waiting lines of the rank")
    assert ending.is_alive() and publisher.published() == (5, 25)  # the rank holds on, its records on disk
    tracking_server.start()
    ending.join(240)

    assert finished == [True]
    client = runs.store_for(uri).client
    rank_run = client.get_run(cursor.Cursor.load(cursor.path_for(rank_dir, uri)).run_id)
    steps = sorted(m.step for key in ("time/iteration_ms", "warmup/time/iteration_ms")
                   for m in client.get_metric_history(rank_run.info.run_id, key))
    assert steps == list(range(25))  # every iteration, once
    assert rank_run.info.status == "FINISHED"
