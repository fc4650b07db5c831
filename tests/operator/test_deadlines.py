"""Apiserver tier (no kubelet: the test writes pod status): deadlines and TTLs are enforced when they fall due.

The operator sleeps until the due time (no periodic sweep; its recheck interval here is 10 s),
so the measured delays must be close to the configured ones.
"""

import time

import experiments as dtes
from apiserver_client import wait_for


def test_active_deadline_seconds_fails_the_trial_at_its_deadline(admin, namespace, operator):
    operator()
    admin.create(dtes.experiment("slow", namespace, runPolicy={"activeDeadlineSeconds": 4}))
    pods = wait_for("3 pods", lambda: (lambda found: len(found) == 3 and found)(admin.trial_pods(namespace, "slow")))
    for pod in pods:
        admin.run_pod(pod)
    failed = wait_for("phase Failed", lambda: dtes.phase(admin.experiment(namespace, "slow")) == "Failed"
                      and admin.experiment(namespace, "slow"), timeout=20)
    trial = dtes.trials(failed)[0]
    assert dtes.condition(failed, "Failed")["reason"] == "DeadlineExceeded"
    assert "activeDeadlineSeconds=4" in trial["message"]
    late = (dtes.time_of(trial["completionTime"]) - dtes.time_of(trial["startTime"])).total_seconds()
    assert 4.0 <= late < 6.0, f"failed {late:.2f}s after the start, for a 4s deadline"
    # A deadline stops every running pod, whatever cleanPodPolicy says.
    wait_for("the pods to be deleted", lambda: admin.trial_pods(namespace, "slow") == [])


def test_ttl_seconds_after_finished_deletes_the_experiment_when_due(admin, namespace, operator):
    operator()
    admin.create(dtes.experiment("brief", namespace, runPolicy={"ttlSecondsAfterFinished": 3}))
    pods = wait_for("3 pods", lambda: (lambda found: len(found) == 3 and found)(admin.trial_pods(namespace, "brief")))
    for pod in pods:
        admin.run_pod(pod)
    for pod in sorted(pods, key=dtes.rank)[1:]:
        admin.finish_pod(pod, 0, "Completed", dtes.summary_message())
    done = wait_for("phase Succeeded", lambda: dtes.phase(admin.experiment(namespace, "brief")) == "Succeeded"
                    and admin.experiment(namespace, "brief"))
    completed = dtes.time_of(done["status"]["completionTime"]).timestamp()
    wait_for("the experiment to be deleted", lambda: admin.experiment(namespace, "brief") is None, timeout=20,
             interval=0.1)
    after = time.time() - completed
    assert 3.0 <= after < 5.0, f"deleted {after:.2f}s after completion, for a 3s TTL"
    # Its children follow by garbage collection (owner references).
    wait_for("the pods to be garbage-collected", lambda: admin.trial_pods(namespace, "brief") == [], timeout=60)
