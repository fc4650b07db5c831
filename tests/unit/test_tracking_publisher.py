"""Publishing records into MLflow exactly once: cursors, replays, lost answers, outages; against a real sqlite store."""

from __future__ import annotations

import os

# Before MLflow is imported: its telemetry thread starts at import time (ringleader.tracking does the same).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import json
import pathlib
import shutil
import threading
import time

import mlflow.tracking
import pytest

from ringleader.models import summary as summary_
from ringleader.api import experiment, trial
from ringleader.contract import environment as contract
from ringleader.contract import records as record_files
from ringleader.contract import layout
from ringleader.tracking import cursor, live, publisher, replay, runs, schema
from ringleader.tracking import settings as settings_
from ringleader.tracking import store as store_

from loopback import free_port

PHASES = ("time/data", "time/forward", "time/backward", "time/comm", "time/wait", "time/update")


@pytest.fixture(scope="module")
def template_db(tmp_path_factory) -> pathlib.Path:
    # Creating MLflow's schema takes seconds; every test copies one migrated database instead.
    path = tmp_path_factory.mktemp("template") / "mlflow.db"
    mlflow.tracking.MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def store(template_db, tmp_path) -> store_.Store:
    shutil.copy(template_db, tmp_path / "mlflow.db")
    return store_.Store(f"sqlite:///{tmp_path / 'mlflow.db'}", settings_.TrackingSettings(backoff_initial_seconds=0.01))


def make_trials(architectures=("ParameterServer",), iterations=20) -> list[trial.Trial]:
    document = {
        "apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment",
        "metadata": {"name": "tiny"},
        "spec": {"workers": {"replicas": 2}, "model": {"name": "mlp", "iterations": iterations,
                                                        "warmupIterations": 2, "batchSize": 8}},
    }
    if len(architectures) > 1:
        document["spec"]["sweep"] = {"matrix": {"architecture": list(architectures)}}
    else:
        document["spec"]["architecture"] = architectures[0]
    return trial.expand(experiment.parse(document)).trials


def iteration_record(step: int, rank: int = 0) -> dict:
    record = {"step": step, "role": "worker", "warmup": step < 2, "bytes/sent": 1000.0 + step,
              "bytes/received": 2000.0, "staleness": 0, "loss": 2.0 / (step + 1)}
    record.update({phase: 0.001 * (i + 1) for i, phase in enumerate(PHASES)})
    record["time/iteration"] = 0.03 + 0.0001 * step + 0.001 * rank
    return record


def append_records(rank_dir: pathlib.Path, steps: range, rank: int = 0) -> None:
    rank_dir.mkdir(parents=True, exist_ok=True)
    with open(rank_dir / layout.ITERATIONS_FILE, "a") as handle:
        for step in steps:
            handle.write(json.dumps(iteration_record(step, rank)) + "\n")


def history(store: store_.Store, run_id: str, key: str = "time/iteration_ms") -> list[tuple[int, float]]:
    """A series' points, its warm-up steps (logged under warmup/) included."""
    return sorted((m.step, m.value) for name in (key, f"warmup/{key}")
                  for m in store.client.get_metric_history(run_id, name))


def rank_publisher(store, rank_dir, experiment_id, trial_run_id, rank=0) -> publisher.RankPublisher:
    return publisher.RankPublisher(store, rank_dir, experiment_id, trial_run_id, "tiny-0", rank, "worker")


@pytest.fixture
def trial_run(store) -> tuple[str, str]:
    experiment_id = store.ensure_experiment("default/tiny")
    run_id = store.create_run_once(experiment_id, "trial-token", schema.trial_tags(make_trials()[0], None))
    return experiment_id, run_id


def test_records_are_published_once_and_new_ones_follow(store, trial_run, tmp_path):
    rank_dir = tmp_path / "tiny-0" / "rank-1"
    append_records(rank_dir, range(0, 30))
    published = rank_publisher(store, rank_dir, *trial_run)

    assert published.publish() == 30 * 10  # 11 series, staleness 0 throughout (metric_names.ZERO_UNTIL_USED)
    assert published.publish() == 0
    append_records(rank_dir, range(30, 40))
    assert published.publish() == 10 * 10

    state = cursor.Cursor.load(cursor.path_for(rank_dir, store.uri))
    points = history(store, state.run_id)
    assert [step for step, _ in points] == list(range(40))
    assert points[7][1] == pytest.approx(1000 * (0.03 + 0.0007))  # milliseconds in MLflow, seconds in the file
    charted = store.client.get_metric_history(state.run_id, "time/iteration_ms")
    assert sorted(m.step for m in charted) == list(range(2, 40))  # warm-up steps 0 and 1 are apart
    assert state.records == 40 and state.offset == (rank_dir / layout.ITERATIONS_FILE).stat().st_size


