"""Apiserver tier (no kubelet: the test writes pod status): failures restart the whole trial, then fail it.

A failed pod restarts every pod of its trial, up to runPolicy.backoffLimit; then the trial, and the
experiment, fail with the pod, the container's exit code and the reason in the condition message.
"""

import experiments as dtes
from apiserver_client import wait_for


def pods_running(admin, namespace, name, count=3):
    pods = wait_for(f"{count} pods", lambda: (lambda found: len(found) == count and found)(admin.trial_pods(namespace, name)))
    for pod in pods:
        admin.run_pod(pod)
    wait_for("phase Running", lambda: dtes.phase(admin.experiment(namespace, name)) == "Running")
    return sorted(pods, key=dtes.rank)


def test_a_failed_pod_restarts_the_trial_until_backoff_limit_then_fails_it(admin, namespace, operator):
    operator()
    admin.create(dtes.experiment("flaky", namespace, runPolicy={"backoffLimit": 1}))
    first = pods_running(admin, namespace, "flaky")
    first_uids = {p["metadata"]["uid"] for p in first}

    admin.finish_pod(first[2], 137, "OOMKilled")
    restarted = wait_for("the trial's pods to be recreated", lambda: (lambda found: len(found) == 3 and not (
        {p["metadata"]["uid"] for p in found} & first_uids) and found)(admin.trial_pods(namespace, "flaky")))
    dte = wait_for("the Restarting condition to clear", lambda: (lambda found: dtes.condition(found, "Restarting").get(
        "status") == "False" and found)(admin.experiment(namespace, "flaky")))
    assert dtes.trials(dte)[0]["restarts"] == 1
    assert dtes.condition(dte, "Restarting")["message"] == (
        "pods recreated after trial flaky-0: pod flaky-0-worker-1: container trainer exited with code 137 (OOMKilled); "
        "restarting the trial (restart 1 of at most 1)")
    assert [p["metadata"]["name"] for p in restarted] == [p["metadata"]["name"] for p in first]  # same ranks, new pods

    second = pods_running(admin, namespace, "flaky")
    admin.finish_pod(second[1], 1, "Error", "RuntimeError: connection reset by peer")
    failed = wait_for("phase Failed", lambda: dtes.phase(admin.experiment(namespace, "flaky")) == "Failed"
                      and admin.experiment(namespace, "flaky"))
    condition = dtes.condition(failed, "Failed")
    assert condition["reason"] == "BackoffLimitExceeded"
    assert "pod flaky-0-worker-0: container" in condition["message"]
    assert "exited with code 1 (Error): RuntimeError: connection reset by peer" in condition["message"]
    assert "backoffLimit 1 reached after 1 restart" in condition["message"]
    assert dtes.condition(failed, "Restarting")["status"] == "False"
    # cleanPodPolicy Running (default): running pods are stopped, the failed one is kept for its logs.
    wait_for("the running pods to be deleted", lambda: [p["metadata"]["name"] for p in admin.trial_pods(namespace, "flaky")]
             == ["flaky-0-worker-0"])
    reasons = [e["reason"] for e in admin.events(namespace, "flaky") if e["type"] == "Warning"]
    assert "PodFailed" in reasons and "BackoffLimitExceeded" in reasons


def test_an_evicted_pod_is_reported_with_the_eviction_reason(admin, namespace, operator):
    operator()
    admin.create(dtes.experiment("evicted", namespace, runPolicy={"backoffLimit": 0}))
    pods = pods_running(admin, namespace, "evicted")
    admin.patch("Pod", namespace, pods[0]["metadata"]["name"], {"status": {
        "phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}}, sub="status")
    failed = wait_for("phase Failed", lambda: dtes.phase(admin.experiment(namespace, "evicted")) == "Failed"
                      and admin.experiment(namespace, "evicted"))
    assert "pod evicted-0-ps-0 failed: Evicted: The node was low on resource: memory." in dtes.condition(failed, "Failed")["message"]
