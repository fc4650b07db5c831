"""Placement on the multi-node cluster (E2E_NODES=3; docs/cluster.md), against what docs/api.md promises.

- a Spread trial's ranks run on distinct nodes (the pods' spec.nodeName, read from the API), and each rank's
  MLflow run names the node it ran on;
- a Pack trial's ranks share one node;
- servers Apart: no worker on the parameter server's node;
- a Spread of more ranks than there are nodes waits with reason WaitingForPlacement (a Warning Event naming the
  placement), then fails at its startup deadline with reason PlacementUnsatisfiable, its pods deleted;
- a hierarchical ring of 3 pods x 2 ranks, one pod to a node, sends across nodes what its model says, and the flat
  ring of the same shape more, by the model's ratio.

Skipped on a cluster of fewer than 3 schedulable nodes (the single-node harness cluster, E2E_NODES unset).
"""

from __future__ import annotations

import json
import statistics

import pytest

import e2e_specs
from e2e_kube import log, phase, status, trials, wait_for, wait_terminal, describe_dte
from ringleader.models import cross_node
from ringleader.api import experiment as experiment_
from ringleader.api import trial as trial_
from ringleader.contract import keys, levels

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


def test_a_hierarchical_ring_of_three_pods_of_two_sends_across_nodes_what_its_model_says_less_than_the_flat_ring(
        kube, namespace, launcher, mlflow, nodes, report_on_failure):
    """3 pods x 2 ranks, one pod to a node: 6 rank runs naming their node and local rank; across nodes each rank sends
    per iteration what models/cross_node.py's model says (within 10 %), the flat ring (kP-1)/(k(P-1)) = 5/4 times the
    hierarchical ring's."""
    name = "levels"
    manifest = placed(name, {"ranks": "Spread"}, namespace,
                      workers={"replicas": 6, "ranksPerPod": 2, "resources": {"cpu": "400m", "memory": "1536Mi"}},
                      model={"iterations": 12, "warmupIterations": 2},
                      sweep={"matrix": {"architecture": ["RingAllReduce", "HierarchicalRingAllReduce"]}})
    dte, on = run_to_end(kube, launcher, namespace, manifest, report_on_failure)
    assert len(on) == 6 and all(len({node for pod, node in on.items() if pod.startswith(f"{name}-{i}-")}) == 3
                                for i in range(2)), on
    expansion = trial_.expand(experiment_.DistributedTrainingExperiment.model_validate(manifest))
    experiment_id = status(dte)["mlflow"]["experimentId"]
    across = {}
    for found, trial in zip(trials(dte), expansion.trials):
        architecture = trial.spec.architecture.value
        runs = {int(r.data.tags["ringleader.rank"]): r.data.tags
                for r in mlflow.children(experiment_id, found["runId"])}
        assert sorted(runs) == list(range(6)), (architecture, sorted(runs))
        assert all(tags.get("ringleader.node") in nodes and tags.get("ringleader.localRank") == str(rank % 2)
                   for rank, tags in runs.items()), (architecture, runs)
        summary = json.loads(mlflow.artifact_text(found["runId"], "summary.json"))
        layers = json.loads(mlflow.artifact_text(found["runId"], "layers/rank-0.layers.json"))
        model_bytes = sum(p["bytes"] for p in layers["parameters"])
        where = levels.Levels.of(trial, {rank: tags["ringleader.node"] for rank, tags in runs.items()})
        modelled = cross_node.modelled_bytes(trial, where, model_bytes)
        expected = statistics.fmean(modelled[rank][levels.NETWORK] for rank in range(6))
        across[architecture] = summary[keys.BYTES_ACROSS_NODES_PER_ITERATION]
        log(f"{name} {architecture}: across nodes {across[architecture]:.0f} B per rank-iteration, "
            f"model {expected:.0f}")
        assert across[architecture] == pytest.approx(expected, rel=0.10), architecture
    assert across["RingAllReduce"] / across["HierarchicalRingAllReduce"] == pytest.approx(5 / 4, rel=0.10), across
