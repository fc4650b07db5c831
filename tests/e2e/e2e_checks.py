"""What the e2e tests ask of a finished experiment: status, pods, events, MLflow runs."""

from __future__ import annotations

import math
import re

import e2e_specs
from e2e_kube import Kube, condition, is_true, phase, status, trials, wait_for

from ringleader.tracking import schema

WORKER_ROLE = "worker"


def assert_summary(summary: dict | None, where: str) -> None:
    assert summary, f"{where}: no summary"
    assert summary.get("throughput", 0) > 0, f"{where}: throughput {summary.get('throughput')}"
    p50, p95 = summary.get("iterationTimeP50Seconds"), summary.get("iterationTimeP95Seconds")
    assert p50 is not None and p50 > 0 and p95 is not None and p95 >= p50, f"{where}: p50 {p50}, p95 {p95}"
    fractions = [summary.get(k) for k in ("computeFraction", "commFraction", "waitFraction")]
    assert all(f is not None and 0 <= f <= 1 for f in fractions), f"{where}: fractions {fractions}"
    assert 0 < sum(fractions) <= 1.0 + 1e-6, f"{where}: fractions add up to {sum(fractions)}"
    assert summary.get("stragglerRank") is not None, f"{where}: no stragglerRank"


def assert_succeeded(dte: dict, manifest: dict) -> None:
    """Conditions, phase, progress, per-trial status and summaries of a successful experiment."""
    name = manifest["metadata"]["name"]
    expected_trials = e2e_specs.trial_specs(manifest)
    iterations = manifest["spec"]["model"]["iterations"]
    found = status(dte)
    assert phase(dte) == "Succeeded", f"{name}: phase {phase(dte)}: {found.get('conditions')}"
    succeeded = condition(dte, "Succeeded")
    assert succeeded.get("status") == "True" and succeeded.get("reason") == "TrialsSucceeded", succeeded
    assert succeeded.get("observedGeneration") == dte["metadata"]["generation"], succeeded
    assert (not is_true(dte, "Failed") and not is_true(dte, "Running")
            and not is_true(dte, "Restarting")), found["conditions"]
    assert is_true(dte, "Created"), found["conditions"]
    assert found.get("startTime") and found.get("completionTime"), found
    progress = found["progress"]
    assert progress == {"iteration": iterations, "iterations": iterations, "trialsCompleted": len(expected_trials),
                        "trialsQueued": 0, "trials": len(expected_trials)}, progress
    text = f"{iterations}/{iterations}"
    assert found["progressText"] == (text if len(expected_trials) == 1
                                     else f"{len(expected_trials)}/{len(expected_trials)} trials, {text}")
    assert_summary(found.get("summary"), f"{name} status.summary")
    assert len(trials(dte)) == len(expected_trials), trials(dte)
    for trial, expected in zip(trials(dte), expected_trials):
        assert trial["phase"] == "Succeeded" and trial["reason"] == "WorkersSucceeded", trial
        assert trial["message"].startswith(f"all {expected['workers']} workers succeeded: "), trial["message"]
        assert trial.get("restarts", 0) == 0, trial
        assert trial.get("runId"), trial
        assert_summary(trial.get("summary"), f"{name} trial {trial['name']}")
    mlflow_status = found.get("mlflow") or {}
    assert mlflow_status.get("experimentId") and mlflow_status.get("runId"), mlflow_status


def assert_events(kube: Kube, namespace: str, name: str, *reasons: str) -> None:
    seen = {e["reason"] for e in kube.events(namespace, name)}
    missing = set(reasons) - seen
    assert not missing, f"{name}: events {sorted(seen)} lack {sorted(missing)}"


def assert_pods_cleaned(kube: Kube, namespace: str, manifest: dict) -> list[dict]:
    """The pods left after clean-up, as cleanPodPolicy says; returns them.

    All: none. Running (default) and None: every worker pod, Succeeded (they finished before the trial
    did). Every policy: nothing left running (parameter servers are stopped when the workers are done)."""
    name = manifest["metadata"]["name"]
    policy = manifest["spec"].get("runPolicy", {}).get("cleanPodPolicy", "Running")

    def settled():
        pods = kube.experiment_pods(namespace, name)
        if any(p["status"].get("phase") not in ("Succeeded", "Failed") or p["metadata"].get("deletionTimestamp")
               for p in pods):
            return None
        if policy == "All" and pods:
            return None
        return pods or True

    pods = wait_for(f"{name}'s pods to be cleaned up (cleanPodPolicy {policy})", settled, 120,
                    describe=lambda: str([(p["metadata"]["name"], p["status"].get("phase"))
                                          for p in kube.experiment_pods(namespace, name)]))
    if pods is True:
        pods = []
    if policy == "All":
        assert pods == [], [p["metadata"]["name"] for p in pods]
        return []
    workers = [p for p in pods if p["metadata"]["labels"]["ringleader.dev/role"] == WORKER_ROLE]
    trial_count = len(e2e_specs.trial_specs(manifest))
    expected = sum(t["workers"] for t in e2e_specs.trial_specs(manifest))
    assert len(workers) == expected, (f"{name}: worker pods {[p['metadata']['name'] for p in workers]} (policy "
                                      f"{policy}, {trial_count} trials)")
    assert all(p["status"]["phase"] == "Succeeded" for p in workers), [(p["metadata"]["name"], p["status"]["phase"])
                                                                       for p in workers]
    return pods


