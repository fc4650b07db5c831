"""The in-cluster MLflow scaled to 0 as a trial's ranks end, and back after: nothing recorded is lost.

docs/operator.md promises that a rank that finished training keeps its pod until MLflow has taken every record
(tracking.recordsWaitSeconds), that the trial says RecordsPending meanwhile and is neither Succeeded nor reported,
and that once MLflow is back every rank's iterations are in (one point per iteration), every run FINISHED, the
trial's summary on its run, and only then the experiment Succeeded with its report.

Runs last (with the upgrade test): MLflow away would hold every other experiment too.
"""

from __future__ import annotations

import datetime
import re
import time

import e2e_checks as checks
import e2e_specs
from e2e_kube import condition, log, phase, status, trials, wait_for, wait_terminal, describe_dte
from test_faults import start

# Long enough (at SLOW_NETWORK, ~0.2-0.4 s an iteration) that MLflow is surely gone before training ends.
ITERATIONS = 200
RUN_TIMEOUT = 600


def _scale_mlflow(kube, release, replicas: int) -> None:
    namespace = release["namespace"]
    [deployment] = [d["metadata"]["name"] for d in kube.json(
        "get", "deployments", "-n", namespace, "-l", "app.kubernetes.io/component=mlflow")["items"]]
    kube.kubectl("scale", "deployment", "-n", namespace, deployment, f"--replicas={replicas}")
    if replicas == 0:
        wait_for("no MLflow pod left", lambda: not kube.pods(namespace, "app.kubernetes.io/component=mlflow"), 120)
    else:
        wait_for("MLflow available again", lambda: (kube.json("get", "deployment", "-n", namespace, deployment)
                                                    .get("status") or {}).get("availableReplicas") == replicas, 300)


def _waited(dte: dict) -> int | None:
    """How long the trial's reporting rank had waited for MLflow in the waiting line the operator read last (its
    RecordsPending message quotes it: "... after 12 of at most 900 s")."""
    found = re.search(r"after (\d+) of at most \d+ s", trials(dte)[0].get("message") or "")
    return int(found.group(1)) if found else None


def _time(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def test_mlflow_away_as_the_ranks_end_holds_the_trial_until_every_record_is_in(kube, namespace, launcher, release,
                                                                               mlflow, report_on_failure):
    name = "mlflow-away"
    manifest = e2e_specs.experiment(name, namespace, architecture="RingAllReduce", network=e2e_specs.SLOW_NETWORK,
                                    model={"iterations": ITERATIONS})
    start(kube, launcher, namespace, manifest, report_on_failure)  # training, live publishing into its runs
    _scale_mlflow(kube, release, 0)
    log(f"{name}: MLflow scaled to 0")

    def pending():
        dte = kube.dte(namespace, name)
        if phase(dte) in ("Succeeded", "Failed"):
            raise AssertionError(f"{name} ended while MLflow was away: {describe_dte(kube, namespace, name)}")
        return condition(dte, "Running").get("reason") == "RecordsPending" and dte

    held = wait_for(f"{name} to say RecordsPending", pending, RUN_TIMEOUT, interval=2,
                    describe=lambda: describe_dte(kube, namespace, name))
    message = condition(held, "Running")["message"]
    assert "ranks' records published; waiting for MLflow at http://" in message, message
    assert trials(held)[0]["reason"] == "RecordsPending", trials(held)
    log(f"{name}: {message}")
    waited = _waited(held)
    assert waited is not None, trials(held)

    def retried():
        dte = pending()
        return dte and (_waited(dte) or 0) > waited and dte

    # One more round of the ranks' retries, failed (the server still away) and read by the operator: still held.
    later = wait_for(f"{name}'s ranks to retry once more, as the operator read it", retried, 180, interval=2,
                     describe=lambda: describe_dte(kube, namespace, name))
    assert phase(later) == "Running", describe_dte(kube, namespace, name)

    back_at = time.time()
    _scale_mlflow(kube, release, 1)
    log(f"{name}: MLflow back after {time.time() - back_at:.0f} s")
    dte = wait_terminal(kube, namespace, name, RUN_TIMEOUT)
    assert phase(dte) == "Succeeded", describe_dte(kube, namespace, name)
    succeeded = condition(dte, "Succeeded")
    assert _time(succeeded["lastTransitionTime"]) >= int(back_at), (succeeded, back_at)  # only once MLflow was back
    assert trials(dte)[0]["reason"] == "WorkersSucceeded", trials(dte)
    checks.assert_summary(status(dte)["summary"], name)
    # Every rank's iterations in MLflow, one point each; every run FINISHED; the trial's summary on its run.
    checks.assert_mlflow_runs(mlflow, dte, manifest)  # waits for the parent run to be FINISHED: its report is made
    reported = wait_for(f"{name}'s report linked in status", lambda: (lambda found: status(found)["mlflow"].get(
        "reportUrl") and found)(kube.dte(namespace, name)), 60)
    checks.assert_report_attached(mlflow, reported)
    ready = [e for e in kube.events(namespace, name) if e["reason"] == "ReportReady"]
    assert ready and all(_time(e.get("lastTimestamp") or e["eventTime"]) >= int(back_at) for e in ready), ready
    checks.assert_events(kube, namespace, name, "RecordsPending", "WorkersSucceeded", "TrialsSucceeded")
