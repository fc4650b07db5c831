"""Study 1 on two levels: the flat ring, the hierarchical ring, 1PS, 1PS with aggregation in the pod and P2P, each at
3 pods x 2 ranks (one pod to a node), against the two-level models.

Not a test (pytest collects only test_*.py): a study run on the 3-node test cluster with every node's NIC capped,
`make study-two-levels` (docs/studies.md#study-1-on-two-levels). One experiment sweeps the five architectures, one
trial at a time so that no two share a NIC, on Study 1 across nodes' model and quota (150m a rank). It prints, and
writes to bench/results/study1_two_levels.json, per trial: the measured median iteration, its phases, the bytes a
rank moved per iteration inside its pod and across nodes, and what the trial's own prediction said of every
architecture.
"""

from __future__ import annotations

import json
import os
import pathlib

import e2e_specs
from e2e_kube import describe_dte, log, phase, status, trials, wait_terminal
from study_across_nodes import DATA, MODEL

from ringleader.contract import keys

RESULTS = pathlib.Path(__file__).resolve().parents[2] / "bench" / "results" / "study1_two_levels.json"
NAME = "study1-levels"
RANK_CPU_MILLI = int(os.environ.get("RINGLEADER_STUDY_RANK_MILLICPU", "150"))
ARCHITECTURES = ["RingAllReduce", "HierarchicalRingAllReduce", "ParameterServer", "ParameterServerPodAggregation",
                 "PeerToPeer"]


def study_manifest(namespace: str) -> dict:
    return e2e_specs.experiment(
        NAME, namespace, model=MODEL, data=DATA,
        parameterServers={"replicas": 1, "resources": {"cpu": f"{RANK_CPU_MILLI}m", "memory": "768Mi"}},
        workers={"replicas": 6, "ranksPerPod": 2, "resources": {"cpu": f"{2 * RANK_CPU_MILLI}m", "memory": "1536Mi"}},
        placement={"ranks": "Spread", "mode": "Preferred"},
        sweep={"maxParallel": 1, "matrix": {"architecture": ARCHITECTURES}},
        runPolicy={"backoffLimit": 0, "activeDeadlineSeconds": 900, "cleanPodPolicy": "All"})


def row(trial: dict, summary: dict) -> dict:
    predicted = summary.get("prediction") or {}
    own = (predicted.get(keys.ARCHITECTURES) or {}).get(predicted.get(keys.PREDICTED_ARCHITECTURE)) or {}
    return {
        "trial": trial["name"], "architecture": predicted.get("architecture"), "workers": summary.get("workers"),
        "nodeCount": summary.get("nodeCount"),
        "bytesInsidePod": summary.get(keys.BYTES_INSIDE_POD_PER_ITERATION),
        "bytesAcrossNodes": summary.get(keys.BYTES_ACROSS_NODES_PER_ITERATION),
        "iterationP50Seconds": summary.get("iterationTimeP50Seconds"),
        "fractions": {k: summary.get(f"{k}Fraction") for k in ("compute", "comm", "wait")},
        "predictedSeconds": predicted.get("iterationSeconds"), "errorFraction": predicted.get("errorFraction"),
        "predictedCommSeconds": own.get(keys.COMM_SECONDS), "bound": own.get(keys.BOUND),
        "linkFit": predicted.get("fit"), "prediction": predicted, "usage": summary.get("usage"),
    }


def test_study_1_on_two_levels(kube, namespace, launcher, mlflow, nodes, report_on_failure):
    manifest = study_manifest(namespace)
    report_on_failure(NAME)
    launcher.submit(manifest, e2e_specs.cpu_cost(manifest))
    launcher.wait_admitted(NAME, 900)
    dte = wait_terminal(kube, namespace, NAME, 2400)
    log(f"{NAME}: {phase(dte)}")
    rows = []
    for trial in trials(dte):
        if not trial.get("runId"):
            continue
        summary = json.loads(mlflow.artifact_text(trial["runId"], "summary.json"))
        rows.append(row(trial, summary))
        log(f"{NAME}: {json.dumps({k: v for k, v in rows[-1].items() if k not in ('prediction', 'usage')})}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"nodes": nodes, "rankMilliCpu": RANK_CPU_MILLI, "phase": phase(dte),
                                   "status": status(dte).get("message"), "trials": rows}, indent=1) + "\n")
    log(f"{NAME}: wrote {RESULTS}")
    assert phase(dte) == "Succeeded", describe_dte(kube, namespace, NAME)