def assert_mlflow_runs(mlflow, dte: dict, manifest: dict) -> dict:
    """The parent run, one run per trial under it, one nested run per rank with step-indexed metrics.

    Every run FINISHED; each worker rank's `time/iteration_ms` history, with its warm-up steps under
    `warmup/`, has one point per iteration; the names and artifacts docs/metrics.md lists are there."""
    iterations = manifest["spec"]["model"]["iterations"]
    found = status(dte)
    experiment_id, parent = found["mlflow"]["experimentId"], found["mlflow"]["runId"]
    wait_for(f"MLflow parent run of {manifest['metadata']['name']} to be FINISHED",
             lambda: mlflow.status(parent) == "FINISHED", 60, describe=lambda: mlflow.status(parent))
    kind = mlflow.client().get_experiment(experiment_id).tags.get("mlflow.experimentKind")
    assert kind == "custom_model_development", f"experiment {experiment_id} kind {kind!r}"
    parent_metrics = mlflow.run(parent).data.metrics
    trial_runs = {r.info.run_id: r for r in mlflow.children(experiment_id, parent)}
    expected_runs = {t["runId"] for t in trials(dte)}
    assert set(trial_runs) == expected_runs, (f"trial runs under the parent {sorted(trial_runs)} != status "
                                              f"{sorted(expected_runs)}")
    # The sweep run compares every trial, each under what it varies (its trial name when it is alone).
    compared = [value for key, value in parent_metrics.items() if key.startswith("throughput_samples_per_s/")]
    assert len(compared) == len(trials(dte)) and all(value > 0 for value in compared), sorted(parent_metrics)
    if len(trials(dte)) == 1:
        assert f"throughput_samples_per_s/{trials(dte)[0]['name']}" in parent_metrics, sorted(parent_metrics)
    counts = {}
    for trial, shape in zip(trials(dte), e2e_specs.trial_specs(manifest)):
        run = trial_runs[trial["runId"]]
        # MLflow was ready before any experiment was applied: every trial's run exists before its pods start,
        # so the pods log into it (else the operator logs only the status summary, and the records are lost).
        assert trial.get("runSummarySource") == "Ranks", (
            f"{trial['name']}: its run was made after its pods started (runSummarySource "
            f"{trial.get('runSummarySource')!r}); the operator's log says why MLflow did not answer at the start")
        assert run.info.status == "FINISHED", (trial["name"], run.info.status)
        assert run.data.tags.get("ringleader.kind") == "trial", run.data.tags
        assert run.info.run_name.startswith(f"{trial['name']} ({shape['architecture']}, "), run.info.run_name
        assert run.data.metrics.get("iteration_p50_ms", 0) > 0, (trial["name"], sorted(run.data.metrics))
        # Measured from the pods' own interface counters (eth0), not computed from what the ranks counted sending.
        assert run.data.metrics.get("network_link_tx_mean_bytes_per_s", 0) > 0, (trial["name"],
                                                                                 sorted(run.data.metrics))
        trial_artifacts = {a.path for a in mlflow.client().list_artifacts(run.info.run_id)}
        assert "summary.json" in trial_artifacts, (trial["name"], sorted(trial_artifacts))
        ranks = mlflow.children(experiment_id, trial["runId"])
        expected_ranks = e2e_specs.ranks(shape["architecture"], shape["workers"], shape["ps"])
        assert len(ranks) == expected_ranks, f"{trial['name']}: {len(ranks)} rank runs, expected {expected_ranks}"
        assert {r.data.tags.get("ringleader.kind") for r in ranks} == {"rank"}
        # Each rank recorded the node it ran on (the downward API), and the trial how many nodes that made.
        nodes = {r.data.tags.get("ringleader.node") for r in ranks}
        assert None not in nodes and "" not in nodes, (trial["name"], [r.data.tags for r in ranks])
        assert run.data.metrics.get("placement_nodes") == len(nodes), (trial["name"], nodes, sorted(run.data.metrics))
        assert sorted(int(r.data.tags["ringleader.rank"]) for r in ranks) == list(range(expected_ranks))
        workers = [r for r in ranks if r.data.tags.get("ringleader.role") == WORKER_ROLE]
        assert len(workers) == shape["workers"], [r.data.tags for r in ranks]
        for rank in ranks:
            number = rank.data.tags.get("ringleader.rank")
            assert rank.info.status == "FINISHED", (trial["name"], number, rank.info.status)
            assert rank.info.run_name == f"{trial['name']}/rank-{number} ({rank.data.tags['ringleader.role']})"
            records = [a.path for a in mlflow.client().list_artifacts(rank.info.run_id, "records")]
            assert records == ["records/iterations.jsonl"], (trial["name"], number, records)
        for rank in workers:
            history = (mlflow.history(rank.info.run_id, "time/iteration_ms")
                       + mlflow.history(rank.info.run_id, "warmup/time/iteration_ms"))
            steps = sorted(point.step for point in history)
            assert len(history) == iterations and len(set(steps)) == iterations, (
                f"{trial['name']} rank {rank.data.tags['ringleader.rank']}: time/iteration_ms steps {steps}")
            assert all(point.value > 0 and math.isfinite(point.value) for point in history)
        counts[trial["name"]] = len(ranks)
    return counts


