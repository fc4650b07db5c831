"""The operator's MLflow calls: experiment, sweep run, trial runs, finishing, comparison; against a real sqlite
store."""

from __future__ import annotations

import os

# Before MLflow is imported: its telemetry thread starts at import time (ringleader.tracking does the same).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import pathlib
import shutil

import mlflow.tracking
import pytest

from ringleader.api import experiment, status, trial
from ringleader.tracking import runs, schema


@pytest.fixture(scope="module")
def template_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("template") / "mlflow.db"
    mlflow.tracking.MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def uri(template_db, tmp_path) -> str:
    shutil.copy(template_db, tmp_path / "mlflow.db")
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.fixture(scope="module")
def sweep() -> experiment.DistributedTrainingExperiment:
    return experiment.parse({
        "apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment",
        "metadata": {"name": "op", "namespace": "lab"},
        "spec": {"sync": {"staleness": 2}, "sweep": {"matrix": {"paradigm": ["BSP", "SSP"]}}},
    })


def test_the_operators_runs_nest_sweep_trial_and_carry_the_spec(uri, sweep):
    experiment_id = runs.ensure_experiment(sweep.mlflow_experiment_name(), tracking_uri=uri)
    assert runs.ensure_experiment("lab/op", tracking_uri=uri) == experiment_id

    parent = runs.start_parent_run(experiment_id, sweep, token="uid-1.gen-1", tracking_uri=uri)
    trials = trial.expand(sweep).trials
    children = [runs.start_trial_run(experiment_id, parent, t, token=f"uid-1.gen-1.{t.name}", tracking_uri=uri)
                for t in trials]

    client = runs.store_for(uri).client
    parent_run = client.get_run(parent)
    assert parent_run.info.status == "RUNNING"
    assert parent_run.data.params["sweep.paradigm"] == "BSP, SSP"
    assert "sync.paradigm" not in parent_run.data.params  # replaced by the axis, never a misleading base value
    assert parent_run.data.params["sync.staleness"] == "2"  # the SSP trial uses it
    assert parent_run.data.tags[schema.TAG_KIND] == "sweep"
    second = client.get_run(children[1])
    assert second.data.tags[schema.TAG_PARENT_RUN_ID] == parent
    assert second.data.params["sync.paradigm"] == "SSP" and second.data.params["trial.parameters.paradigm"] == "SSP"
    assert second.info.run_name == "op-1 (ParameterServer, SSP, 2 workers)"
    assert "sync.staleness" not in client.get_run(children[0]).data.params  # BSP reads no staleness
    assert client.get_experiment(experiment_id).tags[schema.TAG_EXPERIMENT_KIND] == schema.EXPERIMENT_KIND_TRAINING


def test_a_repeated_start_with_the_same_token_returns_the_same_run(uri, sweep):
    # An operator that crashed after creating the run, before recording its id, must not create a second one.
    experiment_id = runs.ensure_experiment("lab/op", tracking_uri=uri)
    the_trial = trial.expand(sweep).trials[0]
    first = runs.start_trial_run(experiment_id, None, the_trial, token="uid-1.gen-1.op-0.0", tracking_uri=uri)
    again = runs.start_trial_run(experiment_id, None, the_trial, token="uid-1.gen-1.op-0.0", tracking_uri=uri)
    other = runs.start_trial_run(experiment_id, None, the_trial, token="uid-1.gen-1.op-0.1", tracking_uri=uri)
    assert first == again != other
    with pytest.raises(ValueError, match="token"):
        runs.start_trial_run(experiment_id, None, the_trial, token="it's", tracking_uri=uri)


def test_finishing_a_trial_run_logs_the_summary_and_why_it_ended(uri, sweep):
    experiment_id = runs.ensure_experiment("lab/op", tracking_uri=uri)
    run_id = runs.start_trial_run(experiment_id, None, trial.expand(sweep).trials[0], tracking_uri=uri)
    summary = status.Summary(throughput=812.0, iteration_time_p50_seconds=0.04, comm_fraction=0.3, straggler_rank=2)

    runs.finish_run(run_id, "FAILED", summary.wire(), reason="BackoffLimitExceeded",
                    message="pod op-0-worker-1 exited 137", tracking_uri=uri)

    run = runs.store_for(uri).client.get_run(run_id)
    assert run.info.status == "FAILED" and run.info.end_time is not None
    assert run.data.metrics == {"throughput_samples_per_s": 812.0, "iteration_p50_ms": 40.0, "share_comm_pct": 30.0,
                                "straggler_rank": 2.0}
    assert run.data.tags[schema.TAG_STATUS_REASON] == "BackoffLimitExceeded"
    with pytest.raises(ValueError, match="FINISHED, FAILED, KILLED"):
        runs.finish_run(run_id, "SUCCEEDED", tracking_uri=uri)


