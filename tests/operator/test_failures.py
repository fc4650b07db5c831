"""Apiserver tier (no kubelet: the test writes pod status): failures restart the whole trial, then fail it.

A failed pod restarts every pod of its trial, up to runPolicy.backoffLimit; then the trial, and the
experiment, fail with the pod, the container's exit code and the reason in the condition message.
A pod that cannot start fails its trial at its startup deadline, without a restart.
"""

import experiments as dtes
from apiserver_client import wait_for


def pods_running(admin, namespace, name, count=3):
    pods = wait_for(f"{count} pods",
                    lambda: (lambda found: len(found) == count and found)(admin.trial_pods(namespace, name)))
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
    # The second attempt's ranks name their rank runs by it; the first attempt's said nothing (attempt 1).
    assert {dtes.env_of(p).get("RINGLEADER_ATTEMPT") for p in first} == {None}
    assert {dtes.env_of(p).get("RINGLEADER_ATTEMPT") for p in restarted} == {"2"}

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
    wait_for("the running pods to be deleted",
             lambda: [p["metadata"]["name"] for p in admin.trial_pods(namespace, "flaky")]
             == ["flaky-0-worker-0"])
    reasons = [e["reason"] for e in admin.events(namespace, "flaky") if e["type"] == "Warning"]
    assert "RankFailed" in reasons and reasons.count("BackoffLimitExceeded") == 1  # the trial's; no echo of it


