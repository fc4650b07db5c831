"""Apiserver tier (no kubelet: the test writes pod status): an operator restarted mid-experiment resumes from
the cluster's state: no duplicated pods, no lost transition, the right final status."""

import experiments as dtes
from apiserver_client import wait_for
from ringleader.api import constants


def running_experiment(admin, namespace, name, **spec):
    """An experiment of 3 pods, all running, as the operator reports it; returns its pods."""
    admin.create(dtes.experiment(name, namespace, **spec))
    pods = wait_for("3 pods", lambda: (lambda found: len(found) == 3 and found)(admin.trial_pods(namespace, name)))
    for pod in pods:
        admin.run_pod(pod)
    wait_for("phase Running", lambda: dtes.phase(admin.experiment(namespace, name)) == "Running")
    return pods


def test_a_restarted_operator_adopts_the_running_pods_and_sees_what_happened_meanwhile(admin, namespace, operator):
    running = operator()
    pods = running_experiment(admin, namespace, "steady")

    running.kill()  # abruptly, as an OOM kill or a lost node would
    workers = sorted(pods, key=dtes.rank)[1:]
    for pod in workers:
        admin.finish_pod(pod, 0, "Completed", dtes.summary_message())
    running.start()

    done = wait_for("phase Succeeded", lambda: dtes.phase(admin.experiment(namespace, "steady")) == "Succeeded"
                    and admin.experiment(namespace, "steady"))
    assert done["status"]["summary"]["throughput"] == dtes.SUMMARY["throughput"]
    # The parameter server is stopped once the workers are done; the workers are the very pods of before.
    wait_for("only the original workers to remain", lambda: {p["metadata"]["uid"] for p in admin.trial_pods(
        namespace, "steady")} == {p["metadata"]["uid"] for p in workers})
    assert dtes.trials(done)[0]["restarts"] == 0


def test_a_restart_between_a_failure_and_its_recreation_counts_the_restart_once(admin, namespace, operator):
    running = operator()
    pods = running_experiment(admin, namespace, "bumpy", runPolicy={"backoffLimit": 3})
    running.stop()
    admin.finish_pod(sorted(pods, key=dtes.rank)[1], 143, "Error")  # fails while nobody watches
    running.start()
    recreated = wait_for("recreated pods", lambda: (lambda found: len(found) == 3 and not (
        {p["metadata"]["uid"] for p in found} & {p["metadata"]["uid"] for p in pods})
                                                    and found)(admin.trial_pods(namespace, "bumpy")))
    running.stop()
    running.start()  # once more, right after the recreation
    for pod in recreated:
        admin.run_pod(pod)
    settled = wait_for("phase Running", lambda: dtes.phase(admin.experiment(namespace, "bumpy")) == "Running"
                       and admin.experiment(namespace, "bumpy"))
    assert dtes.trials(settled)[0]["restarts"] == 1
    assert len(admin.trial_pods(namespace, "bumpy")) == 3


def test_an_experiment_whose_status_was_lost_adopts_its_running_pods(admin, namespace, operator):
    """A status lost while its pods run (restored from a backup without it, or wiped by hand): the first pass of an
    experiment without trials in its status lists no pods, so it must adopt them through its creates' AlreadyExists,
    never duplicate or delete them."""
    running = operator()
    pods = running_experiment(admin, namespace, "amnesic")
    running.stop()
    lost = admin.experiment(namespace, "amnesic")["status"]
    admin.patch(constants.KIND, namespace, "amnesic", {"status": {key: None for key in lost}}, sub="status")
    assert not (admin.experiment(namespace, "amnesic").get("status") or {}).get("trials")
    running.start()

    wait_for("phase Running again", lambda: dtes.phase(admin.experiment(namespace, "amnesic")) == "Running")
    assert {p["metadata"]["uid"] for p in admin.trial_pods(namespace, "amnesic")} == {p["metadata"]["uid"]
                                                                                      for p in pods}
