"""The chart's MLflow keeps every run across an upgrade that replaces its pod (mlflow.persistence, on by default).

Run last, once every experiment of the session has ended and its runs are closed: the session's runs (a few
hundred: parent, trial and rank runs of every test) are read, `helm upgrade` replaces the MLflow pod (a
changed `mlflow.podAnnotations`), and every run must come back the same from the new pod, artifacts
included. On the harness the claim is bound to a `local` volume whose directory only root could write: the
server, uid 1000, writes it through the pod's fsGroup.
"""

from __future__ import annotations

import os
import secrets

from e2e_kube import DTE, TERMINAL, log, phase, trials, wait_for

QUIET_TIMEOUT = 900


def _mlflow_pod(kube, release) -> dict:
    (pod,) = [p for p in kube.pods(release["namespace"], "app.kubernetes.io/component=mlflow")
              if not p["metadata"].get("deletionTimestamp")]
    return pod


def test_an_mlflow_upgrade_keeps_every_run(kube, namespace, release, mlflow, mlflow_volume):
    def quiet():
        """Every experiment ended and its runs closed by the operator: nothing writes to MLflow any more."""
        found = kube.json("get", DTE, "-n", namespace)["items"]
        return all(phase(d) in TERMINAL and all(t.get("runEnded") for t in trials(d) if t.get("runId"))
                   for d in found)

    wait_for("every experiment to end and its runs to be closed", quiet, QUIET_TIMEOUT, interval=5)
    before = mlflow.every_run()
    assert len(before) >= 3, f"the session recorded only {len(before)} runs"
    # A rank run's records, an artifact written by a training pod through the server onto the volume.
    rank = next(run_id for run_id, run in before.items() if run["tags"].get("ringleader.kind") == "rank")
    records = mlflow.artifact_text(rank, "records/iterations.jsonl")
    old_pod = _mlflow_pod(kube, release)
    claim = kube.get("pvc", release["namespace"], f"{release['name']}-ringleader-mlflow")
    assert claim["status"]["phase"] == "Bound", claim["status"]
    if mlflow_volume is not None:
        assert claim["spec"]["volumeName"] == mlflow_volume["name"]
        database = mlflow_volume["path"] / "mlflow.db"
        assert database.exists() and database.stat().st_gid == 1000, "the server wrote its database through fsGroup"

    token = secrets.token_hex(3)
    kube.helm("upgrade", release["name"], os.fspath(release["chart"]), "-n", release["namespace"],
              "-f", os.fspath(release["values"]), "--set-string", f"mlflow.podAnnotations.e2e-upgrade={token}",
              "--wait", "--timeout", "300s", timeout=360)
    new_pod = wait_for("the new MLflow pod to be ready", lambda: (lambda p: p["metadata"]["uid"] != old_pod["metadata"][
        "uid"] and all(c.get("ready") for c in p["status"].get("containerStatuses") or [{}])
                                                                  and p)(_mlflow_pod(kube, release)),
        300, interval=2)
    assert new_pod["metadata"]["annotations"]["e2e-upgrade"] == token
    assert (kube.get("pvc", release["namespace"], claim["metadata"]["name"])["metadata"]["uid"]
            == claim["metadata"]["uid"])
    log(f"MLflow pod replaced ({old_pod['metadata']['name']} -> {new_pod['metadata']['name']}); "
        f"{len(before)} runs to find")

    after = mlflow.every_run()
    missing = sorted(set(before) - set(after))
    assert not missing, f"{len(missing)} of {len(before)} runs lost in the upgrade: {missing[:10]}"
    changed = [run_id for run_id, run in before.items()
               if after[run_id]["status"] != run["status"] or after[run_id]["end"] != run["end"]
               or after[run_id]["params"] != run["params"] or after[run_id]["metrics"] != run["metrics"]]
    assert not changed, f"runs that came back different: {changed[:10]}"
    assert mlflow.artifact_text(rank, "records/iterations.jsonl") == records
