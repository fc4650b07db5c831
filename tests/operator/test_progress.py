"""Apiserver tier: a running trial's progress comes from one worker's log, read through the API server.

The test plays the kubelet (tests/operator/kubelet.py): it binds the pods to a Node whose log endpoint it
serves on 127.0.0.1, or leaves them unbound, so that the API server can serve no log (HTTP 204).
"""

import time

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


def test_progress_is_the_lowest_ranked_workers_and_no_other_log_is_read(admin, namespace, operator, tmp_path):
    logs = {}
    server = kubelet.LogServer(tmp_path, lambda pod: logs.get(pod, ""))
    try:
        kubelet.add_node(admin, server.port)
        operator()
        admin.create(dtes.experiment("steady", namespace, model={"iterations": 50}))
        first, second = _running(admin, namespace, "steady", bind=True)
        logs[first["metadata"]["name"]] = "loss 0.4\nprogress: iteration 7/50 loss 0.4000 iteration 5.0 ms\n"
        logs[second["metadata"]["name"]] = "progress: iteration 6/50 loss 0.4100 iteration 5.1 ms\n"
        done = wait_for("progress 7/50", lambda: (admin.experiment(namespace, "steady")["status"].get("progress") or {})
                        .get("iteration") == 7 and admin.experiment(namespace, "steady"))
        assert done["status"]["progressText"] == "7/50"
        # No pod changes from here: progress-only passes read the log again and write the iteration.
        logs[first["metadata"]["name"]] += "progress: iteration 9/50 loss 0.3000 iteration 5.0 ms\n"
        wait_for("progress 9/50", lambda: admin.experiment(namespace, "steady")["status"]["progressText"] == "9/50")
        assert server.pods == {first["metadata"]["name"]}  # one log per trial, whatever its workers
    finally:
        server.close()


def test_a_log_no_node_serves_is_one_warning_and_tried_less_and_less_often(admin, namespace, operator):
    operator()  # progress polled every second
    admin.create(dtes.experiment("unbound", namespace))
    first, _ = _running(admin, namespace, "unbound", bind=False)

    def unreadable():
        return [e for e in admin.events(namespace, "unbound") if e["reason"] == "ProgressUnreadable"]

    events = wait_for("a ProgressUnreadable event", unreadable)
    assert events[0]["type"] == "Warning"
    assert f"pod {first['metadata']['name']}" in events[0]["message"] and "HTTP 204" in events[0]["message"]
    time.sleep(8)  # tries after 1, 2 and 4 more seconds: a streak of failures is told once, not once per try
    assert len(unreadable()) == 1
    assert dtes.phase(admin.experiment(namespace, "unbound")) == "Running"
