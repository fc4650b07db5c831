"""Placement on the multi-node cluster (E2E_NODES=3; docs/cluster.md), against what docs/api.md promises.

- a Spread trial's ranks run on distinct nodes (the pods' spec.nodeName, read from the API), and each rank's
  MLflow run names the node it ran on;
- a Pack trial's ranks share one node;
- servers Apart: no worker on the parameter server's node;
- a Spread of more ranks than there are nodes waits with reason WaitingForPlacement (a Warning Event naming the
  placement), then fails at its startup deadline with reason PlacementUnsatisfiable, its pods deleted.

Skipped on a cluster of fewer than 3 schedulable nodes (the single-node harness cluster, E2E_NODES unset).
"""

from __future__ import annotations


import e2e_specs
from e2e_kube import log, phase, status, trials, wait_for, wait_terminal, describe_dte

ADMIT_TIMEOUT = 900
RUN_TIMEOUT = 600


def run_to_end(kube, launcher, namespace, manifest, report_on_failure) -> tuple[dict, dict[str, str]]:
    """Submit, wait for the end; return the experiment and each pod's node (pods are kept: cleanPodPolicy None)."""
    name = manifest["metadata"]["name"]
    report_on_failure(name)
    launcher.submit(manifest, e2e_specs.cpu_cost(manifest))
    launcher.wait_admitted(name, ADMIT_TIMEOUT)
    dte = wait_terminal(kube, namespace, name, RUN_TIMEOUT)
    assert phase(dte) == "Succeeded", describe_dte(kube, namespace, name)
    placed = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in kube.experiment_pods(namespace, name)}
    log(f"{name}: pods on nodes {placed}")
    return dte, placed


def placed(name: str, placement: dict, namespace: str, **spec) -> dict:
    return e2e_specs.experiment(name, namespace, scheduling={"placement": placement},
                                runPolicy={"cleanPodPolicy": "None"}, **spec)


def rank_nodes(mlflow, dte: dict) -> dict[int, str]:
    """Each rank's node, as its MLflow rank run records it (tag ringleader.node)."""
    experiment_id = status(dte)["mlflow"]["experimentId"]
    ranks = mlflow.children(experiment_id, trials(dte)[0]["runId"])
    return {int(r.data.tags["ringleader.rank"]): r.data.tags.get("ringleader.node", "") for r in ranks}


def test_a_spread_trial_runs_each_rank_on_its_own_node_and_its_runs_say_which(kube, namespace, launcher, mlflow,
                                                                              nodes, report_on_failure):
    manifest = placed("spread", {"ranks": "Spread"}, namespace, architecture="ParameterServer")
    dte, on = run_to_end(kube, launcher, namespace, manifest, report_on_failure)
    assert len(on) == 3 and len(set(on.values())) == 3 and set(on.values()) <= set(nodes), on
    recorded = rank_nodes(mlflow, dte)
    assert len(recorded) == 3 and sorted(recorded.values()) == sorted(on.values()), (recorded, on)
    by_rank = {int(p["metadata"]["labels"]["ringleader.dev/rank"]): p["spec"]["nodeName"]
               for p in kube.experiment_pods(namespace, "spread")}
    assert recorded == by_rank, (recorded, by_rank)


def test_a_pack_trial_runs_its_ranks_on_one_node(kube, namespace, launcher, mlflow, nodes, report_on_failure):
    manifest = placed("pack", {"ranks": "Pack"}, namespace, architecture="RingAllReduce")
    dte, on = run_to_end(kube, launcher, namespace, manifest, report_on_failure)
    assert len(on) == 2 and len(set(on.values())) == 1, on
    assert set(rank_nodes(mlflow, dte).values()) == set(on.values())


def test_servers_apart_keep_every_worker_off_the_parameter_servers_node(kube, namespace, launcher, nodes,
                                                                         report_on_failure):
    manifest = placed("apart", {"servers": "Apart"}, namespace, architecture="ParameterServer")
    _, on = run_to_end(kube, launcher, namespace, manifest, report_on_failure)
    roles = {p["metadata"]["name"]: p["metadata"]["labels"]["ringleader.dev/role"]
             for p in kube.experiment_pods(namespace, "apart")}
    servers = {node for pod, node in on.items() if roles[pod] == "ps"}
    workers = {node for pod, node in on.items() if roles[pod] == "worker"}
    assert len(servers) == 1 and len(workers) >= 1 and len(on) == 3, (on, roles)
    assert not servers & workers, on


def test_a_spread_of_more_ranks_than_nodes_waits_for_placement_then_fails_at_its_startup_deadline(
        kube, namespace, launcher, nodes, report_on_failure):
    name, deadline = "overspread", 45
    manifest = e2e_specs.experiment(name, namespace, architecture="RingAllReduce",
                                    workers={"replicas": len(nodes) + 1, "resources": dict(e2e_specs.POD)},
                                    scheduling={"placement": {"ranks": "Spread"}},
                                    runPolicy={"startupDeadlineSeconds": deadline})
    report_on_failure(name)
    launcher.submit(manifest, e2e_specs.cpu_cost(manifest))
    launcher.wait_admitted(name, ADMIT_TIMEOUT)

    def waiting():
        found = trials(kube.dte(namespace, name))
        return bool(found) and found[0].get("reason") == "WaitingForPlacement" and found[0]
    trial = wait_for(f"{name} to wait for its placement", waiting, 120, interval=1,
                     describe=lambda: describe_dte(kube, namespace, name))
    assert "placement Spread" in trial["message"], trial
    warnings = [e for e in kube.events(namespace, name) if e["reason"] == "WaitingForPlacement"]
    assert warnings and warnings[0]["type"] == "Warning", warnings
    dte = wait_terminal(kube, namespace, name, deadline + 120)
    assert phase(dte) == "Failed", describe_dte(kube, namespace, name)
    trial = trials(dte)[0]
    assert trial["reason"] == "PlacementUnsatisfiable", trial
    assert trial["message"].startswith(f"placement Spread by kubernetes.io/hostname was not met within "
                                       f"startupDeadlineSeconds={deadline}"), trial
    wait_for(f"the pods of {name} to be deleted", lambda: kube.experiment_pods(namespace, name) == [], 120)
