"""A node lost mid-trial, on the multi-node cluster (E2E_NODES=3; docs/cluster.md, docs/operator.md):

- the trial names the lost node within 60 s of it going silent (the test cluster's node-monitor grace is 20 s),
  with its own reason, NodeLost, and fails (backoffLimit 0);
- no pod is left behind: the lost one is deleted with no grace period, since no kubelet is left to confirm;
- what the surviving rank recorded reaches MLflow, and its run is ended, not left RUNNING;
- the node coming back adds no run and no pod.

The operator and MLflow live on the first node (conftest pins them beside MLflow's local volume), the lost rank on
a node that holds neither them nor CoreDNS, so the survivors can still publish. Skipped on fewer than 3 nodes.
"""

from __future__ import annotations

import time


import e2e_specs
from e2e_kube import describe_dte, log, phase, status, trials, wait_for, wait_terminal

HOSTNAME = "kubernetes.io/hostname"
NAMED_WITHIN = 60  # seconds from the node's stop to a status naming it, as promised: the node controller marks its pods
# after its 20 s grace


def spare_node(kube, nodes: list[str], home: str, namespace: str) -> str:
    """A node that runs nothing but this test's trials: losing it takes no operator, MLflow or DNS with it."""
    busy = {p["spec"].get("nodeName") for p in kube.json("get", "pods", "-A")["items"]
            if p["metadata"]["namespace"] != namespace}
    spare = [n for n in nodes if n != home and n not in busy]
    assert spare, f"every node runs a pod of the cluster or the release: {busy}"
    return spare[0]


def probe_running(kube, namespace: str, node: str, image: str) -> None:
    """A pod pinned to `node`, waited for Running, then deleted: the node's kubelet is back, has synced its pods
    with the API server, and so has done whatever it would do with those it had before."""
    probe = f"probe-{node}"
    kube.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": probe, "namespace": namespace},
                "spec": {"nodeSelector": {HOSTNAME: node}, "restartPolicy": "Never",
                         "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "probe", "image": image, "imagePullPolicy": "Never",
                                         "command": ["sleep", "600"],
                                         "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}})
    try:
        wait_for(f"the probe pod on the returned node {node} to be Running",
                 lambda: ((kube.get("pod", namespace, probe) or {}).get("status") or {}).get("phase") == "Running",
                 180, interval=1, describe=lambda: kube.kubectl("describe", "pod", "-n", namespace, probe,
                                                                check=False).stdout[-1500:])
    finally:
        kube.kubectl("delete", "pod", "-n", namespace, probe, "--wait=false", check=False)


def test_a_node_lost_mid_trial_is_named_the_trial_fails_with_node_lost_and_the_survivors_records_reach_mlflow(
        kube, namespace, launcher, mlflow, mlflow_volume, nodes, image, report_on_failure):
    import harness  # conftest put cluster/ on sys.path

    home = mlflow_volume["node"]
    lost = spare_node(kube, nodes, home, namespace)
    name = "lostnode"
    # Two peers, one on the node to lose and one at home; a capped link keeps the trial going long enough.
    manifest = e2e_specs.experiment(
        name, namespace, architecture="PeerToPeer", network=e2e_specs.SLOW_NETWORK,
        model={"iterations": e2e_specs.SLOW_ITERATIONS * 2},
        workers={"replicas": 2, "groups": [
            {"name": "doomed", "replicas": 1, "nodeSelector": {HOSTNAME: lost}},
            {"name": "safe", "replicas": 1, "nodeSelector": {HOSTNAME: home}}]},
        runPolicy={"backoffLimit": 0, "cleanPodPolicy": "All"})
    report_on_failure(name)
    launcher.submit(manifest, e2e_specs.cpu_cost(manifest))
    launcher.wait_admitted(name, 900)

    def training():
        found = kube.dte(namespace, name)
        progress = (status(found).get("progress") or {}).get("iteration") or 0
        return progress >= 5 and progress
    before = wait_for(f"{name} to train a few iterations", training, 300, interval=1,
                      describe=lambda: describe_dte(kube, namespace, name))
    log(f"{name}: stopping node {lost} at iteration {before}")
    stopped = time.monotonic()
    harness.stop_node(lost)
    try:
        def named():
            found = trials(kube.dte(namespace, name))
            return bool(found) and found[0].get("reason") == "NodeLost" and found[0]
        trial = wait_for(f"{name} to name the lost node", named, NAMED_WITHIN, interval=1,
                         describe=lambda: describe_dte(kube, namespace, name))
        log(f"{name}: node named after {time.monotonic() - stopped:.1f} s: {trial['message']}")
        assert trial["message"].startswith(f"node {lost} stopped answering"), trial
        dte = wait_terminal(kube, namespace, name, 120)
        assert phase(dte) == "Failed" and trials(dte)[0]["reason"] == "NodeLost", describe_dte(kube, namespace, name)
        wait_for(f"the pods of {name} to be deleted", lambda: kube.experiment_pods(namespace, name) == [], 120)

        experiment_id = status(dte)["mlflow"]["experimentId"]
        trial_run = trials(dte)[0]["runId"]

        def ended_runs():
            ranks = mlflow.children(experiment_id, trial_run)
            return all(r.info.status != "RUNNING" for r in ranks) and ranks
        ranks = wait_for(f"the rank runs of {name} to end", ended_runs, 120, interval=2)
        survivor = next(r for r in ranks if r.data.tags.get("ringleader.node") == home)
        recorded = sum(len(mlflow.history(survivor.info.run_id, key))
                       for key in ("time/iteration_ms", "warmup/time/iteration_ms"))
        log(f"{name}: the surviving rank published {recorded} iterations (status showed {before} before the stop)")
        assert recorded >= before, (recorded, before)
        runs_before = {r.info.run_id for r in ranks}
    finally:
        harness.start_node(lost)  # returns once the node is Ready
    probe_running(kube, namespace, lost, image)  # what a returning kubelet would do (re-report its pods) is done
    assert kube.experiment_pods(namespace, name) == [], "the returning node brought pods back"
    assert {r.info.run_id for r in mlflow.children(experiment_id, trial_run)} == runs_before
