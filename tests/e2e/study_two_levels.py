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

import os
import pathlib

import e2e_specs
from study_across_nodes import DATA, MODEL, run_study

from ringleader.contract import keys

RESULTS = pathlib.Path(__file__).resolve().parents[2] / "bench" / "results" / "study1_two_levels.json"
NAME = "study1-levels"
RANK_CPU_MILLI = int(os.environ.get("RINGLEADER_STUDY_RANK_MILLICPU", "150"))
ARCHITECTURES = ["RingAllReduce", "HierarchicalRingAllReduce", "ParameterServer", "ParameterServerPodAggregation",
                 "PeerToPeer"]


def study_manifest(namespace: str) -> dict:
    return e2e_specs.experiment(
        NAME, namespace, model=MODEL, data=DATA,
        # a server of 6 workers holds their pushes at once: 768Mi was OOMKilled
        parameterServers={"replicas": 1, "resources": {"cpu": f"{RANK_CPU_MILLI}m", "memory": "1536Mi"}},
        workers={"replicas": 6, "ranksPerPod": 2, "resources": {"cpu": f"{2 * RANK_CPU_MILLI}m", "memory": "1536Mi"}},
        scheduling={"placement": {"ranks": "Spread", "mode": "Preferred"}},
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
    run_study(kube, namespace, launcher, mlflow, report_on_failure, study_manifest(namespace), row, RESULTS,
              {"nodes": nodes, "rankMilliCpu": RANK_CPU_MILLI})
