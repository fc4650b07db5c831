"""examples/kueue-queue.yaml on the test cluster, with a real Kueue (cluster/kueue-up.sh) admitting each trial.

The example's ClusterQueue has CPU for one trial, and its sweep lets all three trials ask at once: Kueue
admits them one after the other, each as a whole, and each succeeds on the node (tests/operator/test_operator_kueue.py
covers the waiting, eviction and quota details against an API server without a kubelet).
"""

from __future__ import annotations

import datetime

import e2e_checks as checks
from e2e_kube import log, trials, wait_terminal

# Three trials in a row on 750m, queued behind the fault tests' experiments at first.
FINISH_TIMEOUT = 1200


def _time(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_kueue_admitted_experiment_succeeds_one_trial_at_a_time(kube, namespace, kueue_example, mlflow,
                                                                 report_on_failure):
    name = kueue_example["metadata"]["name"]
    report_on_failure(name)
    dte = wait_terminal(kube, namespace, name, FINISH_TIMEOUT)
    checks.assert_succeeded(dte, kueue_example)
    found = trials(dte)

    # One Workload per trial, owned by the experiment, marked Finished by the operator when its trial ended.
    workloads = {w["metadata"]["name"]: w for w in kube.json("get", "workloads", "-n", namespace)["items"]
                 if any(o.get("name") == name for o in w["metadata"].get("ownerReferences", []))}
    assert sorted(workloads) == sorted(t["name"] for t in found), sorted(workloads)
    for workload in workloads.values():
        finished = next(c for c in workload["status"]["conditions"] if c["type"] == "Finished")
        assert (finished["status"], finished["reason"]) == ("True", "Succeeded"), finished

    # The quota holds one trial: each started after the one before it ended.
    spans = sorted((_time(t["startTime"]), _time(t["completionTime"]), t["name"]) for t in found)
    for (_, ended, before), (started, _, after) in zip(spans, spans[1:]):
        assert started >= ended, f"{after} started at {started} before {before} ended at {ended}"
    log(f"{name}: 3 trials admitted one by one in {(spans[-1][1] - spans[0][0]).total_seconds():.0f}s")
    checks.assert_mlflow_runs(mlflow, dte, kueue_example)
