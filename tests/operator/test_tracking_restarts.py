"""Apiserver tier (no kubelet: the test writes pod status): what decides the MLflow runs' outcome lives in status
and MLflow, not the operator's memory.

A trial whose run was made after its pods started (MLflow was away) gets its summary from the operator, also
when the operator was restarted between the trial's end and the run's, and its ranks, which got the run's token,
log their records into it once it exists; runs of an experiment deleted while the operator was down are ended
KILLED when it comes back.
"""

import json
import os

# Before MLflow is imported: its telemetry thread starts at import time (ringleader.tracking does the same).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import experiments as dtes
from apiserver_client import wait_for

from ringleader.api import trial as trial_
from ringleader.contract import environment as contract
from ringleader.contract import layout
from ringleader.tracking import live
from ringleader.tracking import settings as tracking_settings


def _client(uri):
    import mlflow

    return mlflow.MlflowClient(tracking_uri=uri)


def test_a_restart_between_a_trial_end_and_its_run_end_still_logs_the_summary(admin, namespace, operator, tmp_path):
    database = tmp_path / "later" / "mlflow.db"  # no directory yet: MLflow is away until it exists
    uri = f"sqlite:///{database}"
    running = operator(extra_args=("--tracking-uri", uri, "--tracking-retry", "2", "--tracking-timeout", "60"))
    admin.create(dtes.experiment("late", namespace))
    pods = wait_for("3 pods", lambda: (lambda found: len(found) == 3 and found)(admin.trial_pods(namespace, "late")),
                    timeout=120)
    assert all(contract.RUN_ID not in dtes.env_of(p) for p in pods)  # no run to give the ranks yet: its token instead
    for pod in pods:
        admin.run_pod(pod)

    database.parent.mkdir()
    trial = wait_for("the trial's run, made late", lambda: (lambda t: t.get("runId") and t)(
        dtes.trials(admin.experiment(namespace, "late"))[0]), timeout=120)
    assert trial["runSummarySource"] == "Operator" and not trial.get("runEnded")
    assert _a_rank_publishes_into(trial["runId"], sorted(pods, key=dtes.rank)[1], admin, namespace, tmp_path)

    running.kill()  # abruptly: nothing the operator remembered survives
    for pod in sorted(pods, key=dtes.rank)[1:]:
        admin.finish_pod(pod, 0, "Completed", dtes.summary_message())
    running.start()

    wait_for("phase Succeeded", lambda: dtes.phase(admin.experiment(namespace, "late")) == "Succeeded", timeout=120)
    wait_for("the trial run FINISHED", lambda: _client(uri).get_run(trial["runId"]).info.status == "FINISHED",
             timeout=120)
    metrics = _client(uri).get_run(trial["runId"]).data.metrics
    assert metrics["throughput_samples_per_s"] == dtes.SUMMARY["throughput"]
    done = wait_for("runEnded in status", lambda: (lambda dte: dtes.trials(dte)[0].get("runEnded") and
                                                   dte["status"]["mlflow"].get("runEnded") and dte)(
        admin.experiment(namespace, "late")), timeout=60)
    assert _client(uri).get_run(done["status"]["mlflow"]["runId"]).info.status == "FINISHED"


def _a_rank_publishes_into(run_id, pod, admin, namespace, tmp_path) -> bool:
    """A rank started from `pod`'s environment finds the run made after it by its token, and publishes into it."""
    env = contract.PodEnvironment.from_environ({**dtes.env_of(pod), contract.OUTPUT_DIR: str(tmp_path / "pod")})
    config_map = next(o for o in admin.list("ConfigMap", namespace) if o["metadata"]["name"].startswith("late-"))
    trial = trial_.Trial.model_validate_json(config_map["data"][contract.TRIAL_FILE_NAME])
    rank_dir = tmp_path / "pod" / trial.name / f"rank-{env.rank}"
    rank_dir.mkdir(parents=True)
    (rank_dir / layout.ITERATIONS_FILE).write_text("".join(json.dumps(
        {"step": step, "role": "worker", "warmup": False, "time/iteration": 0.05, "time/comm": 0.01}) + "\n"
        for step in range(3)))
    publishing = live.LivePublisher(env, trial, rank_dir, tracking_settings.TrackingSettings(live_interval_seconds=0.1))
    publishing.start()
    assert publishing.stop("FINISHED", timeout_seconds=60)
    rank_runs = _client(env.tracking_uri).search_runs([_client(env.tracking_uri).get_run(run_id).info.experiment_id],
                                                      filter_string=f"tags.mlflow.parentRunId = '{run_id}'")
    return [m.step for m in _client(env.tracking_uri).get_metric_history(rank_runs[0].info.run_id,
                                                                         "time/iteration_ms")] == [0, 1, 2]


def test_runs_of_an_experiment_deleted_while_the_operator_was_down_are_ended_when_it_comes_back(
        admin, namespace, operator, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    running = operator(extra_args=("--tracking-uri", uri, "--tracking-timeout", "60"))
    admin.create(dtes.experiment("gone", namespace))
    admin.create(dtes.experiment("kept", namespace))
    wait_for("6 pods",
             lambda: len(admin.trial_pods(namespace, "gone")) == 3 and len(admin.trial_pods(namespace, "kept")) == 3,
             timeout=120)
    gone, kept = admin.experiment(namespace, "gone"), admin.experiment(namespace, "kept")
    gone_runs = [dtes.trials(gone)[0]["runId"], gone["status"]["mlflow"]["runId"]]
    kept_runs = [dtes.trials(kept)[0]["runId"], kept["status"]["mlflow"]["runId"]]

    running.stop()
    admin.delete("DistributedTrainingExperiment", namespace, "gone")  # nobody watches: its runs stay RUNNING
    wait_for("the experiment to be gone", lambda: admin.experiment(namespace, "gone") is None)
    assert {_client(uri).get_run(r).info.status for r in gone_runs} == {"RUNNING"}
    running.start()

    wait_for("the deleted experiment's runs KILLED", lambda: {
        _client(uri).get_run(r).info.status for r in gone_runs} == {"KILLED"}, timeout=120)
    assert _client(uri).get_run(gone_runs[1]).data.tags["ringleader.reason"] == "ExperimentDeleted"
    assert {_client(uri).get_run(r).info.status for r in kept_runs} == {"RUNNING"}
