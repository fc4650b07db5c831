"""Apiserver tier (no kubelet: the test writes pod status): suspension, resumption and deletion mid-run."""

import experiments as dtes
from apiserver_client import wait_for


def running_trial(admin, namespace, name):
    pods = wait_for("3 pods", lambda: (lambda found: len(found) == 3 and found)(admin.trial_pods(namespace, name)))
    for pod in pods:
        admin.run_pod(pod)
    wait_for("phase Running", lambda: dtes.phase(admin.experiment(namespace, name)) == "Running")
    return pods


def test_suspend_deletes_the_pods_and_resume_starts_the_trial_over(admin, namespace, operator):
    operator()
    admin.create(dtes.experiment("pausable", namespace))
    before = running_trial(admin, namespace, "pausable")

    admin.patch("DistributedTrainingExperiment", namespace, "pausable", {"spec": {"runPolicy": {"suspend": True}}})
    suspended = wait_for("phase Suspended", lambda: dtes.phase(admin.experiment(namespace, "pausable")) == "Suspended"
                         and admin.experiment(namespace, "pausable"))
    assert dtes.condition(suspended, "Suspended")["reason"] == "Suspended"
    assert dtes.condition(suspended, "Running")["status"] == "False"
    wait_for("the pods to be deleted", lambda: admin.trial_pods(namespace, "pausable") == [])
    assert dtes.trials(suspended)[0]["phase"] == "Suspended"

    admin.patch("DistributedTrainingExperiment", namespace, "pausable", {"spec": {"runPolicy": {"suspend": False}}})
    after = wait_for("new pods",
                     lambda: (lambda found: len(found) == 3 and found)(admin.trial_pods(namespace, "pausable")))
    assert not {p["metadata"]["uid"] for p in after} & {p["metadata"]["uid"] for p in before}
    resumed = admin.experiment(namespace, "pausable")
    assert dtes.condition(resumed, "Suspended")["status"] == "False"
    assert dtes.condition(resumed, "Suspended")["reason"] == "Resumed"
    assert dtes.trials(resumed)[0]["restarts"] == 0  # a suspension is not a failure
    reasons = [e["reason"] for e in admin.events(namespace, "pausable")]
    assert "Suspended" in reasons and "Resumed" in reasons


def test_deleting_a_running_experiment_never_waits_and_its_children_are_collected(admin, namespace, operator):
    operator()
    admin.create(dtes.experiment("doomed", namespace))
    running_trial(admin, namespace, "doomed")
    assert admin.experiment(namespace, "doomed")["metadata"].get("finalizers") is None
    admin.delete("DistributedTrainingExperiment", namespace, "doomed")
    assert admin.experiment(namespace, "doomed") is None  # gone at once: no finalizer to wait for
    wait_for("pods, Service and ConfigMap to be garbage-collected", lambda: (
        admin.trial_pods(namespace, "doomed") == [] and admin.get("Service", namespace, "doomed-0") is None
        and admin.get("ConfigMap", namespace, "doomed-0-trial") is None), timeout=60)


def test_deleting_an_experiment_while_the_operator_is_down_does_not_hang(admin, namespace, operator):
    running = operator()
    admin.create(dtes.experiment("orphan", namespace))
    running_trial(admin, namespace, "orphan")
    running.stop()
    admin.delete("DistributedTrainingExperiment", namespace, "orphan")
    assert admin.experiment(namespace, "orphan") is None


def test_a_namespace_deleted_mid_run_restarts_nothing_blames_no_rbac_and_ends_the_runs_killed(
        admin, namespace, operator, tmp_path):
    # This tier runs no namespace controller: the namespace stays Terminating with its objects, and the test deletes
    # a pod as that controller would. The API server refuses anything new there ("being terminated"): no pod failure
    # to restart, no RBAC problem.
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    operator(extra_args=("--tracking-uri", uri, "--tracking-timeout", "60"))
    admin.create(dtes.experiment("homeless", namespace))
    pods = running_trial(admin, namespace, "homeless")
    dte = admin.experiment(namespace, "homeless")
    runs = [dtes.trials(dte)[0]["runId"], dte["status"]["mlflow"]["runId"]]
    admin.delete("Namespace", None, namespace)
    wait_for("the namespace to be terminating", lambda: admin.get("Namespace", None, namespace)["status"].get(
        "phase") == "Terminating")
    admin.delete("Pod", namespace, pods[0]["metadata"]["name"])
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=uri)
    ended = wait_for("the runs to be KILLED", lambda: (lambda found: all(r.info.status == "KILLED" for r in found)
                                                        and found)([client.get_run(r) for r in runs]), timeout=60)
    assert {r.data.tags["ringleader.reason"] for r in ended} == {"NamespaceDeleted"}, [r.data.tags for r in ended]
    assert dtes.phase(admin.experiment(namespace, "homeless")) == "Running"  # not Restarting: nothing is retried
    assert not [c for c in admin.experiment(namespace, "homeless")["status"]["conditions"]
                if c["type"] == "ReconcileFailed" and c["status"] == "True"]  # no RBAC blame
    left = {p["metadata"]["uid"] for p in admin.trial_pods(namespace, "homeless")}
    assert left == {p["metadata"]["uid"] for p in pods[1:]}  # the deleted pod is not recreated