def test_points_are_timestamped_from_the_ranks_start_plus_the_iteration_times_before_them(store, trial_run, tmp_path):
    rank_dir = tmp_path / "rank-0"
    append_records(rank_dir, range(3))
    published = publisher.RankPublisher(store, rank_dir, *trial_run, "tiny-0", 0, "worker", start_time=1_700_000_000.0)
    published.publish()
    append_records(rank_dir, range(3, 4))
    published.publish()

    run_id = cursor.Cursor.load(cursor.path_for(rank_dir, store.uri)).run_id
    stamps = sorted((m.step, m.timestamp) for key in ("train/loss", "warmup/train/loss")
                    for m in store.client.get_metric_history(run_id, key))
    iteration_ms = [1000 * iteration_record(step)["time/iteration"] for step in range(3)]
    assert stamps == [(0, 1_700_000_000_000), (1, int(1_700_000_000_000 + iteration_ms[0])),
                      (2, int(1_700_000_000_000 + iteration_ms[0] + iteration_ms[1])),
                      (3, int(1_700_000_000_000 + sum(iteration_ms)))]


def test_the_rank_run_is_nested_under_the_trial_run_and_tagged(store, trial_run, tmp_path):
    rank_dir = tmp_path / "rank-1"
    append_records(rank_dir, range(3))
    rank_publisher(store, rank_dir, *trial_run, rank=1).publish(final_status="FINISHED")

    run = store.client.get_run(cursor.Cursor.load(cursor.path_for(rank_dir, store.uri)).run_id)
    assert run.data.tags[schema.TAG_PARENT_RUN_ID] == trial_run[1]
    assert run.data.tags[schema.TAG_RANK] == "1"
    assert run.data.tags[schema.TAG_KIND] == "rank"
    assert run.info.status == "FINISHED"
    assert run.data.tags[schema.TAG_RUN_NAME] == run.info.run_name == "tiny-0/rank-1 (worker)"
    # Booleans and labels are not metrics; every number of the record is, under MLflow's names.
    assert "warmup" not in run.data.metrics and "role" not in run.data.metrics
    assert {"time/comm_ms", "traffic/sent_bytes", "train/loss"} <= set(run.data.metrics)
    assert not {"time/comm", "bytes/sent", "loss"} & set(run.data.metrics)
    assert "sync/staleness" not in run.data.metrics  # 0 throughout: no flat chart (metric_names.ZERO_UNTIL_USED)
    # The ended rank's records file, whole, for `ringleader report`.
    assert artifacts(store, run.info.run_id, "records") == {"records/iterations.jsonl"}


def test_a_line_still_being_written_waits_for_its_newline(store, trial_run, tmp_path):
    rank_dir = tmp_path / "rank-0"
    append_records(rank_dir, range(2))
    line = json.dumps(iteration_record(2))
    with open(rank_dir / layout.ITERATIONS_FILE, "a") as handle:
        handle.write(line[:20])
    published = rank_publisher(store, rank_dir, *trial_run)
    published.publish()
    run_id = cursor.Cursor.load(cursor.path_for(rank_dir, store.uri)).run_id
    assert [s for s, _ in history(store, run_id)] == [0, 1]

    with open(rank_dir / layout.ITERATIONS_FILE, "a") as handle:
        handle.write(line[20:] + "\n")
    published.publish()
    assert [s for s, _ in history(store, run_id)] == [0, 1, 2]


def test_more_metrics_than_one_batch_holds_are_split_at_record_boundaries(store, trial_run, tmp_path):
    # 150 records x 10 metrics (staleness, 0 throughout, is not logged) = 1500 values: MLflow itself refuses a
    # log_batch of more than 1000.
    rank_dir = tmp_path / "rank-0"
    append_records(rank_dir, range(150))
    assert rank_publisher(store, rank_dir, *trial_run).publish() == 1500
    run_id = cursor.Cursor.load(cursor.path_for(rank_dir, store.uri)).run_id
    assert len(history(store, run_id, "train/loss")) == 150