def test_an_evicted_pod_is_reported_with_the_eviction_reason(admin, namespace, operator):
    operator()
    admin.create(dtes.experiment("evicted", namespace, runPolicy={"backoffLimit": 0}))
    pods = pods_running(admin, namespace, "evicted")
    admin.patch("Pod", namespace, pods[0]["metadata"]["name"], {"status": {
        "phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}}, sub="status")
    failed = wait_for("phase Failed", lambda: dtes.phase(admin.experiment(namespace, "evicted")) == "Failed"
                      and admin.experiment(namespace, "evicted"))
    assert ("pod evicted-0-ps-0 failed: Evicted: The node was low on resource: memory."
            in dtes.condition(failed, "Failed")["message"])


PULL_FAILED = ('Back-off pulling image "localhost/ringleader/does-not-exist:1.0": ErrImagePull: '
               'failed to pull and unpack '
               'image "localhost/ringleader/does-not-exist:1.0": failed to resolve reference "localhost/ringleader/'
               'does-not-exist:1.0": failed to do request: Head "https://localhost/v2/ringleader/does-not-exist/'
               'manifests/1.0": dial tcp 127.0.0.1:443: connect: connection refused')


def test_a_pod_that_cannot_pull_its_image_fails_the_trial_at_its_startup_deadline_with_a_warning(
        admin, namespace, operator):
    operator()
    admin.create(dtes.experiment("no-image", namespace, runPolicy={"startupDeadlineSeconds": 3}))
    pods = sorted(wait_for("3 pods", lambda: (lambda found: len(found) == 3 and found)(
        admin.trial_pods(namespace, "no-image"))), key=dtes.rank)
    for pod in pods[:2]:
        admin.run_pod(pod)
    admin.waiting(pods[2], "ImagePullBackOff", PULL_FAILED)
    waiting = wait_for("the waiting reason in the Running condition",
                       lambda: (lambda found: PULL_FAILED in dtes.condition(
        found, "Running").get("message", "") and found)(admin.experiment(namespace, "no-image")))
    assert dtes.phase(waiting) == "Created"

    failed = wait_for("phase Failed", lambda: dtes.phase(admin.experiment(namespace, "no-image")) == "Failed"
                      and admin.experiment(namespace, "no-image"))
    condition = dtes.condition(failed, "Failed")
    assert condition["reason"] == "StartupDeadlineExceeded"
    assert condition["message"] == ("trial no-image-0: pod no-image-0-worker-1 did not start within "
                                    f"startupDeadlineSeconds=3 of its creation: ImagePullBackOff ({PULL_FAILED})")
    assert dtes.trials(failed)[0]["restarts"] == 0
    warning = wait_for("a Warning event", lambda: next((e for e in admin.events(namespace, "no-image") if e["type"] ==
                                                        "Warning" and e["reason"] == "StartupDeadlineExceeded"), None))
    assert PULL_FAILED in warning["message"]
    # Every pod goes, the waiting one too: it holds its node's resources and has no log to keep.
    wait_for("the pods to be deleted", lambda: admin.trial_pods(namespace, "no-image") == [])
    assert [e["reason"] for e in admin.events(namespace, "no-image") if e["type"] == "Warning"] == [
        "StartupDeadlineExceeded"]


def test_a_failure_the_runtime_calls_permanent_fails_the_trial_without_a_restart(admin, namespace, operator):
    operator()
    admin.create(dtes.experiment("no-model", namespace))  # backoffLimit 3 (default)
    pods = pods_running(admin, namespace, "no-model")
    said = ("ringleader: rank 1 (worker) failed (permanent): ModelError: model 'nosuch.nets:tiny': "
            "importing nosuch.nets failed: cannot import 'nosuch' (No module named 'nosuch'); "
            "install it in the image or put it on PYTHONPATH")
    admin.finish_pod(pods[1], 1, "Error", said)
    failed = wait_for("phase Failed", lambda: dtes.phase(admin.experiment(namespace, "no-model")) == "Failed"
                      and admin.experiment(namespace, "no-model"))
    condition = dtes.condition(failed, "Failed")
    assert condition["reason"] == "PermanentFailure"
    assert condition["message"] == (f"trial no-model-0: pod no-model-0-worker-0: container trainer exited with code 1 "
                                    f"(Error): {said}; not restarted: "
                                    "the runtime reported a failure no restart can fix")
    assert dtes.trials(failed)[0]["restarts"] == 0
    assert dtes.condition(failed, "Restarting") == {}  # never restarted
    # cleanPodPolicy Running: the running pods go, the failed one stays for its logs; none is recreated.
    wait_for("only the failed pod left",
             lambda: [p["metadata"]["name"] for p in admin.trial_pods(namespace, "no-model")]
             == ["no-model-0-worker-0"])


def test_a_rank_killed_inside_a_pod_of_two_fails_the_trial_naming_its_pod_and_the_rank(admin, namespace, operator):
    """A ring of 4 workers, 2 to a pod: 2 pods; pod worker-1's agent exits as its SIGKILLed rank 3 did (137),
    naming it, while pod worker-0's ranks only lost contact with it."""
    operator()
    admin.create(dtes.experiment("pairs", namespace, architecture="RingAllReduce", runPolicy={"backoffLimit": 0},
                                 workers={"replicas": 4, "ranksPerPod": 2}))
    first, second = pods_running(admin, namespace, "pairs", count=2)
    assert [dtes.env_of(p)["RANK"] for p in (first, second)] == ["0", "2"]
    assert {dtes.env_of(p)["LOCAL_WORLD_SIZE"] for p in (first, second)} == {"2"}
    assert all("LOCAL_RANK" not in dtes.env_of(p) for p in (first, second))  # each pod's one command is its agent
    running = dtes.condition(admin.experiment(namespace, "pairs"), "Running")
    assert "all 2 pods (4 workers, 2 to a pod) are running" in running["message"], running
    killed = "ringleader: rank 3 (worker-1 local rank 1, killed by SIGKILL) failed: no reason of its own"
    admin.finish_pod(first, 1, "Error", "ringleader: rank 0 (worker-0 local rank 0, exit code 1) failed: lost contact "
                                        "with rank 3 (it died, hung or is unreachable): Connection reset by peer")
    admin.finish_pod(second, 137, "Error", killed)
    failed = wait_for("phase Failed", lambda: dtes.phase(admin.experiment(namespace, "pairs")) == "Failed"
                      and admin.experiment(namespace, "pairs"))
    condition = dtes.condition(failed, "Failed")
    assert condition["reason"] == "BackoffLimitExceeded"
    assert f"pod pairs-0-worker-1: container trainer exited with code 137 (Error): {killed}" in condition["message"]
    assert "backoffLimit 0 reached after 0 restarts" in condition["message"]
