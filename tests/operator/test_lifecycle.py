"""Apiserver tier (no kubelet: the test writes pod status): an experiment from creation to success.

Create -> pods created with owner references -> gang wait (visible) -> Running -> workers succeed
-> Succeeded with the aggregating worker's summary, parameter servers stopped, an Event per transition.
"""

import re

import requests

import experiments as dtes
from apiserver_client import wait_for
from loopback import free_port


def test_an_experiment_runs_its_trial_to_success(admin, namespace, operator):
    port = free_port()
    running_operator = operator(cluster_wide=True, extra_args=("--liveness", f"http://127.0.0.1:{port}/healthz"),
                                verbose=False)
    admin.create(dtes.experiment("quick", namespace))

    pods = wait_for("the trial's 3 pods", lambda: len(admin.trial_pods(namespace, "quick")) == 3 and
                    admin.trial_pods(namespace, "quick"))
    dte = admin.experiment(namespace, "quick")
    uid = dte["metadata"]["uid"]
    for obj in [*pods, admin.get("Service", namespace, "quick-0"), admin.get("ConfigMap", namespace, "quick-0-trial")]:
        owner = obj["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["uid"], owner["controller"]) == ("DistributedTrainingExperiment", uid, True)
    assert dte["metadata"].get("finalizers") is None  # deletion never waits for the operator

    # Gang semantics: one pod unschedulable, the others running -> not Running, and the condition says why.
    ps, worker0, worker1 = sorted(pods, key=dtes.rank)
    admin.run_pod(ps)
    admin.run_pod(worker0)
    admin.unschedulable(worker1, "0/1 nodes are available: 1 Insufficient cpu.")
    waiting = wait_for("the gang wait to show", lambda: "Insufficient cpu" in dtes.condition(
        admin.experiment(namespace, "quick"), "Running").get("message", "") and admin.experiment(namespace, "quick"))
    assert dtes.condition(waiting, "Running")["reason"] == "WaitingForPods"
    assert dtes.phase(waiting) == "Created"

    admin.run_pod(worker1)
    running = wait_for("phase Running", lambda: dtes.phase(admin.experiment(namespace, "quick")) == "Running"
                       and admin.experiment(namespace, "quick"))
    assert running["status"]["replicaStatuses"]["worker"]["active"] == 2
    assert running["status"]["startTime"]

    admin.finish_pod(worker0, 0, "Completed", dtes.summary_message())  # the lowest worker rank aggregates
    admin.finish_pod(worker1, 0, "Completed")
    done = wait_for("phase Succeeded", lambda: dtes.phase(admin.experiment(namespace, "quick")) == "Succeeded"
                    and admin.experiment(namespace, "quick"))
    status = done["status"]
    assert status["summary"]["throughput"] == dtes.SUMMARY["throughput"]
    assert status["trials"][0]["summary"]["stragglerRank"] == 2
    assert dtes.condition(done, "Succeeded")["observedGeneration"] == done["metadata"]["generation"]
    assert status["completionTime"] and status["progress"]["trialsCompleted"] == 1
    # cleanPodPolicy Running (default): the parameter server goes, the finished workers stay for their logs.
    wait_for("the parameter server to be deleted",
             lambda: sorted(p["metadata"]["name"] for p in admin.trial_pods(namespace, "quick"))
             == ["quick-0-worker-0", "quick-0-worker-1"])

    # The endpoint the chart's liveness probe asks.
    session = requests.Session()
    session.trust_env = False
    assert session.get(f"http://127.0.0.1:{port}/healthz", timeout=5).status_code == 200

    reasons = wait_for("the events", lambda: (lambda found: "TrialsSucceeded" in found and found)(
        [e["reason"] for e in admin.events(namespace, "quick")]))
    for reason in ("ExperimentCreated", "PodsCreated", "WaitingForPods", "AllPodsRunning", "WorkersSucceeded",
                   "TrialsSucceeded"):
        assert reason in reasons
    # At its default level the operator's log tells the experiment's story: one line per phase change.
    lines = [line for line in running_operator.log.read_text().splitlines()
             if f"experiment {namespace}/quick: " in line]
    assert [line.split(f"experiment {namespace}/quick: ")[1].split(" (")[0] for line in lines] == [
        "Pending -> Created", "Created -> Running", "Running -> Succeeded"], lines
    # The last line's reason word, trial and throughput, read back from it (not its wording).
    told = re.search(r"\((\w+): trial (\S+): .*?([\d.]+) samples/s\)", lines[-1])
    assert told and told.groups()[:2] == ("TrialsSucceeded", "quick-0"), lines[-1]
    assert float(told.group(3)) == dtes.SUMMARY["throughput"]


def test_an_invalid_combination_is_refused_by_the_api_server_itself(admin, namespace):
    response = admin.session.post(admin.url + admin.path("DistributedTrainingExperiment", namespace),
                                  json=dtes.experiment(
        "ring-asp", namespace, architecture="RingAllReduce", sync={"paradigm": "ASP"}), timeout=30)
    assert response.status_code == 422
    assert "RingAllReduce" in response.json()["message"]


def test_an_experiment_asking_for_a_pod_group_fails_when_pod_groups_are_disabled(admin, namespace, operator):
    operator()
    admin.create(dtes.experiment("gang", namespace, scheduling={"gang": "Volcano"}))
    failed = wait_for("phase Failed", lambda: dtes.phase(admin.experiment(namespace, "gang")) == "Failed"
                      and admin.experiment(namespace, "gang"))
    condition = dtes.condition(failed, "Failed")
    assert condition["reason"] == "PodGroupsDisabled"
    assert "podGroups.enabled=true" in condition["message"]
    assert admin.trial_pods(namespace, "gang") == []