def test_a_batch_whose_answer_was_lost_is_not_duplicated_when_replayed(store, trial_run, tmp_path):
    # The server stored a batch but the answer never came back: the cursor did not advance. The replay
    # sends the same points (same step, value and timestamp) and the store keeps one of each.
    rank_dir = tmp_path / "rank-0"
    append_records(rank_dir, range(10))
    published = rank_publisher(store, rank_dir, *trial_run)
    published.publish()
    state = cursor.Cursor.load(cursor.path_for(rank_dir, store.uri))
    state.offset, state.records, state.elapsed_ms = 0, 0, 0.0  # as saved before the batch was sent
    state.save()

    published.publish()
    assert [s for s, _ in history(store, state.run_id)] == list(range(10))


def test_a_run_created_just_before_a_crash_is_found_again_not_created_twice(store, trial_run, tmp_path):
    rank_dir = tmp_path / "rank-0"
    append_records(rank_dir, range(5))
    published = rank_publisher(store, rank_dir, *trial_run)
    published.publish()
    state = cursor.Cursor.load(cursor.path_for(rank_dir, store.uri))
    first_run = state.run_id
    state.run_id, state.offset, state.records, state.elapsed_ms = None, 0, 0, 0.0  # crashed before the cursor was saved
    state.save()

    published.publish()
    assert cursor.Cursor.load(cursor.path_for(rank_dir, store.uri)).run_id == first_run
    ranks = store.client.search_runs([trial_run[0]], filter_string="tags.`ringleader.kind` = 'rank'")
    assert len(ranks) == 1


def test_a_store_that_is_away_leaves_the_records_spooled_and_says_so(tmp_path):
    waits = []
    away = store_.Store(f"http://127.0.0.1:{free_port()}",
                        settings_.TrackingSettings(attempts=3, backoff_initial_seconds=0.5), sleep=waits.append)
    rank_dir = tmp_path / "rank-0"
    append_records(rank_dir, range(5))

    with pytest.raises(store_.TrackingUnavailable, match="did not answer"):
        rank_publisher(away, rank_dir, "1", "0" * 32).publish()
    assert waits == [0.5, 1.0]  # bounded exponential backoff between the 3 attempts
    state = cursor.Cursor.load(cursor.path_for(rank_dir, away.uri))
    assert state.run_id is None and state.offset == 0


def test_a_rejected_request_is_not_retried(store, trial_run):
    waits = []
    store.sleep = waits.append
    with pytest.raises(Exception) as raised:
        store.set_status("0" * 32, "FINISHED")  # no such run
    assert not isinstance(raised.value, store_.TrackingUnavailable)
    assert waits == []


def test_a_param_mlflow_refuses_is_skipped_with_a_warning_and_the_others_are_logged(store, trial_run, caplog):
    waits = []
    store.sleep = waits.append
    assert store.log_params(trial_run[1], {"sync.paradigm": "BSP"}) == []
    assert store.log_params(trial_run[1], {"sync.paradigm": "BSP"}) == []  # the same value again is fine (replays)

    refused = store.log_params(trial_run[1], {"sync.paradigm": "ASP", "a/../b": "1", "model.name": "mlp"})

    assert refused == ["a/../b", "sync.paradigm"] and waits == []  # refusals are not retried
    assert store.client.get_run(trial_run[1]).data.params == {"sync.paradigm": "BSP", "model.name": "mlp"}
    assert "MLflow refused param 'a/../b'" in caplog.text


def test_param_keys_mlflow_would_refuse_are_made_acceptable(store, trial_run):
    store.log_params(trial_run[1], {"scheduling.nodeSelector.disk\ntype": "ssd", "x" * 300: "long"})

    assert store.client.get_run(trial_run[1]).data.params == {"scheduling.nodeSelector.disk_type": "ssd",
                                                               "x" * 250: "long"}


