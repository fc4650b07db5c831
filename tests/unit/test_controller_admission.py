"""Kueue admission (`scheduling.queueName`): a trial's Workload is its pods as pod sets, no pod exists before Kueue
admits the whole Workload, the quota is released when the trial ends, and an eviction requeues the trial."""

import datetime

import pytest

from ringleader import api
from ringleader.api import constants
from ringleader.api import status as status_
from ringleader.controller import admission, due, events, plan, reasons, rendering
from ringleader.controller import settings as settings_
from ringleader.topology import TemplateError, render, workload

Phase = status_.Phase
Type = status_.ConditionType
Action = admission.Action
T0 = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)


def experiment(**spec):
    spec = {"scheduling": {"queueName": "team-a"}, **spec}
    return api.parse({"apiVersion": constants.API_VERSION, "kind": constants.KIND,
                      "metadata": {"name": "q", "namespace": "default", "generation": 1}, "spec": spec})


def kueue_workload(name, *conditions, cluster_queue=None):
    """A Workload as Kueue leaves it: (type, status, reason, message) conditions, an admission when admitted."""
    status = {"conditions": [{"type": t, "status": s, "reason": r, "message": m} for t, s, r, m in conditions]}
    if cluster_queue:
        status["admission"] = {"clusterQueue": cluster_queue}
    return {"metadata": {"name": name}, "status": status}


WAITING = kueue_workload("q-0", ("QuotaReserved", "False", "Pending",
                                 "couldn't assign flavors to pod set worker: insufficient unused quota for cpu"))
ADMITTED = kueue_workload("q-0", ("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cq"),
                          ("Admitted", "True", "Admitted", "The workload is admitted"), cluster_queue="cq")
EVICTED = kueue_workload("q-0", ("QuotaReserved", "True", "QuotaReserved", ""), ("Admitted", "True", "Admitted", ""),
                         ("Evicted", "True", "Preempted", "Preempted to accommodate a higher priority Workload"))
FINISHED = kueue_workload("q-0", ("Finished", "True", "Succeeded", "all 2 workers succeeded"))


def decide(dte, old=None, *, pods=None, workloads=None):
    expansion = api.expand(dte)
    seen = plan.Observation(now=T0, generation=1, pods=pods or {},
                            expected={t.name: rendering.expected_pods(t) for t in expansion.trials},
                            workloads={name: admission.of(w) for name, w in (workloads or {}).items()})
    return plan.decide(dte, expansion, old or status_.ExperimentStatus(), seen)


def pods_of(trial, phase="Running"):
    return [{"metadata": {"name": e.name, "labels": {constants.LABEL_ROLE: e.role, constants.LABEL_RANK: str(e.rank)}},
             "spec": {"nodeName": "node-1"}, "status": {"phase": phase}}
            for e in rendering.expected_pods(trial)]


# -- what Kueue's Workload says --------------------------------------------------------------------------------

def test_a_workloads_state_follows_kueues_conditions_with_its_reason_for_waiting():
    assert admission.of(WAITING) == admission.Admission(
        "q-0", admission.State.WAITING, "couldn't assign flavors to pod set worker: insufficient unused quota for cpu")
    assert admission.of(kueue_workload("q-0")).message == "not looked at by Kueue yet"
    assert admission.of(ADMITTED) == admission.Admission("q-0", admission.State.ADMITTED, "admitted by ClusterQueue cq")
    assert admission.of(EVICTED).state == admission.State.EVICTED
    assert admission.of(EVICTED).message.startswith("Preempted: Preempted to accommodate")
    assert admission.of(FINISHED).state == admission.State.FINISHED


# -- the Workload of a trial -----------------------------------------------------------------------------------

