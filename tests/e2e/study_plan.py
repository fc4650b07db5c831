"""Plans checked on the test cluster: a profile from one worker and the cluster's measured network predict the
cluster's own across-node trials.

Not a test (pytest collects only test_*.py): a study run on the 3-node test cluster with every node's NIC capped,
`make study-plan` (docs/plan.md, "Checked on the test cluster"). Two experiments on Study 1 across nodes' model and
quota: one worker alone (its records are the profile, read as `ringleader predict --profile` reads a trial
directory), then 1PS, P2P and the ring at 2 and 3 workers, one pod to a node. The network is the link probe of the
2-worker ring (a trial's summary.json, as `--network` reads it). `ringleader predict --profile --network` plans 2 and
3 workers. Each run's inputs are kept in a directory of their own under bench/results/plan_nodes/ (docs/studies/
plan-nodes/ keeps those behind docs/plan.md); the study prints and writes to bench/results/plan_nodes.json every kept
run's trials, each measured median iteration beside its run's plan, and the band of them all (models/validation.fit).
"""

from __future__ import annotations

import datetime
import json
import pathlib
import statistics
import subprocess
import sys

import e2e_specs
from e2e_kube import describe_dte, log, phase, trials, wait_terminal
from study_across_nodes import DATA, MODEL, POD

from ringleader.contract import layout
from ringleader.models import validation
from ringleader.tracking import reading

RESULTS = pathlib.Path(__file__).resolve().parents[2] / "bench" / "results" / "plan_nodes.json"
ALONE, MEASURED = "plan-alone", "plan-measured"
LABELS = {"ParameterServer": "1ps", "PeerToPeer": "p2p", "RingAllReduce": "ring"}


def manifests(namespace: str) -> list[dict]:
    common = dict(model=MODEL, data=DATA, scheduling={"placement": {"ranks": "Spread", "mode": "Preferred"}},
                  parameterServers={"replicas": 1, "resources": dict(POD)},
                  runPolicy={"backoffLimit": 0, "activeDeadlineSeconds": 900, "cleanPodPolicy": "All"})
    alone = e2e_specs.experiment(ALONE, namespace, architecture="RingAllReduce",
                                 workers={"replicas": 1, "resources": dict(POD)}, **common)
    measured = e2e_specs.experiment(MEASURED, namespace, workers={"replicas": 2, "resources": dict(POD)},
                                    sweep={"maxParallel": 1, "matrix": {"architecture": list(LABELS),
                                                                        "workers": [2, 3]}}, **common)
    return [alone, measured]


def trial_directory(store, run_id: str, into: pathlib.Path) -> pathlib.Path:
    """A trial read back from MLflow, laid out as `ringleader run` writes its directory."""
    found = reading.trial_from_mlflow(store, run_id)
    assert found is not None, run_id
    into.mkdir(parents=True)
    (into / layout.TRIAL_FILE).write_text(found.trial.model_dump_json())
    for rank, records in found.records.items():
        rank_dir = layout.rank_dir(into, rank)
        rank_dir.mkdir()
        (rank_dir / layout.ITERATIONS_FILE).write_text("".join(json.dumps(r) + "\n" for r in records))
        if rank in found.layers:
            (rank_dir / layout.LAYERS_FILE).write_text(json.dumps(found.layers[rank]))
    return into


