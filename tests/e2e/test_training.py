"""Real training on a real cluster: each architecture and paradigm reaches Succeeded, cleans up, and is in MLflow.

The experiments (e2e_specs.fleet) are submitted when the session starts, as the node's CPU allows,
and run while the quicker tests do; each test here waits for its own and checks it:
  - status: Succeeded=True (TrialsSucceeded), phase Succeeded, progress at its total, a summary
    with throughput > 0 and fractions in [0, 1] adding up to at most 1, per-trial status;
  - pods: as its cleanPodPolicy says (Running, All, None; parameter servers stopped whatever it says);
  - events: one per milestone and trial transition;
  - MLflow (the in-cluster server, through a port-forward on 127.0.0.1): the parent run, a run per
    trial, a nested run per rank, each FINISHED, with time/iteration logged at every iteration; the sweep
    run's provenance names the nodes its ranks ran on and the versions in its pods.
"""

from __future__ import annotations

import datetime
import re

import pytest

import e2e_checks as checks
from e2e_kube import condition, log, status, wait_for, wait_terminal

# Queueing included: the fleet shares the node with the fault tests' experiments.
FINISH_TIMEOUT = 1200


def finished(kube, namespace, fleet, name, report_on_failure):
    report_on_failure(name)
    return fleet[name], wait_terminal(kube, namespace, name, FINISH_TIMEOUT)


@pytest.mark.parametrize("name", ["ps-bsp", "p2p-ssp", "ring-bsp"])
def test_an_experiment_trains_to_success_with_its_summary_pods_and_mlflow_runs(
        kube, namespace, fleet, mlflow, report_on_failure, name):
    manifest, dte = finished(kube, namespace, fleet, name, report_on_failure)
    checks.assert_succeeded(dte, manifest)
    checks.assert_events(kube, namespace, name, "ExperimentCreated", "PodsCreated", "WorkersSucceeded",
                         "TrialsSucceeded")
    checks.assert_pods_cleaned(kube, namespace, manifest)
    counts = checks.assert_mlflow_runs(mlflow, dte, manifest)
    log(f"{name}: throughput {dte['status']['summary']['throughput']:.1f} samples/s, rank runs {counts}")


def test_dssp_with_a_straggler_group_names_the_straggler(kube, namespace, fleet, mlflow, report_on_failure):
    manifest, dte = finished(kube, namespace, fleet, "ps-dssp-straggler", report_on_failure)
    checks.assert_succeeded(dte, manifest)
    pods = checks.assert_pods_cleaned(kube, namespace, manifest)
    groups = {p["metadata"]["labels"].get("ringleader.dev/worker-group"): p for p in pods
              if p["metadata"]["labels"]["ringleader.dev/role"] == "worker"}
    assert set(groups) == {"normal", "straggler"}, sorted(groups)
    straggler_rank = int(groups["straggler"]["metadata"]["labels"]["ringleader.dev/rank"])
    # slowdownPercent 300 triples the straggler's compute: it must be the one the summary names.
    assert dte["status"]["summary"]["stragglerRank"] == straggler_rank, (dte["status"]["summary"], straggler_rank)
    checks.assert_mlflow_runs(mlflow, dte, manifest)


def test_a_sweep_runs_its_trials_one_at_a_time_and_records_each(kube, namespace, fleet, mlflow, report_on_failure):
    manifest, dte = finished(kube, namespace, fleet, "sweep", report_on_failure)
    checks.assert_succeeded(dte, manifest)
    first, second = dte["status"]["trials"]
    assert (first["parameters"] == {"architecture": "PeerToPeer"}
            and second["parameters"] == {"architecture": "RingAllReduce"})
    # maxParallel 1: the second trial started only once the first had ended.
    started = datetime.datetime.fromisoformat(second["startTime"].replace("Z", "+00:00"))
    ended = datetime.datetime.fromisoformat(first["completionTime"].replace("Z", "+00:00"))
    assert started >= ended, (first, second)
    checks.assert_pods_cleaned(kube, namespace, manifest)
    counts = checks.assert_mlflow_runs(mlflow, dte, manifest)
    assert counts == {"sweep-0": 2, "sweep-1": 2}, counts
    # Status says Succeeded before the operator makes the report (the same pass, seconds later) and links it.
    def linked() -> dict | None:
        found = kube.dte(namespace, "sweep")
        return found if status(found)["mlflow"].get("reportUrl") else None

    reported = wait_for("the sweep's report linked in status", linked, 60)
    checks.assert_report_attached(mlflow, reported)
    checks.assert_provenance(mlflow, reported)


