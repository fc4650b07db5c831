"""Apiserver tier: a trial whose ranks trained while MLflow was away is not a success until its records are in.

The test plays the kubelet (tests/operator/kubelet.py): it reports the pods Running, serves their logs on
127.0.0.1 and writes their ends. A rank that trained and waits for MLflow prints a waiting line
(contract/unpublished.py); the operator reads it from the reporting pod's log and says RecordsPending, and
succeeds the trial only once its ranks ended. Ranks that gave up fail it RecordsIncomplete, saying how much
MLflow has and how to publish the rest, and their pods are kept whatever cleanPodPolicy says.
"""

import experiments as dtes
import kubelet
from apiserver_client import wait_for

from ringleader.contract import unpublished

URI = "http://mlflow.test:5000"


def _running(admin, namespace, name):
    pods = wait_for("the trial's 3 pods", lambda: len(admin.trial_pods(namespace, name)) == 3
                    and admin.trial_pods(namespace, name))
    for pod in pods:
        kubelet.run_pod(admin, pod, bind=True)
    wait_for("phase Running", lambda: dtes.phase(admin.experiment(namespace, name)) == "Running")
    return sorted(pods, key=dtes.rank)


def test_a_trial_whose_ranks_wait_for_mlflow_is_records_pending_and_succeeds_only_once_they_ended(
        admin, namespace, operator, served_logs):
    operator()
    admin.create(dtes.experiment("late", namespace))
    ps, first, second = _running(admin, namespace, "late")
    served_logs[first["metadata"]["name"]] = (
        "progress: iteration 10/10 loss 0.4000 iteration 5.0 ms\n"
        + unpublished.waiting_line(1, 4, 10, URI, 30, 900) + "\n")
    pending = wait_for("RecordsPending", lambda: (lambda dte: dtes.condition(dte, "Running").get("reason")
                                                  == "RecordsPending" and dte)(admin.experiment(namespace, "late")))
    assert dtes.condition(pending, "Running")["message"] == (
        f"trial late-0: 0 of 3 ranks' records published; waiting for MLflow at {URI}: rank 1 has 4 of 10 "
        "iterations published, after 30 of at most 900 s")
    assert (dtes.trials(pending)[0]["phase"], dtes.trials(pending)[0]["reason"]) == ("Running", "RecordsPending")
    assert not dtes.is_true(pending, "Succeeded")
    told = {e["type"] for e in admin.events(namespace, "late") if e["reason"] == "RecordsPending"}
    assert told == {"Normal"}, told  # waiting for MLflow is news, not a fault

    # Two ranks got their records in and ended; the first worker still waits.
    admin.finish_pod(second, 0, "Completed", "ringleader: ended, 10 records")
    admin.finish_pod(ps, 0, "Completed", "ringleader: ended, 10 records")
    two = wait_for("2 of 3 published", lambda: (lambda dte: dtes.condition(dte, "Running").get("message", "")
                   .startswith("trial late-0: 2 of 3 ranks' records published;") and dte)(
        admin.experiment(namespace, "late")))
    assert dtes.phase(two) == "Running" and dtes.condition(two, "Running")["reason"] == "RecordsPending"
    # MLflow took the rest: the lowest worker ends too, with the trial's summary.
    admin.finish_pod(first, 0, "Completed", dtes.summary_message())
    done = wait_for("phase Succeeded", lambda: (lambda dte: dtes.phase(dte) == "Succeeded" and dte)(
        admin.experiment(namespace, "late")))
    assert dtes.trials(done)[0]["reason"] == "WorkersSucceeded"


def test_ranks_that_gave_up_on_mlflow_fail_the_experiment_records_incomplete_saying_how_to_publish(
        admin, namespace, operator):
    operator()
    admin.create(dtes.experiment("lost", namespace, runPolicy={"cleanPodPolicy": "All"}))
    ps, first, second = _running(admin, namespace, "lost")
    for pod, published in ((first, 4), (second, 6)):
        rank = dtes.rank(pod)
        reason = unpublished.incomplete_reason(rank, published, 10, URI, 900)
        admin.finish_pod(pod, 1, "Error", f"ringleader: rank {rank} (worker) failed (permanent): {reason}")
    admin.finish_pod(ps, 0, "Completed", "ringleader: ended, 10 records")

    failed = wait_for("phase Failed", lambda: (lambda dte: dtes.phase(dte) == "Failed" and dte)(
        admin.experiment(namespace, "lost")))
    condition = dtes.condition(failed, "Failed")
    assert condition["reason"] == "RecordsIncomplete", condition
    assert condition["message"].startswith(
        "trial lost-0: records incomplete: 10 of 20 iterations of 2 ranks published: MLflow did not take the rest "
        "within tracking.recordsWaitSeconds after training")
    assert (f"for pod in lost-0-worker-0 lost-0-worker-1; do kubectl logs -n {namespace} $pod | ringleader publish "
            "--from-log - ") in condition["message"]
    assert dtes.trials(failed)[0]["restarts"] == 0  # a new attempt would not bring MLflow back
    warnings = [e["reason"] for e in admin.events(namespace, "lost") if e["type"] == "Warning"]
    assert "RecordsIncomplete" in warnings
    # cleanPodPolicy All, but the workers' logs hold the records: only the server's pod goes.
    wait_for("the server's pod deleted",
             lambda: sorted(p["metadata"]["name"] for p in admin.trial_pods(namespace, "lost"))
             == ["lost-0-worker-0", "lost-0-worker-1"])
