"""The operator's MLflow calls: experiment, sweep run, trial runs, finishing, comparison; against a real sqlite store."""

from __future__ import annotations

import os

# Before MLflow is imported: its telemetry thread starts at import time (ringleader.tracking does the same).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import pathlib
import shutil

import mlflow.tracking
import pytest

from ringleader.analysis import tables
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
    assert parent_run.data.params["sweep.matrix.paradigm.1"] == "SSP"
    assert parent_run.data.tags[schema.TAG_KIND] == "sweep"
    second = client.get_run(children[1])
    assert second.data.tags[schema.TAG_PARENT_RUN_ID] == parent
    assert second.data.params["sync.paradigm"] == "SSP" and second.data.params["trial.parameters.paradigm"] == "SSP"
    assert second.info.run_name == "op-1 (ParameterServer, SSP, 2 workers)"


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

    runs.finish_run(run_id, "FAILED", summary, reason="BackoffLimitExceeded", message="pod op-0-worker-1 exited 137",
                    tracking_uri=uri)

    run = runs.store_for(uri).client.get_run(run_id)
    assert run.info.status == "FAILED" and run.info.end_time is not None
    assert run.data.metrics == {"throughput": 812.0, "iterationTimeP50Seconds": 0.04, "commFraction": 0.3,
                                "stragglerRank": 2.0}
    assert run.data.tags[schema.TAG_STATUS_REASON] == "BackoffLimitExceeded"
    with pytest.raises(ValueError, match="FINISHED, FAILED, KILLED"):
        runs.finish_run(run_id, "SUCCEEDED", tracking_uri=uri)


def test_the_comparison_lands_on_the_parent_run(uri, sweep, tmp_path):
    experiment_id = runs.ensure_experiment("lab/op", tracking_uri=uri)
    parent = runs.start_parent_run(experiment_id, sweep, tracking_uri=uri)
    trials = trial.expand(sweep).trials
    rows = [tables.row_for(trials[0], {"throughput": 10.0, "iterationTimeP50Seconds": 0.1}, "FINISHED"),
            tables.row_for(trials[1], None, "FAILED", "pod op-1-ps-0 was evicted")]

    runs.log_comparison(parent, rows, tracking_uri=uri)

    client = runs.store_for(uri).client
    assert {a.path for a in client.list_artifacts(parent)} == {"comparison.txt", "comparison.csv", "comparison.md"}
    text = pathlib.Path(client.download_artifacts(parent, "comparison.md", str(tmp_path))).read_text()
    assert "| op-0 | ParameterServer | BSP | 2 | 10.0 | 100.0 |" in text and "FAILED" in text