def write_trial(session_dir: pathlib.Path, the_trial: trial.Trial, status: str = "FINISHED",
                ranks: dict[int, str] | None = None, reason: str | None = None, message: str | None = None):
    trial_dir = session_dir / the_trial.name
    trial_dir.mkdir(parents=True)
    (trial_dir / layout.TRIAL_FILE).write_text(the_trial.model_dump_json(by_alias=True))
    ranks = ranks or {slot.rank: "FINISHED" for slot in the_trial.slots()}
    for slot in the_trial.worker_slots():
        rank_dir = layout.rank_dir(trial_dir, slot.rank)
        append_records(rank_dir, range(20), slot.rank)
        (rank_dir / layout.TRACE_FILE).write_text(json.dumps({"traceEvents": []}))
        (rank_dir / layout.SUMMARY_FILE).write_text(json.dumps({"iterations": 20, "measuredIterations": 18,
                                                                "time/iteration": 0.03}))
    if status == "FINISHED":
        records = {slot.rank: record_files.read_iterations(layout.rank_dir(trial_dir, slot.rank)
                                                           / layout.ITERATIONS_FILE)
                   for slot in the_trial.worker_slots()}
        record_files.write_lines(trial_dir / layout.SERIES_FILE, summary_.trial_series(records, the_trial))
        (trial_dir / layout.SUMMARY_FILE).write_text(json.dumps({
            "throughput": 512.5, "iterationTimeP50Seconds": 0.031, "iterationTimeP95Seconds": 0.035,
            "computeFraction": 0.6, "commFraction": 0.3, "waitFraction": 0.1, "stragglerRank": 2,
            "sentOverBandwidth": 0.25, "perRank": {"1": {"commSeconds": 0.009}}, "note": "text is not a metric"}))
    (trial_dir / layout.LOGS_DIR).mkdir()
    (trial_dir / layout.LOGS_DIR / "rank-1.stderr").write_text("warning: something\n")
    layout.write_outcome(trial_dir, layout.Outcome(
        status=status, start_time=1_700_000_000.0, end_time=1_700_000_060.0, reason=reason, message=message,
        ranks=[layout.RankOutcome(rank, "worker" if rank else "ps", s) for rank, s in ranks.items()]))
    return trial_dir


def artifacts(store: store_.Store, run_id: str, path: str | None = None) -> set[str]:
    return {f.path for f in store.client.list_artifacts(run_id, path)}