def test_an_experiment_gets_the_training_kind_once_and_a_kind_chosen_since_is_kept(uri):
    client = runs.store_for(uri).client
    older = client.create_experiment("lab/older")  # made by a ringleader without the tag
    assert runs.ensure_experiment("lab/older", tracking_uri=uri) == older
    assert client.get_experiment(older).tags[schema.TAG_EXPERIMENT_KIND] == "custom_model_development"
    client.set_experiment_tag(older, schema.TAG_EXPERIMENT_KIND, "genai_development")  # the user's choice
    runs.ensure_experiment("lab/older", tracking_uri=uri)
    assert client.get_experiment(older).tags[schema.TAG_EXPERIMENT_KIND] == "genai_development"


def test_the_sweep_run_compares_the_trials_from_their_status_summaries(uri, sweep):
    experiment_id = runs.ensure_experiment("lab/op", tracking_uri=uri)
    parent = runs.start_parent_run(experiment_id, sweep, tracking_uri=uri)
    summaries = {"op-0": status.Summary(throughput=812.0, iteration_time_p50_seconds=0.0206).wire(), "op-1": None}

    assert runs.log_sweep_metrics(parent, summaries, trials=trial.expand(sweep).trials, tracking_uri=uri) == 2

    # Each trial under what it varies among the sweep's trials (the operator passes its expansion).
    label = schema.sweep_labels(trial.expand(sweep).trials)["op-0"]
    assert label != "op-0" and "op-0" in summaries
    assert runs.store_for(uri).client.get_run(parent).data.metrics == {
        f"throughput_samples_per_s/{label}": 812.0, f"iteration_p50_ms/{label}": 20.6}


def test_the_report_is_made_from_the_runs_and_the_operators_summaries_and_attached(uri, sweep, tmp_path):
    experiment_id = runs.ensure_experiment("lab/op", tracking_uri=uri)
    parent = runs.start_parent_run(experiment_id, sweep, tracking_uri=uri)
    first, second = trial.expand(sweep).trials
    ended = [runs.start_trial_run(experiment_id, parent, t, tracking_uri=uri) for t in (first, second)]
    runs.finish_run(ended[0], "FINISHED", tracking_uri=uri)
    runs.finish_run(ended[1], "FAILED", reason="BackoffLimitExceeded", message="pod op-1-worker-0 was evicted",
                    tracking_uri=uri)
    # No rank logged a summary.json; the operator knows the first trial's from its pod's termination message.
    summaries = {first.name: {"throughput": 640.0, "iterationTimeP50Seconds": 0.025, "computeFraction": 0.5,
                              "commFraction": 0.4, "waitFraction": 0.1, "computeSeconds": 0.0125,
                              "commSeconds": 0.01, "waitSeconds": 0.0025}}

    runs.attach_report(parent, summaries=summaries, tracking_uri=uri)

    client = runs.store_for(uri).client
    assert {"report/report.html", "report/report.csv", "report/report.json"} <= {
        a.path for a in client.list_artifacts(parent, "report")}
    page = pathlib.Path(client.download_artifacts(parent, "report/report.html", str(tmp_path))).read_text()
    assert first.name in page and second.name in page and "data:image/png;base64," in page
    note = client.get_run(parent).data.tags[schema.TAG_NOTE]
    assert "640" in note and "pod op-1-worker-0 was evicted" in note


@pytest.mark.parametrize("name, directory", [
    ("..", "experiment"), (".", "experiment"), ("../../up", "up"), ("/etc/x", "etc_x"), (".hidden", "hidden"),
    ("team/\U0001f680 run", "team_run")])
