"""Apiserver tier with a real Kueue controller manager (no kubelet: the test writes pod status): `scheduling.queueName`.

A ClusterQueue with CPU quota for exactly one trial admits a three-trial sweep one trial at a time:
no pod of a waiting trial exists, the waiting trials say they wait for Kueue and why, the quota
comes back when a trial ends, and an experiment without queueName in the same namespace is not held back.
"""

import experiments as dtes
from apiserver_client import wait_for
from ringleader.api import constants

# Each trial: 1 parameter server + 2 workers of 100m CPU (experiments.SMALL) = 300m, so 300m fits one.
TRIAL_CPU = "300m"
KUEUE = ("--set", "kueue.enabled=true")


def queue_for_one_trial(admin, namespace):
    """A ResourceFlavor, a ClusterQueue (for this namespace) with CPU for one trial, and LocalQueue "lab"."""
    admin.create({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
                  "metadata": {"name": "default-flavor"}}, exists_ok=True)
    admin.create({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
                  "metadata": {"name": f"cq-{namespace}"},
                  "spec": {
                      "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                      # Every resource the pods request must be covered; only CPU is scarce.
                      "resourceGroups": [{"coveredResources": ["cpu", "memory", "ephemeral-storage"], "flavors": [{
                          "name": "default-flavor", "resources": [
                              {"name": "cpu", "nominalQuota": TRIAL_CPU},
                              {"name": "memory", "nominalQuota": "64Gi"},
                              {"name": "ephemeral-storage", "nominalQuota": "1Ti"}]}]}]}})
    admin.create({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                  "metadata": {"name": "lab", "namespace": namespace}, "spec": {"clusterQueue": f"cq-{namespace}"}})
    wait_for("the ClusterQueue to be active", lambda: any(
        c["type"] == "Active" and c["status"] == "True"
        for c in ((admin.get("ClusterQueue", None, f"cq-{namespace}") or {}).get("status") or {}).get(
            "conditions", [])))


def pods_by_trial(admin, namespace, experiment):
    found = {}
    for pod in admin.trial_pods(namespace, experiment):
        found.setdefault(pod["metadata"]["labels"][constants.LABEL_TRIAL], []).append(pod)
    return found


def unfinished_pods(admin, namespace, done):
    """Pods by trial of the sweep's trials not in `done` (finished trials keep their workers' pods for their logs)."""
    return {t: p for t, p in pods_by_trial(admin, namespace, "grid").items() if t not in done}


def admitted_alone(admin, namespace, trial, done):
    """`trial` has all its 3 pods and no other unfinished trial has any: never two at once, never half."""
    found = unfinished_pods(admin, namespace, done)
    assert set(found) == {trial}, f"other trials hold pods: {sorted(found)}"
    assert len(found[trial]) == 3, f"{trial} is half-created: {len(found[trial])} pods"
    return found[trial]


def workload_condition(admin, namespace, name, type_):
    return condition_of(admin.get("Workload", namespace, name), type_)


def condition_of(workload, type_):
    return next((c for c in ((workload or {}).get("status") or {}).get("conditions", []) if c["type"] == type_), {})


def finish(admin, pods):
    for pod in pods:
        admin.run_pod(pod)
    for pod in pods:
        # Every rank ends, its servers too (they exit once the workers are done): the workers with the summary.
        admin.finish_pod(pod, 0, "Completed",
                         dtes.summary_message() if dtes.role(pod) == "worker" else "ringleader: ended, 10 records")


