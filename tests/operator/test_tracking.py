"""Apiserver tier (no kubelet: the test writes pod status): MLflow runs of an experiment, and MLflow away.

The operator records into a real MLflow store (SQLite in the test's directory): one MLflow experiment
per DistributedTrainingExperiment, a parent run, one run per trial whose id the pods get, each closed
with the trial's outcome; deleting an experiment mid-run ends its runs KILLED. An unreachable server
never holds an experiment up. When it ends, the report is attached to the parent run and linked
from status.
"""

import pathlib
import re
import socket

import experiments as dtes
from apiserver_client import wait_for


def store(tmp_path):
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


def run_status(uri, run_id):
    import mlflow

    return mlflow.MlflowClient(tracking_uri=uri).get_run(run_id).info.status


def test_runs_are_created_passed_to_the_pods_and_closed_with_the_outcome(admin, namespace, operator, tmp_path):
    uri = store(tmp_path)
    operator(extra_args=("--tracking-uri", uri, "--tracking-timeout", "60"))
    admin.create(dtes.experiment("tracked", namespace))
    pods = wait_for("3 pods", lambda: (lambda found: len(found) == 3 and found)(admin.trial_pods(namespace, "tracked")),
                    timeout=120)
    dte = admin.experiment(namespace, "tracked")
    run_id = dtes.trials(dte)[0]["runId"]
    parent = dte["status"]["mlflow"]["runId"]
    assert run_id and parent and dte["status"]["mlflow"]["experimentId"]
    assert {dtes.env_of(p)["RINGLEADER_MLFLOW_RUN_ID"] for p in pods} == {run_id}
    assert {dtes.env_of(p)["MLFLOW_TRACKING_URI"] for p in pods} == {uri}

    for pod in pods:
        admin.run_pod(pod)
    for pod in sorted(pods, key=dtes.rank)[1:]:
        admin.finish_pod(pod, 0, "Completed", dtes.summary_message())
    wait_for("phase Succeeded", lambda: dtes.phase(admin.experiment(namespace, "tracked")) == "Succeeded")
    wait_for("the trial run to be FINISHED", lambda: run_status(uri, run_id) == "FINISHED", timeout=60)
    wait_for("the parent run to be FINISHED", lambda: run_status(uri, parent) == "FINISHED", timeout=60)

    # The experiment opens as model training; the sweep run compares its trials from their status summaries.
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment(dte["status"]["mlflow"]["experimentId"])
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    metrics = client.get_run(parent).data.metrics
    assert metrics["throughput_samples_per_s/tracked-0"] == dtes.SUMMARY["throughput"]
    assert metrics["iteration_p50_ms/tracked-0"] == 1000 * dtes.SUMMARY["iterationTimeP50Seconds"]
    assert metrics["share_comm_pct/tracked-0"] == round(100 * dtes.SUMMARY["commFraction"], 1)  # rounded to 0.1

    # The report is made from what MLflow holds (here no rank logged anything: the trial's summary comes
    # from status), attached to the parent run, and linked from status; no UI address: an artifact URI.
    # The status is patched after the pass that finished the parent run: its link can come a moment after.
    linked = wait_for("the report linked from status", lambda: admin.experiment(namespace, "tracked")["status"]
                      ["mlflow"].get("reportUrl"), timeout=30)
    assert linked == f"runs:/{parent}/report/report.html"
    page = pathlib.Path(client.download_artifacts(parent, "report/report.html", str(tmp_path))).read_text()
    assert dtes.trials(dte)[0]["name"] in page and "<td>FINISHED</td>" in page
    [ready] = [e for e in admin.events(namespace, "tracked") if e["reason"] == "ReportReady"]
    assert ready["message"].startswith("the trial's report is attached")  # one trial: no sweep


def test_deleting_an_experiment_mid_run_ends_its_runs_killed(admin, namespace, operator, tmp_path):
    uri = store(tmp_path)
    operator(extra_args=("--tracking-uri", uri, "--tracking-timeout", "60"))
    admin.create(dtes.experiment("cancelled", namespace))
    wait_for("3 pods", lambda: len(admin.trial_pods(namespace, "cancelled")) == 3, timeout=120)
    dte = admin.experiment(namespace, "cancelled")
    run_id, parent = dtes.trials(dte)[0]["runId"], dte["status"]["mlflow"]["runId"]
    admin.delete("DistributedTrainingExperiment", namespace, "cancelled")
    wait_for("the trial run to be KILLED", lambda: run_status(uri, run_id) == "KILLED", timeout=60)
    wait_for("the parent run to be KILLED", lambda: run_status(uri, parent) == "KILLED", timeout=60)


