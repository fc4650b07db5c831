"""Study 1 across nodes: 1PS, P2P and the ring at 2 and 3 workers, each spread over the nodes and packed on one.

Not a test (pytest collects only test_*.py): a study run on the 3-node test cluster with every node's NIC capped,
`make study-nodes` (docs/studies.md#study-1-across-nodes). One experiment sweeps architecture x workers x
placement, one trial at a time so that no two trials share a NIC; no `network.bandwidth`: the nodes' NICs are the
cap, as on real machines, and each trial's link probe measures what its ranks get. It prints, and writes to
bench/results/study1_nodes.json, per trial: where its ranks ran, the measured median iteration, its phases, the
share of bytes that crossed nodes, and what the trial's own prediction (the runtime's, from its probe) said.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import subprocess

import e2e_specs
from e2e_kube import describe_dte, log, phase, status, trials, wait_terminal

RESULTS = pathlib.Path(__file__).resolve().parents[2] / "bench" / "results" / "study1_nodes.json"
NAME = "study1-nodes"
# 1.9M parameters (7.7 MB of gradients): at 500 Mbit/s a worker's push takes ~0.12 s, against tens of ms of compute.
MODEL = {"name": "mlp", "batchSize": 4, "iterations": 30, "warmupIterations": 5,
         "optimizer": {"learningRate": 0.05}}
DATA = {"synthetic": {"samples": 64, "imageSize": 50, "numClasses": 4}}
# 4 ranks fit one node, so a packed 1PS at 3 workers can be packed; RINGLEADER_STUDY_POD_CPU for another quota.
POD = {"cpu": os.environ.get("RINGLEADER_STUDY_POD_CPU", "150m"), "memory": "768Mi"}


def study_manifest(namespace: str) -> dict:
    return e2e_specs.experiment(
        NAME, namespace, model=MODEL, data=DATA,
        parameterServers={"replicas": 1, "resources": dict(POD)}, workers={"replicas": 2, "resources": dict(POD)},
        sweep={"maxParallel": 1, "matrix": {
            "architecture": ["ParameterServer", "PeerToPeer", "RingAllReduce"], "workers": [2, 3],
            "placement": [{"ranks": "Spread", "mode": "Preferred"}, {"ranks": "Pack", "mode": "Preferred"}]}},
        runPolicy={"backoffLimit": 0, "activeDeadlineSeconds": 900, "cleanPodPolicy": "All"})


def row(trial: dict, summary: dict) -> dict:
    predicted = summary.get("prediction") or {}
    return {
        "trial": trial["name"], "architecture": predicted.get("architecture"), "workers": summary.get("workers"),
        "placement": (summary.get("placement") or {}).get("requested"),
        "ranksPerNode": (summary.get("placement") or {}).get("ranksPerNode"),
        "nodeCount": summary.get("nodeCount"), "crossNodeByteShare": summary.get("crossNodeByteShare"),
        "iterationP50Seconds": summary.get("iterationTimeP50Seconds"),
        "fractions": {k: summary.get(f"{k}Fraction") for k in ("compute", "comm", "wait")},
        "predictedSeconds": predicted.get("iterationSeconds"), "errorFraction": predicted.get("errorFraction"),
        "linkKind": predicted.get("linkKind"), "linkFit": predicted.get("fit"),
        "cannotPredict": predicted.get("cannotPredict"),
        "prediction": predicted,  # every architecture's, with the host and wire terms: to compare predictions later
        "usage": summary.get("usage"),
    }


def run_study(kube, namespace, launcher, mlflow, report_on_failure, manifest: dict, row_of, results: pathlib.Path,
              about: dict) -> None:
    """Submit the study's experiment, wait for its end, and write each trial's row (`row_of(trial, summary)`) into
    `results` beside `about`; its phase is asserted last, so that a failed trial's rows are written all the same."""
    name = manifest["metadata"]["name"]
    report_on_failure(name)
    launcher.submit(manifest, e2e_specs.cpu_cost(manifest))
    launcher.wait_admitted(name, 900)
    dte = wait_terminal(kube, namespace, name, 2400)
    log(f"{name}: {phase(dte)}")
    rows = []
    for trial in trials(dte):
        if not trial.get("runId"):
            continue
        try:
            summary = json.loads(mlflow.artifact_text(trial["runId"], "summary.json"))
        except Exception as error:  # noqa: BLE001 - a failed trial has no summary: its row says so
            rows.append({"trial": trial["name"], "reason": trial.get("reason"), "noSummary": str(error)[:200]})
            continue
        rows.append(row_of(trial, summary))
        log(f"{name}: {json.dumps({k: v for k, v in rows[-1].items() if k not in ('prediction', 'usage')})}")
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps({**about, "phase": phase(dte), "status": status(dte).get("message"),
                                   "trials": rows}, indent=1) + "\n")
    log(f"{name}: wrote {results}")
    assert phase(dte) == "Succeeded", describe_dte(kube, namespace, name)


def provenance() -> dict:
    """Which code predicted a study's trials, and when: its predictions are the pods' own, so a band fitted on them
    (models/validation.py) holds for that code until the study is run again."""
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, check=False,
                            cwd=RESULTS.parents[2]).stdout.strip()
    return {"commit": commit or None, "recorded": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%dT%H:%MZ}",
            "podCpu": POD["cpu"]}


def test_study_1_across_nodes(kube, namespace, launcher, mlflow, nodes, report_on_failure):
    run_study(kube, namespace, launcher, mlflow, report_on_failure, study_manifest(namespace), row, RESULTS,
              {"nodes": nodes, **provenance()})
