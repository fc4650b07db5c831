"""The admission queue across experiments: what one pass admits is held from the next until the scheduler binds it,
and a trial created later queues behind one created earlier that waits for capacity.

The API server's two reads (nodes, bound pods) are played by `Cluster`, a stand-in for the only calls the admitter
makes; tests/operator/test_capacity_admission.py runs it against a real API server."""

import asyncio
import datetime

from ringleader import api
from ringleader.api import constants
from ringleader.api import status as status_
from ringleader.controller import admitter, plan, reasons, rendering
from ringleader.controller import settings as settings_

T0 = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
RESOURCES = {"cpu": "1", "memory": "128Mi"}


class Cluster:
    """One 3-CPU node and the pods bound to it, as `kube.Kube` lists them."""

    def __init__(self) -> None:
        self.bound: list[dict] = []

    async def list_nodes(self) -> list[dict]:
        return [{"metadata": {"name": "n1"}, "status": {
            "allocatable": {"cpu": "3", "memory": "8Gi", "ephemeral-storage": "100Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]}}]

    async def list_bound_pods(self) -> list[dict]:
        return self.bound


def body(name, created):
    return {"apiVersion": constants.API_VERSION, "kind": constants.KIND,
            "metadata": {"name": name, "namespace": "lab", "uid": name, "creationTimestamp": created},
            "spec": {"architecture": "RingAllReduce", "workers": {"replicas": 2, "resources": RESOURCES}}}


def one_pass(admission, found):
    """A reconciler pass over `found`, as it runs: the room, then decide, then settle, no await in between."""
    experiment = api.parse({k: v for k, v in found.items() if k != "status"})
    expansion = api.expand(experiment)
    old = status_.ExperimentStatus()

    async def run():
        room = await admission.room(found, experiment, expansion, old)
        seen = plan.Observation(now=T0, generation=1, pods={}, expected={
            t.name: rendering.expected_pods(t)
            for t in expansion.trials}, capacity=room)
        decision = plan.decide(experiment, expansion, old, seen)
        admission.settle(found, decision, room)
        return decision

    return asyncio.run(run())


def test_a_trial_admitted_by_one_pass_holds_its_room_from_the_next_until_its_pods_are_bound():
    cluster, clock = Cluster(), [0.0]
    admission = admitter.Admitter(cluster, settings_.Settings(), clock=lambda: clock[0])
    first = one_pass(admission, body("a", "2030-01-01T00:00:00Z"))
    assert first.create == (0,) and first.placed == {"a-0-worker-0": "n1", "a-0-worker-1": "n1"}
    clock[0] += 2  # a fresh read of the nodes: the pods are not bound yet, but held
    second = one_pass(admission, body("b", "2030-01-01T00:00:01Z"))
    (waiting,) = second.status.trials
    assert (second.create, waiting.reason) == ((), reasons.WAITING_FOR_CAPACITY)
    assert "free: n1 cpu 1," in waiting.message, waiting.message
    cluster.bound = [{"metadata": {"name": pod, "namespace": "lab"}, "spec": {"nodeName": "n1", "containers": [
        {"resources": {"requests": RESOURCES}}]}, "status": {"phase": "Succeeded"}} for pod in first.placed]
    clock[0] += 2  # bound, and ended: their room is free, and no longer held
    assert one_pass(admission, body("b", "2030-01-01T00:00:01Z")).create == (0,)


def test_a_trial_created_later_queues_behind_one_created_earlier_that_waits():
    cluster, clock = Cluster(), [0.0]
    admission = admitter.Admitter(cluster, settings_.Settings(), clock=lambda: clock[0])
    cluster.bound = [{"metadata": {"name": "other", "namespace": "x"}, "spec": {"nodeName": "n1", "containers": [
        {"resources": {"requests": {"cpu": "2"}}}]}, "status": {"phase": "Running"}}]  # 1 CPU left: no trial fits
    early = one_pass(admission, body("early", "2030-01-01T00:00:00Z"))
    assert early.status.trials[0].reason == reasons.WAITING_FOR_CAPACITY
    cluster.bound[0]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1"  # 2 CPUs free: one trial fits
    clock[0] += 2
    late = one_pass(admission, body("late", "2030-01-01T00:00:05Z"))
    assert late.create == () and late.status.trials[0].message.endswith(
        "queued behind trial lab/early-0, created earlier and waiting for capacity"), late.status.trials[0].message
    assert one_pass(admission, body("early", "2030-01-01T00:00:00Z")).create == (0,)  # the first in line goes first
    (still,) = one_pass(admission, body("late", "2030-01-01T00:00:05Z")).status.trials
    # Admitted, early left the queue; its pods hold the room now, so late waits for capacity, behind no one.
    assert still.reason == reasons.WAITING_FOR_CAPACITY and "queued behind" not in still.message, still.message


def test_a_deleted_experiment_leaves_the_queue_at_once():
    cluster, clock = Cluster(), [0.0]
    admission = admitter.Admitter(cluster, settings_.Settings(), clock=lambda: clock[0])
    cluster.bound = [{"metadata": {"name": "other", "namespace": "x"}, "spec": {"nodeName": "n1", "containers": [
        {"resources": {"requests": {"cpu": "2"}}}]}, "status": {"phase": "Running"}}]
    one_pass(admission, body("early", "2030-01-01T00:00:00Z"))
    cluster.bound = []
    admission.forget("lab", "early")
    clock[0] += 2
    assert one_pass(admission, body("late", "2030-01-01T00:00:05Z")).create == (0,)
