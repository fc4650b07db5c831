"""Apiserver tier (no kubelet: the test writes pod status): what decides the MLflow runs' outcome lives in status
and MLflow, not the operator's memory.

A trial whose run was made after its pods started (MLflow was away) gets its summary from the operator, also
when the operator was restarted between the trial's end and the run's; runs of an experiment deleted while
the operator was down are ended KILLED when it comes back.
"""

import experiments as dtes
from apiserver_client import wait_for


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
    assert all("RINGLEADER_MLFLOW_RUN_ID" not in dtes.env_of(p) for p in pods)  # no rank can log into the run
    for pod in pods:
        admin.run_pod(pod)

    database.parent.mkdir()
    trial = wait_for("the trial's run, made late", lambda: (lambda t: t.get("runId") and t)(
        dtes.trials(admin.experiment(namespace, "late"))[0]), timeout=120)
    assert trial["runSummarySource"] == "Operator" and not trial.get("runEnded")

    running.kill()  # abruptly: nothing the operator remembered survives
    for pod in sorted(pods, key=dtes.rank)[1:]:
        admin.finish_pod(pod, 0, "Completed", dtes.summary_message())
    running.start()

    wait_for("phase Succeeded", lambda: dtes.phase(admin.experiment(namespace, "late")) == "Succeeded", timeout=120)
    wait_for("the trial run FINISHED", lambda: _client(uri).get_run(trial["runId"]).info.status == "FINISHED",
             timeout=120)
    metrics = _client(uri).get_run(trial["runId"]).data.metrics
    assert metrics["throughput/samples_per_s"] == dtes.SUMMARY["throughput"]
    done = wait_for("runEnded in status", lambda: (lambda dte: dtes.trials(dte)[0].get("runEnded") and
                                                   dte["status"]["mlflow"].get("runEnded") and dte)(
        admin.experiment(namespace, "late")), timeout=60)
    assert _client(uri).get_run(done["status"]["mlflow"]["runId"]).info.status == "FINISHED"


def test_runs_of_an_experiment_deleted_while_the_operator_was_down_are_ended_when_it_comes_back(
        admin, namespace, operator, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    running = operator(extra_args=("--tracking-uri", uri, "--tracking-timeout", "60"))
    admin.create(dtes.experiment("gone", namespace))
    admin.create(dtes.experiment("kept", namespace))
    wait_for("6 pods", lambda: len(admin.trial_pods(namespace, "gone")) == 3 and len(admin.trial_pods(namespace, "kept")) == 3,
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
