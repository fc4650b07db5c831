"""Apiserver tier: a running trial's progress comes from one worker's log, read through the API server.

The test plays the kubelet (tests/operator/kubelet.py): it binds the pods to a Node whose log endpoint it
serves on 127.0.0.1, or leaves them unbound, so that the API server can serve no log (HTTP 204).
"""

import json

import experiments as dtes
import kubelet
from apiserver_client import wait_for


def _running(admin, namespace, name, bind):
    pods = wait_for("the trial's 3 pods", lambda: len(admin.trial_pods(namespace, name)) == 3
                    and admin.trial_pods(namespace, name))
    for pod in pods:
        kubelet.run_pod(admin, pod, bind=bind)
    wait_for("phase Running", lambda: dtes.phase(admin.experiment(namespace, name)) == "Running")
    return sorted((p for p in pods if dtes.role(p) == "worker"), key=dtes.rank)


def test_progress_is_the_lowest_ranked_workers_and_no_other_log_is_read(admin, namespace, operator, served_logs):
    operator()
    admin.create(dtes.experiment("steady", namespace, model={"iterations": 50}))
    first, second = _running(admin, namespace, "steady", bind=True)
    served_logs[first["metadata"]["name"]] = "loss 0.4\nprogress: iteration 7/50 loss 0.4000 iteration 5.0 ms\n"
    served_logs[second["metadata"]["name"]] = "progress: iteration 6/50 loss 0.4100 iteration 5.1 ms\n"
    done = wait_for("progress 7/50", lambda: (admin.experiment(namespace, "steady")["status"].get("progress") or {})
                    .get("iteration") == 7 and admin.experiment(namespace, "steady"))
    assert done["status"]["progressText"] == "7/50"
    # No pod changes from here: progress-only passes read the log again and write the iteration.
    served_logs[first["metadata"]["name"]] += "progress: iteration 9/50 loss 0.3000 iteration 5.0 ms\n"
    wait_for("progress 9/50", lambda: admin.experiment(namespace, "steady")["status"]["progressText"] == "9/50")
    assert served_logs.server.pods == {first["metadata"]["name"]}  # one log per trial, whatever its workers


def test_with_the_default_poll_interval_progress_shows_within_seconds_of_the_first_line(
        admin, namespace, operator, served_logs):
    operator(extra_args=("--progress-poll-interval", "15"))  # the operator's and the chart's default
    admin.create(dtes.experiment("long", namespace, model={"iterations": 100000}))
    first, _ = _running(admin, namespace, "long", bind=True)
    # The ranks import and rendezvous: the operator reads their log, which shows no progress line yet.
    wait_for("a read of the log with no progress line", lambda: served_logs.server.requests >= 1, timeout=30)
    served_logs[first["metadata"]["name"]] = "progress: iteration 120/100000 loss 0.4000 iteration 5.0 ms\n"
    # Read every 2 s until a first line shows (a 15 s poll would leave it at 0/100000 for up to 15 s).
    wait_for("progress 120/100000", lambda: admin.experiment(namespace, "long")["status"]["progressText"]
             == "120/100000", timeout=8)


def test_a_log_no_node_serves_is_one_warning_and_tried_less_and_less_often(admin, namespace, operator):
    running = operator()  # progress polled every second
    admin.create(dtes.experiment("unbound", namespace))
    first, _ = _running(admin, namespace, "unbound", bind=False)

    def unreadable():
        return [e for e in admin.events(namespace, "unbound") if e["reason"] == "ProgressUnreadable"]

    events = wait_for("a ProgressUnreadable event", unreadable)
    assert events[0]["type"] == "Warning"
    assert f"pod {first['metadata']['name']}" in events[0]["message"] and "HTTP 204" in events[0]["message"]
    # Tries after 1, 2 and 4 more seconds, each a debug line of the operator's: a streak is told once, not per try.
    wait_for("a third failed read",
             lambda: "unbound-0 unreadable (3 in a row)" in running.log.read_text(errors="replace"), timeout=30)
    assert len(unreadable()) == 1
    assert dtes.phase(admin.experiment(namespace, "unbound")) == "Running"


def test_the_status_and_kubectl_get_carry_the_eta_from_the_paced_progress_lines_then_the_prediction(
        admin, namespace, operator, served_logs):
    operator()
    admin.create(dtes.experiment("eta", namespace, model={"iterations": 100},
                                 sweep={"matrix": {"architecture": ["ParameterServer", "RingAllReduce"]}}))
    pods = _running(admin, namespace, "eta", bind=True)
    # As a kubelet serves them with timestamps=true: 10 iterations in 2 s, so 80 more end 16 s later.
    served_logs[pods[0]["metadata"]["name"]] = (
        "2030-01-01T00:00:10.000000001Z progress: iteration 10/100 loss 0.4000 iteration 190.0 ms\n"
        "2030-01-01T00:00:12.000000001Z progress: iteration 20/100 loss 0.3000 iteration 210.0 ms\n")
    estimate = wait_for("the trial's ETA", lambda: (admin.experiment(namespace, "eta")["status"].get("estimate")
                                                    or {}).get("trialCompletionTime"))
    assert estimate == "2030-01-01T00:00:28Z"
    status = admin.experiment(namespace, "eta")["status"]
    # The ring trial after it: nothing measured or predicted it yet, so the experiment's end is unknown.
    assert "completionTime" not in status["estimate"] and "eta-1 runs" in status["estimate"]["message"]
    assert admin.table(namespace, "eta")["ETA"] is None  # kubectl prints <none>

    # The parameter-server trial ends, predicting the ring at 40 ms: the ring trial is priced before it runs.
    summary = {**dtes.SUMMARY, "prediction": {"architectures": {"1ps": {"iterationSeconds": 0.05},
                                                                "ring": {"iterationSeconds": 0.04}}}}
    for pod in admin.trial_pods(namespace, "eta"):
        # Every rank ends, its servers too (they exit once the workers are done): the workers with the summary.
        admin.finish_pod(pod, 0, "Completed",
                         json.dumps(summary) if dtes.role(pod) == "worker" else "ringleader: ended, 10 records")
    done = wait_for("the ring trial started and priced", lambda: (lambda dte: len(dtes.trials(dte)) == 2
                    and dtes.trials(dte)[1].get("startTime") and dte["status"].get("estimate", {})
                    .get("completionTime") and dte)(admin.experiment(namespace, "eta")))
    first, second = dtes.trials(done)
    assert first["summary"]["predictedIterationSeconds"] == {"1ps": 0.05, "ring": 0.04}
    startup = (dtes.time_of(first["completionTime"]) - dtes.time_of(first["startTime"])).total_seconds() - 100 * 0.05
    expected = dtes.time_of(second["startTime"]).timestamp() + max(0.0, startup) + 100 * 0.04
    completion = done["status"]["estimate"]["completionTime"]
    assert dtes.time_of(completion).timestamp() == round(expected)
    assert admin.table(namespace, "eta")["ETA"] == completion == done["status"]["estimate"]["text"]