def test_plans_from_one_worker_and_the_probe_against_the_clusters_trials(kube, namespace, launcher, mlflow, nodes,
                                                                          report_on_failure, tmp_path):
    for manifest in manifests(namespace):
        report_on_failure(manifest["metadata"]["name"])
        launcher.submit(manifest, e2e_specs.cpu_cost(manifest))
    ended = {}
    for name in (ALONE, MEASURED):
        launcher.wait_admitted(name, 900)
        ended[name] = wait_terminal(kube, namespace, name, 2400)
        assert phase(ended[name]) == "Succeeded", describe_dte(kube, namespace, name)
    store = reading.lookup_store(mlflow.forward.url(), ALONE, "")
    # The inputs are kept beside the results, one directory per run, so that the plans can be made again from them
    # without a cluster, and pooled with the runs before.
    inputs = RESULTS.with_suffix("") / f"run-{datetime.datetime.now(datetime.timezone.utc):%Y%m%d-%H%M%S}"
    trial_directory(store, trials(ended[ALONE])[0]["runId"], inputs / "alone")
    measured = {}
    for trial in trials(ended[MEASURED]):
        summary = json.loads(mlflow.artifact_text(trial["runId"], "summary.json"))
        spec = json.loads(mlflow.artifact_text(trial["runId"], layout.TRIAL_FILE))["spec"]
        key = (LABELS[spec["architecture"]], summary["workers"])
        measured[key] = {"trial": trial["name"], "iterationP50Seconds": summary["iterationTimeP50Seconds"],
                         "nodeCount": summary.get("nodeCount"), "ownPrediction": (summary.get("prediction") or {})
                         .get("iterationSeconds")}
        if key == ("ring", 2):
            (inputs / "network.json").write_text(json.dumps(summary))
    (inputs / "measured.json").write_text(json.dumps({"nodes": nodes, "pod": POD, "trials": {
        f"{k[0]} {k[1]}": v for k, v in measured.items()}}, indent=1))
    write_results(inputs.parent, tmp_path / "plan")


def runs(kept: pathlib.Path) -> list[pathlib.Path]:
    """The runs kept under `kept` (each a directory with alone/, network.json, measured.json), in name order."""
    return sorted(path.parent for path in kept.glob("*/measured.json"))


def write_results(kept: pathlib.Path, save: pathlib.Path) -> None:
    """Plan every kept run again and write each measured trial beside its run's plan into RESULTS, with the band of
    all their errors."""
    found, rows = [], []
    for inputs in runs(kept):
        plan, measured, planned_rows = plan_run(inputs, save / inputs.name)
        found.append({"run": inputs.name, "nodes": measured["nodes"], "pod": measured["pod"],
                      "profile": plan["profile"], "network": plan["network"]})
        rows += planned_rows
    errors = [abs(row["errorFraction"]) for row in rows]
    band = {"within": validation.fit(errors), "median": round(statistics.median(errors), 3),
            "worst": validation.round_up(max(errors)), "pairs": len(errors)}
    log(f"plan: {len(rows)} pairs from {len(found)} runs, 9 in 10 within {band['within']}, median {band['median']}, "
        f"worst {band['worst']}")
    RESULTS.write_text(json.dumps({"runs": found, "band": band, "trials": rows}, indent=1) + "\n")
    log(f"plan: wrote {RESULTS}")


def plan_run(inputs: pathlib.Path, save: pathlib.Path) -> tuple[dict, dict, list[dict]]:
    """One kept run planned at 2 and 3 workers (`ringleader predict --profile --network`): the plan, the measured
    trials and the rows of each beside its plan."""
    planned = subprocess.run([sys.executable, "-m", "ringleader.cli", "predict", "--profile", str(inputs / "alone"),
                              "--network", str(inputs / "network.json"), "--workers", "2", "3", "--servers", "1",
                              "--save", str(save), "-o", "json"], capture_output=True, text=True, timeout=300)
    assert planned.returncode == 0, planned.stderr
    plan = json.loads(planned.stdout)
    measured = json.loads((inputs / "measured.json").read_text())
    rows = []
    for key, found in sorted(measured["trials"].items()):
        label, workers = key.split()
        [row] = [r for r in plan["architectures"][label] if r["workers"] == int(workers)]
        error = row["iterationSeconds"] / found["iterationP50Seconds"] - 1
        rows.append({"run": inputs.name, "architecture": label, "workers": int(workers), **found,
                     "plannedSeconds": row["iterationSeconds"], "plannedCommSeconds": row["commSeconds"],
                     "plannedComputeSeconds": row["computeSeconds"], "bound": row["bound"], "errorFraction": error})
        log(f"plan: {inputs.name} {label} at {workers}: measured {1000 * found['iterationP50Seconds']:.1f} ms, planned "
            f"{1000 * row['iterationSeconds']:.1f} ms ({100 * error:+.1f} %)")
    return plan, measured, rows


if __name__ == "__main__":  # the plans made again from kept runs (default bench/results/plan_nodes/), no cluster needed
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        write_results(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else RESULTS.with_suffix(""),
                      pathlib.Path(directory))