def test_a_cluster_queue_with_quota_for_one_trial_admits_a_sweeps_trials_one_at_a_time(admin, namespace, kueue,
                                                                                       operator):
    queue_for_one_trial(admin, namespace)
    operator(extra_args=("--kueue",), chart_values=KUEUE)
    # maxParallel 3: only Kueue's quota holds the trials back.
    admin.create(dtes.experiment("grid", namespace, sweep={"repetitions": 3, "maxParallel": 3},
                                 scheduling={"queueName": "lab"}))

    order = []
    for turn in range(3):
        trial = wait_for(f"trial {turn + 1} of 3 to get its pods", lambda: (lambda found: len(found) == 1 and len(
            next(iter(found.values()))) == 3 and next(iter(found)))(unfinished_pods(admin, namespace, order)),
            timeout=60)
        pods = admitted_alone(admin, namespace, trial, order)
        assert workload_condition(admin, namespace, trial, "Admitted")["status"] == "True"
        waiting = [t for t in dtes.trials(admin.experiment(namespace, "grid")) if t["name"] not in (*order, trial)]
        if waiting:
            # The trials still queued say so, with Kueue's own reason, and have no pod at all.
            dte = wait_for("the queued trials to show Kueue's reason", lambda: (lambda d: all(
                t["reason"] == "WaitingForAdmission" and "insufficient unused quota for cpu" in t["message"]
                for t in dtes.trials(d) if t["name"] not in (*order, trial))  # noqa: B023 - waited for here
                and d)(admin.experiment(namespace, "grid")))
            assert dte["status"]["progress"]["trialsQueued"] == len(waiting)
            assert dte["status"]["progressText"].endswith(f"{len(waiting)} queued")
            for queued in waiting:
                assert workload_condition(admin, namespace, queued["name"], "QuotaReserved")["status"] == "False"
        admitted_alone(admin, namespace, trial, order)  # still alone after the others were looked at
        order.append(trial)
        finish(admin, pods)
        wait_for(f"{trial}'s Workload to be finished", lambda: workload_condition(
            admin, namespace, trial, "Finished").get("status") == "True")  # noqa: B023 - waited for here

    assert sorted(order) == ["grid-0", "grid-1", "grid-2"]
    done = wait_for("phase Succeeded", lambda: dtes.phase(admin.experiment(namespace, "grid")) == "Succeeded"
                    and admin.experiment(namespace, "grid"))
    trials = {t["name"]: t for t in dtes.trials(done)}
    for earlier, later in zip(order, order[1:]):
        assert dtes.time_of(trials[later]["startTime"]) >= dtes.time_of(trials[earlier]["completionTime"])
    assert done["status"]["progress"]["trialsQueued"] == 0
    # Owned by the experiment: deleting it takes the Workloads with it (the garbage collector).
    workload = admin.get("Workload", namespace, "grid-0")
    assert workload["metadata"]["ownerReferences"][0]["uid"] == done["metadata"]["uid"]


def test_an_experiment_without_queue_name_runs_beside_a_full_queue(admin, namespace, kueue, operator):
    queue_for_one_trial(admin, namespace)
    operator(extra_args=("--kueue",), chart_values=KUEUE)
    admin.create(dtes.experiment("first", namespace, scheduling={"queueName": "lab"}))
    admin.create(dtes.experiment("second", namespace, scheduling={"queueName": "lab"}))
    admin.create(dtes.experiment("free", namespace))

    wait_for("the unqueued experiment's pods", lambda: len(admin.trial_pods(namespace, "free")) == 3)
    assert admin.get("Workload", namespace, "free-0") is None
    wait_for("one queued experiment admitted", lambda: sorted(
        len(admin.trial_pods(namespace, name)) for name in ("first", "second")) == [0, 3])
    held = next(name for name in ("first", "second") if not admin.trial_pods(namespace, name))
    dte = wait_for("the held experiment to say it waits for Kueue", lambda: (lambda d: dtes.condition(
        d, "Running").get("reason") == "WaitingForAdmission" and d)(admin.experiment(namespace, held)))
    assert "LocalQueue lab" in dtes.condition(dte, "Running")["message"]
    assert dtes.phase(dte) == "Queued"  # not running: waiting for Kueue to admit it


def test_a_queue_name_is_refused_by_an_operator_installed_without_kueue(admin, namespace, operator):
    operator()
    admin.create(dtes.experiment("queued", namespace, scheduling={"queueName": "lab"}))
    failed = wait_for("phase Failed", lambda: dtes.phase(admin.experiment(namespace, "queued")) == "Failed"
                      and admin.experiment(namespace, "queued"))
    condition = dtes.condition(failed, "Failed")
    assert condition["reason"] == "KueueDisabled"
    assert "kueue.enabled=true" in condition["message"]
    assert admin.trial_pods(namespace, "queued") == []