def test_an_unreachable_mlflow_never_holds_an_experiment_up(admin, namespace, operator):
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    operator(extra_args=("--tracking-uri", f"http://127.0.0.1:{port}", "--tracking-timeout", "5"))
    admin.create(dtes.experiment("offline", namespace))
    pods = wait_for("3 pods", lambda: (lambda found: len(found) == 3 and found)(admin.trial_pods(namespace, "offline")),
                    timeout=60)
    for pod in pods:
        admin.run_pod(pod)
    for pod in sorted(pods, key=dtes.rank)[1:]:
        admin.finish_pod(pod, 0, "Completed", dtes.summary_message())
    wait_for("phase Succeeded", lambda: dtes.phase(admin.experiment(namespace, "offline")) == "Succeeded", timeout=60)
    warnings = [e for e in admin.events(namespace, "offline") if e["reason"] == "TrackingUnavailable"]
    assert warnings and warnings[0]["type"] == "Warning"
    assert f"127.0.0.1:{port}" in warnings[0]["message"]


def _announced(admin, namespace, name, reason):
    return sum(e.get("count") or 1 for e in admin.events(namespace, name) if e["reason"] == reason)


def _failed_calls(running, uri):
    """The MLflow calls to `uri` the operator logged as failed: recording.MlflowCalls warns of each."""
    failed = re.compile(rf"^MLflow at {re.escape(uri)}: .* failed: ", re.MULTILINE)
    return len(failed.findall(running.log.read_text(errors="replace")))


def test_mlflow_going_away_and_coming_back_is_announced_once_each(admin, namespace, operator, tmp_path):
    from tracking_listener import MlflowServer

    server = MlflowServer(tmp_path)
    server.wait_healthy()
    try:
        running = operator(extra_args=("--tracking-uri", server.uri, "--tracking-retry", "1",
                                       "--tracking-timeout", "5"))
        admin.create(dtes.experiment("flaky", namespace))
        pods = wait_for("3 pods",
                        lambda: (lambda found: len(found) == 3 and found)(admin.trial_pods(namespace, "flaky")),
                        timeout=120)
        run_id = wait_for("the trial's run", lambda: dtes.trials(admin.experiment(namespace, "flaky"))[0]["runId"],
                          timeout=120)
        # Counted from here: a first call slower than the timeout on a loaded machine may have announced a pair.
        went, came = (_announced(admin, namespace, "flaky", r) for r in ("TrackingUnavailable", "TrackingAvailable"))
        server.stop()
        # Every pass from here on wants to end the trial's run: only the first failure is news. A pass that
        # makes no MLflow call (the runs exist already) says nothing of whether MLflow is back.
        for pod in pods:
            admin.run_pod(pod)
        for pod in sorted(pods, key=dtes.rank)[1:]:
            admin.finish_pod(pod, 0, "Completed", dtes.summary_message())
        wait_for("phase Succeeded", lambda: dtes.phase(admin.experiment(namespace, "flaky")) == "Succeeded", timeout=60)
        wait_for("TrackingUnavailable", lambda: _announced(admin, namespace, "flaky", "TrackingUnavailable") > went,
                 timeout=60)
        # Passes retry every second, each failing MLflow call logged by the operator: once three more have
        # failed (each of which announced a pair before), the one announcement must still be the only one.
        failed = _failed_calls(running, server.uri)
        wait_for("3 more failed MLflow calls in the operator's log",
                 lambda: _failed_calls(running, server.uri) >= failed + 3, timeout=60)
        assert _announced(admin, namespace, "flaky", "TrackingUnavailable") == went + 1
        assert _announced(admin, namespace, "flaky", "TrackingAvailable") == came

        server = MlflowServer(tmp_path, port=server.port)
        server.wait_healthy()
        wait_for("the trial run FINISHED", lambda: run_status(server.uri, run_id) == "FINISHED", timeout=120)
        wait_for("TrackingAvailable", lambda: _announced(admin, namespace, "flaky", "TrackingAvailable") > came,
                 timeout=60)
        assert _announced(admin, namespace, "flaky", "TrackingAvailable") == came + 1
        assert _announced(admin, namespace, "flaky", "TrackingUnavailable") == went + 1
    finally:
        server.stop()