def assert_report_attached(mlflow, dte: dict) -> None:
    """The sweep's report is on the parent run, self-contained, naming every trial, and status links it."""
    found = status(dte)
    parent = found["mlflow"]["runId"]
    link = found["mlflow"].get("reportUrl") or ""
    assert f"/runs/{parent}/artifacts/report/report.html?" in link, found["mlflow"]
    page = mlflow.artifact_text(parent, "report/report.html")
    assert "data:image/png;base64," in page, page[:500]
    # Self-contained: nothing loaded from the network (a src, a stylesheet); links to the runs' MLflow pages (<a>) are
    # followed only when clicked.
    assert not re.search(r"""(src=|<link[^>]*href=)["']?https?://""", page), (
        "the report fetches something from the network")
    for trial in trials(dte):
        assert trial["name"] in page, trial["name"]
    note = mlflow.run(parent).data.tags.get("mlflow.note.content", "")
    assert all(trial["name"] in note for trial in trials(dte)), note


def assert_provenance(mlflow, dte: dict) -> None:
    """The sweep run says where its numbers were taken (tags ringleader.provenance.*): the resource, the spec's
    hash, the image and the operator's versions from its creation; the nodes its ranks ran on (those their rank
    runs name), their pods' CPU quota, the nodes' load at the ranks' end and the pods' versions from its end; the
    report's header says it."""
    found = status(dte)
    experiment_id, parent = found["mlflow"]["experimentId"], found["mlflow"]["runId"]
    taken = schema.provenance_of(mlflow.run(parent).data.tags)
    name = f"{dte['metadata']['namespace']}/{dte['metadata']['name']}"
    assert taken.get("command", "").startswith(f"DistributedTrainingExperiment {name}, generation "), taken
    assert re.fullmatch(r"[0-9a-f]{16}", taken.get("specSha256", "")), taken
    assert taken.get("image") and taken.get("operatorRingleader") and taken.get("operatorPython"), taken
    nodes = {rank.data.tags.get("ringleader.node") for trial in trials(dte)
             for rank in mlflow.children(experiment_id, trial["runId"])}
    assert taken.get("nodes") == ", ".join(sorted(nodes)), (taken, nodes)
    assert (re.fullmatch(r"\d+\.\d+\.\d+", taken.get("python", ""))
            and re.match(r"\d+\.\d+", taken.get("torch", ""))), taken
    assert taken.get("cpuQuota") and taken.get("loadPerCpuAtEnd"), taken
    assert "loadBefore" not in taken and "host" not in taken, taken  # a cluster has no one machine
    page = mlflow.artifact_text(parent, "report/report.html")
    header = re.search(r'<p class="provenance">Taken on ([^<]*)</p>', page)
    assert header and all(node in header.group(1) for node in nodes), (header and header.group(1), nodes)
    assert (f"torch {taken['torch']}, Python {taken['python']} in image {taken['image']}"
            in header.group(1)), header.group(1)