def test_a_trial_whose_admission_kueue_takes_back_loses_its_pods_and_is_admitted_again(admin, namespace, kueue,
                                                                                       operator):
    queue_for_one_trial(admin, namespace)
    operator(extra_args=("--kueue",), chart_values=KUEUE)
    admin.create(dtes.experiment("evicted", namespace, scheduling={"queueName": "lab"}))
    pods = wait_for("the admitted trial's pods", lambda: (lambda found: len(found) == 3 and found)(
        admin.trial_pods(namespace, "evicted")))
    for pod in pods:
        admin.run_pod(pod)
    wait_for("phase Running", lambda: dtes.phase(admin.experiment(namespace, "evicted")) == "Running")
    first = admin.get("Workload", namespace, "evicted-0")["metadata"]["uid"]

    # Deactivating an admitted Workload is how a person (or kueuectl stop) makes Kueue evict it.
    admin.patch("Workload", namespace, "evicted-0", {"spec": {"active": False}})
    event = wait_for("the eviction event", lambda: next((e for e in admin.events(namespace, "evicted")
                                                         if e["reason"] == "Evicted"), None))
    assert event["type"] == "Warning" and "Kueue evicted its Workload evicted-0" in event["message"]
    # A fresh Workload queues the trial again; Kueue admits it and the pods come back, all of them.
    again = wait_for("a new admitted Workload", lambda: (lambda w: w and w["metadata"]["uid"] != first and any(
        c["type"] == "Admitted" and c["status"] == "True" for c in (w.get("status") or {}).get("conditions", []))
        and w)(admin.get("Workload", namespace, "evicted-0")))
    assert again["spec"]["active"] is True
    recreated = wait_for("the trial's pods, recreated", lambda: (lambda found: len(found) == 3 and found)(
        admin.trial_pods(namespace, "evicted")))
    assert {p["metadata"]["uid"] for p in recreated}.isdisjoint({p["metadata"]["uid"] for p in pods})


TAS_LABEL = "ringleader.test/tas"


def topology_aware_queue(admin, namespace, nodes):
    """Nodes of `nodes` {name: CPU}, a Topology of one level (the node), a TAS ResourceFlavor over them, and LocalQueue
    "tas" in a ClusterQueue with quota for more than any one node holds."""
    for name, cpu in nodes.items():
        admin.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, TAS_LABEL: namespace}}}, exists_ok=True)
        admin.request("PATCH", f"/api/v1/nodes/{name}/status", content_type="application/merge-patch+json", body={
            "status": {"capacity": {"cpu": cpu, "memory": "64Gi", "ephemeral-storage": "1Ti", "pods": "110"},
                       "allocatable": {"cpu": cpu, "memory": "64Gi", "ephemeral-storage": "1Ti", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "test"}]}})
        # The API server taints a new node not-ready until a node controller (none here) sees it Ready.
        admin.request("PATCH", f"/api/v1/nodes/{name}", content_type="application/merge-patch+json",
                      body={"spec": {"taints": None}})
    admin.create({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Topology",
                  "metadata": {"name": f"hosts-{namespace}"},
                  "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}})
    admin.create({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
                  "metadata": {"name": f"tas-{namespace}"},
                  "spec": {"nodeLabels": {TAS_LABEL: namespace}, "topologyName": f"hosts-{namespace}"}})
    admin.create({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
                  "metadata": {"name": f"tas-{namespace}"},
                  "spec": {
                      "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                      "resourceGroups": [{"coveredResources": ["cpu", "memory", "ephemeral-storage"], "flavors": [{
                          "name": f"tas-{namespace}", "resources": [
                              {"name": "cpu", "nominalQuota": "10"}, {"name": "memory", "nominalQuota": "64Gi"},
                              {"name": "ephemeral-storage", "nominalQuota": "1Ti"}]}]}]}})
    admin.create({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                  "metadata": {"name": "tas", "namespace": namespace}, "spec": {"clusterQueue": f"tas-{namespace}"}})


def test_a_packed_trial_reaches_kueue_as_one_domain_and_kueue_reserves_it_on_the_node_that_fits(
        admin, namespace, kueue, operator):
    # Only node "big" holds the whole trial (1 server + 2 workers of 100m): "small" has room for one pod.
    topology_aware_queue(admin, namespace, {f"small-{namespace}": "150m", f"big-{namespace}": "1"})
    operator(extra_args=("--kueue",), chart_values=KUEUE)
    admin.create(dtes.experiment("packed", namespace, scheduling={"queueName": "tas", "placement": {"ranks": "Pack"}}))

    # One read both judged and returned: a second read could see an admission the first did not.
    workload = wait_for("the Workload admitted", lambda: (lambda w: w if condition_of(w, "Admitted").get(
        "status") == "True" else None)(admin.get("Workload", namespace, "packed-0")), timeout=90)
    requests = {s["name"]: s.get("topologyRequest") for s in workload["spec"]["podSets"]}
    assert requests == {"ps": {"required": "kubernetes.io/hostname", "podSetGroupName": "trial"},
                        "worker": {"required": "kubernetes.io/hostname", "podSetGroupName": "trial"}}
    for assignment in workload["status"]["admission"]["podSetAssignments"]:
        domains = assignment["topologyAssignment"]["domains"]
        assert [d["values"] for d in domains] == [[f"big-{namespace}"]], assignment
    pods = wait_for("3 pods", lambda: (lambda found: len(found) == 3 and found)(admin.trial_pods(namespace, "packed")))
    assert all(p["spec"]["affinity"]["podAffinity"] for p in pods)
