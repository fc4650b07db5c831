"""Apiserver tier, cluster-wide operator (no scheduler: the test binds pods to a Node it made, as the scheduler would):
admission by free capacity. A trial whose pods do not fit together creates none and waits, saying why, until room
frees."""

import experiments as dtes
from apiserver_client import wait_for
from ringleader.api import constants

SMALL_CPU = {"cpu": "300m", "memory": "128Mi"}  # 3 pods: 900m of the node's 1 CPU


def add_node(admin, name, cpu):
    admin.request("POST", "/api/v1/nodes", ok=(200, 201), body={
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    admin.request("PATCH", f"/api/v1/nodes/{name}/status", content_type="application/merge-patch+json", body={
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "ephemeral-storage": "100Gi", "pods": "110"},
                   "capacity": {"cpu": cpu, "memory": "8Gi", "ephemeral-storage": "100Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "message": "played by the test"}]}})
    # The API server taints a new Node not-ready; the node lifecycle controller, which this tier does not run, would
    # lift the taint once the Node says Ready.
    admin.patch("Node", None, name, {"spec": {"taints": None}})


def bind_and_run(admin, pod, node):
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    admin.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", ok=(200, 201), body={
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    admin.run_pod(pod)


def forget_earlier_tests(admin, namespace, node):
    """A cluster-wide operator takes every experiment in the API server and counts every node's free CPU: what the
    test files that ran before this one on its pytest worker left behind (their experiments, and the nodes they
    played) would compete for, or add to, this test's node. Both are deleted first, so that the admission watched
    here is this test's own trials' on its one node."""
    found = admin.request("GET", f"/apis/{constants.API_VERSION}/{constants.PLURAL}")["items"]
    for dte in found:
        if dte["metadata"]["namespace"] != namespace:
            admin.delete(constants.KIND, dte["metadata"]["namespace"], dte["metadata"]["name"])
    for other in admin.request("GET", "/api/v1/nodes")["items"]:
        if other["metadata"]["name"] != node:
            admin.delete("Node", None, other["metadata"]["name"])


def three_pods(admin, namespace, name):
    return wait_for(f"3 pods of {name}", lambda: (lambda found: len(found) == 3 and found)(
        admin.trial_pods(namespace, name)))


def test_a_trial_whose_pods_do_not_fit_together_waits_pending_and_is_created_once_capacity_frees(
        admin, namespace, operator):
    node = f"node-{namespace}"
    add_node(admin, node, "1")
    forget_earlier_tests(admin, namespace, node)
    try:
        operator(cluster_wide=True, extra_args=("--capacity-retry-interval", "1"))
        spec = {"parameterServers": {"resources": SMALL_CPU}, "workers": {"resources": SMALL_CPU}}
        admin.create(dtes.experiment("first", namespace, **spec))
        first = three_pods(admin, namespace, "first")
        admin.create(dtes.experiment("second", namespace, **spec))
        waiting = wait_for("the second to wait for capacity", lambda: (lambda dte: dtes.trials(dte) and dtes.trials(
            dte)[0].get("reason") == "WaitingForCapacity" and dte)(admin.experiment(namespace, "second")))
        (trial,) = dtes.trials(waiting)
        assert trial["phase"] == "Pending"
        assert trial["message"].startswith("waiting for free capacity for all 3 pods (1 parameter server, 2 workers): "
                                           "needs 3 pods of cpu 300m, memory 128Mi"), trial["message"]
        assert f"free: {node} cpu 100m" in trial["message"], trial["message"]
        assert dtes.condition(waiting, "Running")["reason"] == "WaitingForCapacity"
        assert waiting["status"]["progress"]["trialsQueued"] == 1

        for pod in first:  # bound now: the scheduler's work, counted from the node's pods from here on
            bind_and_run(admin, pod, node)
        wait_for("the first to run", lambda: dtes.phase(admin.experiment(namespace, "first")) == "Running")
        assert admin.trial_pods(namespace, "second") == []  # still none: no pod of it holds a node while it waits
        assert dtes.trials(admin.experiment(namespace, "second"))[0]["reason"] == "WaitingForCapacity"

        for pod in first:  # the first trial ends: its pods no longer hold the node's CPU
            admin.finish_pod(pod, 0, "Completed", dtes.summary_message() if dtes.role(pod) == "worker" else None)
        wait_for("the first to succeed", lambda: dtes.phase(admin.experiment(namespace, "first")) == "Succeeded")
        second = three_pods(admin, namespace, "second")
        for pod in second:
            bind_and_run(admin, pod, node)
        wait_for("the second to run", lambda: dtes.phase(admin.experiment(namespace, "second")) == "Running")
        events = [(e["reason"], e["message"]) for e in admin.events(namespace, "second")]
        assert any(reason == "WaitingForCapacity" for reason, _ in events), events
    finally:
        admin.delete("Node", None, node)