def columns(output: str) -> list[dict[str, str]]:
    """Rows of `kubectl get` as {header: value}, cut at the header's column positions (values may hold spaces)."""
    lines = [line for line in output.splitlines() if line.strip()]
    header = lines[0]
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    names = header.split()
    rows = []
    for line in lines[1:]:
        cells = [line[a:b].strip() for a, b in zip(starts, starts[1:] + [len(line) + 1])]
        rows.append(dict(zip(names, cells)))
    return rows


def test_kubectl_get_shows_architecture_paradigm_workers_phase_progress_throughput(kube, namespace, fleet):
    for name in fleet:
        wait_terminal(kube, namespace, name, FINISH_TIMEOUT)
    output = kube.kubectl("get", "dte", "-n", namespace).stdout
    log("kubectl get dte:\n" + output)
    assert output.splitlines()[0].split() == ["NAME", "ARCHITECTURE", "PARADIGM", "WORKERS", "PHASE", "PROGRESS",
                                              "BEST", "THROUGHPUT", "ETA", "AGE"]
    rows = {row["NAME"]: row for row in columns(output)}
    expected = {
        "ps-bsp": ("ParameterServer", "BSP", "24/24"),
        "p2p-ssp": ("PeerToPeer", "SSP", "24/24"),
        "ring-bsp": ("RingAllReduce", "BSP", "24/24"),
        "ps-dssp-straggler": ("ParameterServer", "DSSP", "24/24"),
        "sweep": ("PeerToPeer,RingAllReduce", "BSP", "2/2 trials, 24/24"),  # what it compares, not its default
    }
    for name, (architecture, paradigm, progress) in expected.items():
        row = rows[name]
        assert (row["ARCHITECTURE"], row["PARADIGM"], row["WORKERS"], row["PHASE"], row["PROGRESS"]) == (
            architecture, paradigm, "2", "Succeeded", progress), row
        assert float(row["THROUGHPUT"]) > 0, row
        if name != "sweep":
            assert row["BEST"] == "", row  # one trial: nothing to compare (kubectl prints nothing for it)
        assert re.fullmatch(r"\d+(s|m\d*s?|h\d*m?)", row["AGE"]), row


def test_a_sweeps_row_names_what_it_compares_and_its_best_trial(kube, namespace, fleet, report_on_failure):
    manifest, dte = finished(kube, namespace, fleet, "sweep", report_on_failure)
    by_throughput = {t["parameters"]["architecture"]: t["summary"]["throughput"] for t in dte["status"]["trials"]}
    fastest = max(by_throughput, key=by_throughput.get)
    assert dte["status"]["best"]["text"] == fastest and dte["status"]["summary"]["throughput"] == by_throughput[fastest]
    row = next(r for r in columns(kube.kubectl("get", "dte", "-n", namespace, "sweep").stdout) if r["NAME"] == "sweep")
    log(f"sweep: {row} (throughputs {by_throughput})")
    assert (row["ARCHITECTURE"], row["BEST"], float(row["THROUGHPUT"])) == (
        "PeerToPeer,RingAllReduce", fastest, by_throughput[fastest]), row
    assert condition(dte, "Succeeded")["message"].startswith(f"all 2 trials succeeded; best: {fastest} "), dte["status"]


def test_kubectl_explain_documents_the_fields(kube, release):
    workers = kube.kubectl("explain", "dte.spec.workers").stdout
    for text in ("FIELD: workers <Object>", "workers of the job. Default two homogeneous workers.",
                 "replicas <integer> replicas is the number of workers (N): ranks, not pods. Default 2.",
                 "ranksPerPod <integer> ranksPerPod is how many worker ranks each worker pod runs (k)",
                 "groups <[]Object> groups split the workers into heterogeneous groups",
                 "resources <Object> resources of each worker pod"):
        assert text in " ".join(workers.split()), f"{text!r} not in:\n{workers}"
    groups = " ".join(kube.kubectl("explain", "dte.spec.workers.groups").stdout.split())
    assert "slowdownPercent" in groups and "stretches this group's compute to emulate stragglers" in groups, groups