def test_an_experiments_artifacts_stay_in_a_directory_of_their_own_below_the_stores(uri, name, directory):
    from ringleader.contract import layout
    from ringleader.tracking import store

    assert layout.directory_name(name) == directory
    experiment_id = store.Store(uri).ensure_experiment(name)
    location = mlflow.tracking.MlflowClient(uri).get_experiment(experiment_id).artifact_location
    root = pathlib.Path(uri[len("sqlite:///"):]).parent / "mlruns"
    assert pathlib.Path(location.removeprefix("file://")) == root / directory


def test_a_fault_of_the_calling_code_is_raised_at_once_not_reported_as_mlflow_away(tmp_path):
    from ringleader.tracking import store as store_

    naps = []
    store = store_.Store(f"sqlite:///{tmp_path}/x.db", sleep=naps.append)
    with pytest.raises(TypeError):
        store.call("get run", lambda client: client.get_run("a", "b", "c"))  # one argument too many: retries can't fix
    assert naps == []
    assert not store_.is_transient(AttributeError("x")) and not store_.is_transient(KeyError("x"))
    assert store_.is_transient(ConnectionError("refused")) and store_.is_transient(TimeoutError())


def test_configured_settings_reach_every_store_made_after(uri):
    from ringleader.tracking import settings as settings_

    try:
        runs.configure(settings_.TrackingSettings(attempts=1, http_timeout_seconds=9))
        assert (runs.store_for(uri).settings.attempts, runs.store_for(uri).settings.http_timeout_seconds) == (1, 9)
    finally:
        runs.configure(settings_.TrackingSettings())
    assert runs.store_for(uri).settings.attempts == settings_.TrackingSettings().attempts


def test_an_operators_sweep_run_carries_its_provenance_and_gains_the_pods_part_with_the_report(uri, sweep, tmp_path):
    import json

    from ringleader.contract import keys, layout, provenance

    experiment_id = runs.ensure_experiment("lab/op", tracking_uri=uri)
    taken = provenance.at_operator("lab", "op", 2, {"sync": {"staleness": 2}}, "ringleader:test")
    parent = runs.start_parent_run(experiment_id, sweep, source="operator", provenance=taken, tracking_uri=uri)
    client = runs.store_for(uri).client
    assert schema.provenance_of(client.get_run(parent).data.tags) == {key: str(value) for key, value in taken.items()}

    first, second = trial.expand(sweep).trials
    ended = [runs.start_trial_run(experiment_id, parent, t, tracking_uri=uri) for t in (first, second)]
    # The lowest worker rank of the first trial logged its summary.json, every rank's usage in it (live.py).
    used = {"0": {keys.NODE: "node-a", keys.CPUS: 1.5, keys.LOAD_PER_CPU: 0.25, keys.TORCH: "2.9.1",
                  keys.PYTHON: "3.11.7", keys.RINGLEADER: "0.1.0"},
            "1": {keys.NODE: "node-b", keys.CPUS: 1.5, keys.LOAD_PER_CPU: 0.75, keys.TORCH: "2.9.1",
                  keys.PYTHON: "3.11.7", keys.RINGLEADER: "0.1.0"}}
    (tmp_path / layout.SUMMARY_FILE).write_text(json.dumps({keys.THROUGHPUT: 640.0, keys.USAGE: used}))
    client.log_artifact(ended[0], str(tmp_path / layout.SUMMARY_FILE))
    for run_id in ended:
        runs.finish_run(run_id, "FINISHED", tracking_uri=uri)

    runs.attach_report(parent, pods=True, tracking_uri=uri)

    tags = client.get_run(parent).data.tags
    assert schema.provenance_of(tags) == {**{key: str(value) for key, value in taken.items()},
                                          "nodes": "node-a, node-b", "cpuQuota": "1.5",
                                          "loadPerCpuAtEnd": "0.25-0.75", "ringleader": "0.1.0", "torch": "2.9.1",
                                          "python": "3.11.7"}
    page = pathlib.Path(client.download_artifacts(parent, "report/report.html", str(tmp_path))).read_text()
    assert ("Taken on 2 nodes (node-a, node-b): pods with CPU quota 1.5, load per CPU 0.25-0.75 at the ranks&#x27; "
            "end; ringleader 0.1.0, torch 2.9.1, Python 3.11.7 in image ringleader:test; operator ringleader ") in page
    assert "`DistributedTrainingExperiment lab/op, generation 2`, spec sha256 " in page