def test_a_workloads_pod_sets_are_the_trials_pods_by_role_with_their_requests():
    dte = experiment(parameterServers={"replicas": 2, "resources": {"cpu": "500m", "memory": "1Gi"}},
                     workers={"replicas": 3, "resources": {"cpu": "2", "memory": "4Gi"}})
    [trial] = api.expand(dte).trials
    objects = render(trial)
    found = workload.workload(trial, objects, "team-a")
    assert ((found["apiVersion"], found["kind"], found["metadata"]["name"])
            == ("kueue.x-k8s.io/v1beta1", "Workload", "q-0"))
    assert found["spec"]["queueName"] == "team-a" and found["spec"]["active"] is True
    assert found["metadata"]["labels"][constants.LABEL_TRIAL] == "q-0"
    sets = {s["name"]: s for s in found["spec"]["podSets"]}
    assert {name: s["count"] for name, s in sets.items()} == {"ps": 2, "worker": 3}
    pods = {p["metadata"]["labels"][constants.LABEL_ROLE]: p for p in objects if p["kind"] == "Pod"}
    for role in ("ps", "worker"):
        # Exactly what the pods request, so Kueue reserves what the scheduler will be asked for.
        assert sets[role]["template"]["spec"]["containers"][0]["resources"] == \
            pods[role]["spec"]["containers"][0]["resources"]
    assert sets["worker"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "2"


def test_each_worker_group_is_a_pod_set_of_its_own():
    dte = experiment(architecture="PeerToPeer", workers={"replicas": 3, "groups": [
        {"name": "fast", "replicas": 2}, {"name": "slow", "replicas": 1, "nodeSelector": {"pool": "old"}}]})
    [trial] = api.expand(dte).trials
    sets = workload.workload(trial, render(trial), "team-a")["spec"]["podSets"]
    assert [(s["name"], s["count"]) for s in sets] == [("worker-fast", 2), ("worker-slow", 1)]
    assert sets[1]["template"]["spec"]["nodeSelector"]["pool"] == "old"


def test_a_workload_counts_pods_each_requesting_what_its_ranks_share():
    dte = experiment(architecture="RingAllReduce", workers={"replicas": 6, "ranksPerPod": 2, "resources": {"cpu": "4"}})
    [trial] = api.expand(dte).trials
    [worker] = workload.workload(trial, render(trial), "team-a")["spec"]["podSets"]
    assert (worker["name"], worker["count"]) == ("worker", 3)
    assert worker["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "4"


def pod(name, role, cpu):
    return {"kind": "Pod", "metadata": {"name": name, "labels": {constants.LABEL_ROLE: role}},
            "spec": {"containers": [{"name": "trainer", "image": "i", "resources": {"requests": {"cpu": cpu}}}]}}


def test_pods_of_one_role_in_two_shapes_make_two_pod_sets_and_more_than_eight_are_refused():
    sets = workload.pod_sets([pod("a", "ps", "1"), pod("b", "worker", "1"), pod("c", "worker", "2"),
                              pod("d", "worker", "1")])
    assert [(s["name"], s["count"]) for s in sets] == [("ps", 1), ("worker", 2), ("worker-1", 1)]
    [trial] = api.expand(experiment()).trials
    with pytest.raises(TemplateError, match="at most 8 pod sets"):
        workload.workload(trial, [pod(f"w{i}", "worker", f"{i + 1}") for i in range(9)], "team-a")


# -- a single queued trial -------------------------------------------------------------------------------------

def test_a_queued_trial_creates_its_workload_and_no_pod():
    result = decide(experiment())
    assert result.create == () and result.workloads == ((0, Action.CREATE),)
    [trial] = result.status.trials
    assert (trial.phase, trial.reason) == (Phase.PENDING, reasons.WAITING_FOR_ADMISSION)
    assert "waiting for Kueue to admit all 3 pods (1 parameter server, 2 workers) (LocalQueue team-a)" in trial.message


def test_a_trial_waits_with_kueues_reason_and_the_experiment_says_so():
    result = decide(experiment(), workloads={"q-0": WAITING})
    assert result.create == () and result.workloads == ()
    running = next(c for c in result.status.conditions if c.type == Type.RUNNING)
    assert (running.status, running.reason) == ("False", reasons.WAITING_FOR_ADMISSION)
    assert result.status.phase == Phase.QUEUED
    assert "insufficient unused quota for cpu" in running.message
    assert result.status.progress.trials_queued == 1
    assert result.status.progress_text.endswith("1 queued")
    assert due.next_wake(result.status, experiment().spec.run_policy, T0, settings_.TimingSettings()) == \
        settings_.TimingSettings().recheck_seconds


def test_an_admitted_trial_creates_all_its_pods_at_once():
    result = decide(experiment(), workloads={"q-0": ADMITTED})
    assert result.create == (0,) and result.workloads == ()
    assert result.status.trials[0].phase == Phase.CREATED


def test_a_finished_trial_marks_its_workload_finished_once():
    dte = experiment()
    [trial] = api.expand(dte).trials
    created = decide(dte, workloads={"q-0": ADMITTED}).status
    running = decide(dte, created, workloads={"q-0": ADMITTED}, pods={"q-0": pods_of(trial)}).status
    assert running.trials[0].phase == Phase.RUNNING
    done_pods = pods_of(trial)
    for pod in done_pods:  # every rank ends, the servers too (they exit once the workers are done)
        worker = pod["metadata"]["labels"][constants.LABEL_ROLE] == "worker"
        pod["status"] = {"phase": "Succeeded", "containerStatuses": [{"name": "trainer", "state": {"terminated": {
            "exitCode": 0, "message": '{"throughput": 10.0}' if worker else "ringleader: ended, 10 records"}}}]}
    done = decide(dte, running, workloads={"q-0": ADMITTED}, pods={"q-0": done_pods})
    assert done.status.trials[0].phase == Phase.SUCCEEDED
    assert done.workloads == ((0, Action.FINISH),)
    again = decide(dte, done.status, workloads={"q-0": FINISHED}, pods={"q-0": done_pods})
    assert again.workloads == ()


def test_an_evicted_trial_loses_its_pods_and_queues_again_from_the_beginning():
    dte = experiment()
    [trial] = api.expand(dte).trials
    created = decide(dte, workloads={"q-0": ADMITTED}).status
    running = decide(dte, created, workloads={"q-0": ADMITTED}, pods={"q-0": pods_of(trial)}).status
    assert running.trials[0].phase == Phase.RUNNING
    evicted = decide(dte, running, workloads={"q-0": EVICTED}, pods={"q-0": pods_of(trial)})
    assert sorted(evicted.delete) == sorted(p["metadata"]["name"] for p in pods_of(trial))
    assert evicted.workloads == ((0, Action.DELETE),)
    [found] = evicted.status.trials
    assert (found.phase, found.reason, found.start_time) == (Phase.PENDING, reasons.EVICTED, None)
    assert "Preempted to accommodate" in found.message
    [event] = [e for e in events.transitions(running, evicted.status) if e.reason == reasons.EVICTED]
    assert event.type == "Warning"
    requeued = decide(dte, evicted.status)  # the Workload is gone
    assert requeued.workloads == ((0, Action.CREATE),) and requeued.create == ()


def test_a_suspended_experiment_gives_its_quota_back():
    dte = experiment(runPolicy={"suspend": True})
    result = decide(dte, workloads={"q-0": WAITING})
    assert result.workloads == ((0, Action.DELETE),)


def test_without_a_queue_name_no_workload_is_ever_asked_for():
    dte = api.parse({"apiVersion": constants.API_VERSION, "kind": constants.KIND,
                     "metadata": {"name": "q", "namespace": "default"}, "spec": {}})
    expansion = api.expand(dte)
    result = plan.decide(dte, expansion, status_.ExperimentStatus(), plan.Observation(
        now=T0, generation=1, pods={}, expected={t.name: rendering.expected_pods(t) for t in expansion.trials}))
    assert result.create == (0,) and result.workloads == ()


# -- a queued sweep --------------------------------------------------------------------------------------------

def test_a_sweeps_trials_queue_within_max_parallel_and_only_admitted_ones_get_pods():
    dte = experiment(sweep={"matrix": {"workers": [1, 2, 3]}, "maxParallel": 3})
    result = decide(dte, workloads={"q-0": ADMITTED, "q-1": {**WAITING, "metadata": {"name": "q-1"}}})
    assert result.create == (0,)
    assert result.workloads == ((2, Action.CREATE),)
    assert [t.reason for t in result.status.trials] == [reasons.PODS_CREATED, reasons.WAITING_FOR_ADMISSION,
                                                        reasons.WAITING_FOR_ADMISSION]
    assert result.status.progress.trials_queued == 2