def test_a_finished_trial_gets_params_summary_artifacts_nested_ranks_and_status(store, tmp_path):
    the_trial = make_trials()[0]
    trial_dir = write_trial(tmp_path, the_trial)
    experiment_id = store.ensure_experiment("default/tiny")

    result = publisher.publish_trial(store, trial_dir, experiment_id, parent_run_id=None)

    run = store.client.get_run(result.run_id)
    assert run.info.status == "FINISHED"
    assert run.info.start_time == 1_700_000_000_000 and run.info.end_time == 1_700_000_060_000
    assert run.data.params["architecture"] == "ParameterServer"
    assert run.data.params["sync.paradigm"] == "BSP"
    assert run.data.params["model.batchSize"] == "8"
    assert run.data.params["model.optimizer.learningRate"] == "0.01"
    assert run.data.params["trial.name"] == "tiny-0" and run.data.params["trial.index"] == "0"
    # The summary once, under slash-free keys (MLflow's last chart section); per rank on the rank runs only.
    assert run.data.metrics["throughput_samples_per_s"] == 512.5
    assert run.data.metrics["iteration_p50_ms"] == 31.0
    assert run.data.metrics["share_comm_pct"] == 30.0
    assert run.data.metrics["network_sent_over_bandwidth_pct"] == 25.0
    assert not [key for key in run.data.metrics if key.startswith("rank")]
    assert "note" not in run.data.metrics
    # The trial's series: per step, the workers together (ranks 1 and 2: 30.1 and 30.2 ms at step 1, say).
    assert history(store, result.run_id) == [(s, round(1000 * (0.03 + 0.0001 * s) + 1.5, 3)) for s in range(2, 20)]
    assert not store.client.get_metric_history(result.run_id, "warmup/time/iteration_ms")  # on the rank runs
    throughput = store.client.get_metric_history(result.run_id, "throughput/samples_per_s")
    assert throughput[0].value == round(8 / (0.03 + 0.0001 * throughput[0].step + 0.001)
                                        + 8 / (0.03 + 0.0001 * throughput[0].step + 0.002), 1)
    assert len(history(store, result.run_id, "train/loss")) == 20
    assert {"trial.json", "summary.json", "breakdown.png", "traces", "logs"} <= artifacts(store, result.run_id)
    assert artifacts(store, result.run_id, "traces") == {"traces/rank-1.trace.json", "traces/rank-2.trace.json"}

    ranks = store.client.search_runs([experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{result.run_id}'")
    assert sorted(r.data.tags[schema.TAG_RANK] for r in ranks) == ["1", "2"]
    assert all(r.info.status == "FINISHED" for r in ranks)
    assert all(r.data.metrics["mean_time_iteration_ms"] == 30.0 for r in ranks)
    assert all(r.data.metrics["count_measured_iterations"] == 18 for r in ranks)
    assert all(artifacts(store, r.info.run_id, "records") == {"records/iterations.jsonl"} for r in ranks)
    assert sorted(r.info.run_name for r in ranks) == ["tiny-0/rank-1 (worker)", "tiny-0/rank-2 (worker)"]
    assert all(len(history(store, r.info.run_id)) == 20 for r in ranks)

    # Published twice: nothing new.
    assert publisher.publish_trial(store, trial_dir, experiment_id, None).metrics == 0
    assert len(store.client.search_runs([experiment_id])) == 3


def test_a_failed_trial_records_each_ranks_status_and_the_reason(store, tmp_path):
    the_trial = make_trials()[0]
    trial_dir = write_trial(tmp_path, the_trial, status="FAILED", ranks={0: "KILLED", 1: "FAILED", 2: "KILLED"},
                            reason="RankFailed", message="rank 1 (worker-0) exited with code 3")
    experiment_id = store.ensure_experiment("default/tiny")

    result = publisher.publish_trial(store, trial_dir, experiment_id, None)

    run = store.client.get_run(result.run_id)
    assert run.info.status == "FAILED"
    assert run.data.tags[schema.TAG_STATUS_REASON] == "RankFailed"
    assert "exited with code 3" in run.data.tags[schema.TAG_STATUS_MESSAGE]
    statuses = {r.data.tags[schema.TAG_RANK]: r.info.status for r in store.client.search_runs(
        [experiment_id], filter_string="tags.`ringleader.kind` = 'rank'")}
    assert statuses == {"1": "FAILED", "2": "KILLED"}


def test_a_session_is_published_with_its_parent_run_and_report_and_replay_adds_nothing(store, tmp_path):
    trials = make_trials(("ParameterServer", "RingAllReduce"))
    session_dir = tmp_path / "tiny-session"
    session_dir.mkdir()
    session = layout.Session(session_dir, experiment.parse({
        "apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment",
        "metadata": {"name": "tiny"},
        "spec": {"sweep": {"matrix": {"architecture": ["ParameterServer", "RingAllReduce"]}}}}),
        store.uri, [t.name for t in trials])
    session.save()
    write_trial(session_dir, trials[0])
    write_trial(session_dir, trials[1], status="FAILED", message="rank 0 (worker-0) was killed by signal 9 (SIGKILL)")
    layout.write_outcome(session_dir, layout.Outcome("FAILED", 1_700_000_000.0, 1_700_000_100.0))

    first = replay.publish_dir(tmp_path)
    again = replay.publish_dir(session_dir)

    assert first.ok and again.ok
    result = first.sessions[0]
    assert again.sessions[0].parent_run_id == result.parent_run_id
    assert sum(t.metrics for t in again.sessions[0].trials) == 0
    experiment_id = store.client.get_experiment_by_name("default/tiny").experiment_id
    assert len(store.client.search_runs([experiment_id])) == 1 + 2 + 2 + 2  # parent, trials, ranks (PS: 2 workers)
    parent = store.client.get_run(result.parent_run_id)
    assert parent.info.status == "FAILED"
    assert parent.data.params["sweep.architecture"] == "ParameterServer, RingAllReduce"
    assert "architecture" not in parent.data.params
    # The trials compared on the sweep run, each named by what it varies; the failed trial wrote no summary.
    assert parent.data.metrics == {
        "throughput_samples_per_s/ParameterServer": 512.5, "iteration_p50_ms/ParameterServer": 31.0,
        "iteration_p95_ms/ParameterServer": 35.0, "share_compute_pct/ParameterServer": 60.0,
        "share_comm_pct/ParameterServer": 30.0, "share_wait_pct/ParameterServer": 10.0}
    assert store.client.get_experiment(experiment_id).tags["mlflow.experimentKind"] == "custom_model_development"
    assert "report" in artifacts(store, parent.info.run_id)
    assert {"report/report.html", "report/report.csv", "report/report.json"} <= artifacts(
        store, parent.info.run_id, "report")
    assert "tiny-0" in parent.data.tags[schema.TAG_NOTE] and "killed by signal 9" in parent.data.tags[schema.TAG_NOTE]
    children = store.client.search_runs([experiment_id], filter_string="tags.`ringleader.kind` = 'trial'")
    assert {r.data.tags[schema.TAG_PARENT_RUN_ID] for r in children} == {result.parent_run_id}
    local = pathlib.Path(parent.info.artifact_uri.removeprefix("file://"))
    table = (local / "report" / "report.csv").read_text()
    assert "tiny-0" in table and "512.5" in table and "killed by signal 9" in table
    assert (session_dir / "report" / "report.html").is_file()  # the same report beside the records


def test_publish_dir_refuses_a_directory_without_sessions(tmp_path):
    with pytest.raises(FileNotFoundError, match="no session"):
        replay.publish_dir(tmp_path)


def test_sqlite_uris_are_made_absolute_so_a_later_publish_finds_the_same_store(tmp_path):
    assert settings_.resolve_uri(environ={}, cwd=tmp_path) == f"sqlite:///{tmp_path}/mlflow.db"
    assert settings_.resolve_uri(environ={"MLFLOW_TRACKING_URI": "http://127.0.0.1:5000"}, cwd=tmp_path) \
        == "http://127.0.0.1:5000"
    assert settings_.resolve_uri(spec_uri="sqlite:///runs/x.db", environ={"MLFLOW_TRACKING_URI": "http://h"},
                                 cwd=tmp_path) == f"sqlite:///{tmp_path}/runs/x.db"
    assert settings_.resolve_uri("http://flag", spec_uri="http://spec", cwd=tmp_path) == "http://flag"


def test_a_live_publisher_sends_records_as_they_come_and_flushes_the_rest_on_stop(store, trial_run, tmp_path):
    the_trial = make_trials()[0]
    rank_dir = tmp_path / "pod" / the_trial.name / "rank-1"
    append_records(rank_dir, range(5))
    (rank_dir / layout.TRACE_FILE).write_text(json.dumps({"traceEvents": []}))
    (rank_dir.parent / layout.SUMMARY_FILE).write_text(json.dumps({"throughput": 99.5}))  # this rank wrote it
    record_files.write_lines(rank_dir.parent / layout.SERIES_FILE, [{"step": 3, "loss": 1.25, "timestamp": 1.7e9}])
    env = contract.PodEnvironment(role="worker", rank=1, world_size=3, master_addr="127.0.0.1", master_port=1,
                                  trial_file="trial.json", output_dir=str(tmp_path / "pod"), run_id=trial_run[1],
                                  tracking_uri=store.uri)
    publishing = live.LivePublisher(env, the_trial, rank_dir, settings_.TrackingSettings(live_interval_seconds=0.05))

    publishing.start()
    deadline = time.monotonic() + 20
    while cursor.Cursor.load(cursor.path_for(rank_dir, store.uri)).records < 5 and time.monotonic() < deadline:
        time.sleep(0.05)
    append_records(rank_dir, range(5, 8))
    assert publishing.stop("FAILED")

    state = cursor.Cursor.load(cursor.path_for(rank_dir, store.uri))
    assert [s for s, _ in history(store, state.run_id)] == list(range(8))
    assert store.client.get_run(state.run_id).info.status == "FAILED"
    trial_run_data = store.client.get_run(trial_run[1]).data
    assert trial_run_data.metrics["throughput_samples_per_s"] == 99.5
    assert [(m.step, m.value, m.timestamp) for m in store.client.get_metric_history(trial_run[1], "train/loss")] == [
        (3, 1.25, 1_700_000_000_000)]
    assert artifacts(store, trial_run[1], "traces") == {"traces/rank-1.trace.json"}
    assert "summary.json" in artifacts(store, trial_run[1])  # this rank wrote the trial summary
    assert artifacts(store, state.run_id, "records") == {"records/iterations.jsonl"}
    local = pathlib.Path(store.client.get_run(state.run_id).info.artifact_uri.removeprefix("file://"))
    assert (local / "records" / "iterations.jsonl").read_bytes() == (rank_dir / layout.ITERATIONS_FILE).read_bytes()


def test_stopping_while_a_live_round_is_still_publishing_waits_for_it_and_sends_each_record_once(
        store, trial_run, tmp_path, monkeypatch):
    the_trial = make_trials()[0]
    rank_dir = tmp_path / "pod" / the_trial.name / "rank-1"
    append_records(rank_dir, range(5))
    env = contract.PodEnvironment(role="worker", rank=1, world_size=3, master_addr="127.0.0.1", master_port=1,
                                  trial_file="trial.json", output_dir=str(tmp_path / "pod"), run_id=trial_run[1],
                                  tracking_uri=store.uri)
    publishing = live.LivePublisher(env, the_trial, rank_dir, settings_.TrackingSettings(live_interval_seconds=0.01))
    in_round, release = threading.Event(), threading.Event()
    real_publish = publisher.RankPublisher.publish

    def slow_first_round(self, *args, **kwargs):
        if not in_round.is_set():  # the live thread's first round stalls, as on a slow server
            in_round.set()
            release.wait(10)
        return real_publish(self, *args, **kwargs)

    monkeypatch.setattr(publisher.RankPublisher, "publish", slow_first_round)
    publishing.start()
    assert in_round.wait(10)
    assert publishing.stop("FINISHED", timeout_seconds=0.1) is False  # the round outlives the stop's timeout
    release.set()  # the round ends; a second stop waits for it, then publishes what is left, once
    assert publishing.stop("FINISHED", timeout_seconds=10)
    state = cursor.Cursor.load(cursor.path_for(rank_dir, store.uri))
    assert [s for s, _ in history(store, state.run_id)] == list(range(5))


def publisher_without_run_id(store, tmp_path, token: str, records: int) -> tuple[live.LivePublisher, pathlib.Path]:
    """A rank made while MLflow was away, with `records` recorded: it has its trial run's token and MLflow
    experiment, not the run's id."""
    the_trial = make_trials()[0]
    rank_dir = tmp_path / "pod" / the_trial.name / "rank-1"
    append_records(rank_dir, range(records))
    env = contract.PodEnvironment(role="worker", rank=1, world_size=3, master_addr="127.0.0.1", master_port=1,
                                  trial_file="trial.json", output_dir=str(tmp_path / "pod"), tracking_uri=store.uri,
                                  run_token=token, mlflow_experiment="tiny-experiment")
    publishing = live.LivePublisher(env, the_trial, rank_dir, settings_.TrackingSettings(live_interval_seconds=0.05))
    publishing.start()
    return publishing, rank_dir


def test_a_rank_made_before_its_trial_run_existed_publishes_into_it_once_the_operator_creates_it(
        store, tmp_path, caplog):
    publishing, rank_dir = publisher_without_run_id(store, tmp_path, "uid-1.tiny-0", records=5)
    # A round ran and found no run to log into (it says so): the records wait on disk.
    deadline = time.monotonic() + 20
    while "(token uid-1.tiny-0) does not exist yet" not in caplog.text and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "(token uid-1.tiny-0) does not exist yet" in caplog.text
    assert not cursor.path_for(rank_dir, store.uri).exists() or \
        cursor.Cursor.load(cursor.path_for(rank_dir, store.uri)).records == 0

    # MLflow answers again: the operator creates the experiment and the trial run with the token it gave the pods.
    experiment_id = store.ensure_experiment("tiny-experiment")
    store.create_run_once(experiment_id, "someone-else.tiny-0", {})
    trial_run_id = store.create_run_once(experiment_id, "uid-1.tiny-0", {})
    append_records(rank_dir, range(5, 8))
    assert publishing.stop("FINISHED", timeout_seconds=20)

    state = cursor.Cursor.load(cursor.path_for(rank_dir, store.uri))
    assert [s for s, _ in history(store, state.run_id)] == list(range(8))  # nothing lost, nothing twice
    rank_run = store.client.get_run(state.run_id)
    assert rank_run.data.tags["mlflow.parentRunId"] == trial_run_id
    assert rank_run.info.status == "FINISHED"


def test_a_rank_whose_trial_run_never_appears_keeps_its_records_and_says_why(store, tmp_path, caplog):
    publishing, rank_dir = publisher_without_run_id(store, tmp_path, "uid-2.tiny-0", records=3)
    started = time.monotonic()
    assert publishing.stop("FINISHED", timeout_seconds=0.5) is False
    assert time.monotonic() - started < 10
    assert "(token uid-2.tiny-0) does not exist yet" in caplog.text
    assert (rank_dir / layout.ITERATIONS_FILE).read_text().count("\n") == 3  # still on disk for a later publish


def test_a_rank_needs_its_run_or_the_token_to_find_it(store, tmp_path):
    the_trial = make_trials()[0]
    env = contract.PodEnvironment(role="worker", rank=1, world_size=3, master_addr="127.0.0.1", master_port=1,
                                  trial_file="trial.json", output_dir=str(tmp_path), tracking_uri=store.uri,
                                  run_token="uid.tiny-0")  # no MLflow experiment to look in
    with pytest.raises(ValueError, match="RINGLEADER_MLFLOW_EXPERIMENT"):
        live.LivePublisher(env, the_trial, tmp_path)


def test_a_rank_that_finished_while_its_run_was_missing_waits_for_it_and_then_publishes_everything_once(
        store, tmp_path, monkeypatch):
    publishing, rank_dir = publisher_without_run_id(store, tmp_path, "uid-3.tiny-0", records=6)
    finishing, looked, created = threading.current_thread(), threading.Event(), threading.Event()
    experiment_id_of = store_.Store.experiment_id

    def experiment_id_looked_up(self, name):
        found = experiment_id_of(self, name)
        if found is None and threading.current_thread() is finishing:
            looked.set()  # finish() (on this thread) looked for its trial's experiment and found none
        return found

    monkeypatch.setattr(store_.Store, "experiment_id", experiment_id_looked_up)

    def operator_creates_the_run_once_the_rank_looked():
        assert looked.wait(30), "finish() never looked for the trial's MLflow experiment"
        experiment_id = store.ensure_experiment("tiny-experiment")
        store.create_run_once(experiment_id, "uid-3.tiny-0", {})
        created.set()

    threading.Thread(target=operator_creates_the_run_once_the_rank_looked, daemon=True).start()
    # The run appears after finish() looked for it: finish() looks again, within its wait, until the run is there.
    assert publishing.finish("FINISHED", wait_seconds=30)
    assert created.is_set()
    state = cursor.Cursor.load(cursor.path_for(rank_dir, store.uri))
    assert [s for s, _ in history(store, state.run_id)] == list(range(6))
    assert store.client.get_run(state.run_id).info.status == "FINISHED"
    assert publishing.published() == (6, 6)


def test_a_rank_whose_records_stay_unpublished_past_its_wait_says_how_many_went_through(store, tmp_path, caplog):
    publishing, rank_dir = publisher_without_run_id(store, tmp_path, "uid-4.tiny-0", records=4)
    assert publishing.finish("FINISHED", wait_seconds=1.5) is False
    assert publishing.published() == (0, 4)
    assert "records: 0 of 4 iterations of rank 1 published; waiting for MLflow" in caplog.text
    assert (rank_dir / layout.ITERATIONS_FILE).read_text().count("\n") == 4


def test_ending_a_trial_run_ends_the_rank_runs_its_ranks_left_running(store, trial_run, tmp_path):
    experiment_id, trial_run_id = trial_run
    rank_dir = tmp_path / "rank-0"
    append_records(rank_dir, range(3))
    rank_publisher(store, rank_dir, experiment_id, trial_run_id).publish()  # no final status: left RUNNING
    rank_run = cursor.Cursor.load(cursor.path_for(rank_dir, store.uri)).run_id
    assert store.client.get_run(rank_run).info.status == "RUNNING"

    runs.finish_run(trial_run_id, "FAILED", reason="NodeLost", tracking_uri=store.uri)

    ended = store.client.get_run(rank_run)
    assert ended.info.status == "KILLED"
    assert ended.data.tags["ringleader.reason"] == "TrialEnded"
    assert len(history(store, rank_run)) == 3  # what it published stays
