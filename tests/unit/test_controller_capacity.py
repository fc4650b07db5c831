"""Admission by free capacity: what a pod requests, what nodes leave free, whether a trial's pods fit together
(first-fit-decreasing), and the words a waiting or impossible trial gets. Hand-computed cases."""

import decimal

from ringleader.controller import capacity

D = decimal.Decimal
Kind = capacity.CapacityKind
READY = [{"type": "Ready", "status": "True"}]


def node(name, cpu, memory="4Gi", *, labels=None, taints=None, ready=True, cordoned=False, pods="110"):
    return {"metadata": {"name": name, "labels": labels or {}},
            "spec": {"unschedulable": cordoned, "taints": taints or []},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                       "conditions": READY if ready else [{"type": "Ready", "status": "False"}]}}


def bound(name, on, cpu, *, phase="Running", memory="0"):
    return {"metadata": {"name": name}, "spec": {"nodeName": on, "containers": [
        {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}, "status": {"phase": phase}}


def demand(name, cpu, memory="128Mi", **where):
    return capacity.Demand(name, {"cpu": D(cpu), "memory": capacity.requests_of(
        {"spec": {"containers": [{"resources": {"requests": {"memory": memory}}}]}})["memory"], "pods": D(1)}, **where)


def room(name, cpu, memory="4Gi", **where):
    quantities = {"cpu": D(cpu), "memory": D(4 * 2 ** 30) if memory == "4Gi" else D(memory), "pods": D(110)}
    return capacity.Room(name, quantities, quantities, **where)


def test_a_pod_requests_its_containers_sum_at_least_each_init_container_its_overhead_and_one_pod():
    pod = {"spec": {"containers": [{"resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
                                   {"resources": {"limits": {"cpu": "1", "memory": "512Mi"}}}],  # limit = request
                    "initContainers": [{"resources": {"requests": {"cpu": "2"}}}],
                    "overhead": {"memory": "64Mi"}}}
    assert capacity.requests_of(pod) == {"cpu": D(2), "memory": D((1024 + 512 + 64) * 2 ** 20), "pods": D(1)}


def test_free_capacity_is_allocatable_less_the_pods_bound_there_that_have_not_ended():
    nodes = [node("a", "2"), node("cordoned", "8", cordoned=True), node("down", "8", ready=False),
             {"metadata": {"name": "silent"}, "status": {"conditions": READY}}]  # reports no allocatable
    pods = [bound("p1", "a", "500m"), bound("p2", "a", "1", phase="Succeeded"), bound("p3", "a", "250m"),
            bound("p4", "elsewhere", "1")]
    pods[2]["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"  # terminating: still holds its request
    (found,) = capacity.rooms(nodes, pods)
    assert (found.node, found.free["cpu"], found.free["pods"]) == ("a", D("1.25"), D(108))
    assert found.allocatable["cpu"] == D(2)


def test_pods_are_placed_largest_first_where_placing_them_in_order_would_not_fit():
    # 1 and 2 CPUs free; pods of 0.5, 1, 1.5: in order 0.5 -> a, 1 -> b, 1.5 -> nowhere; largest first fits all.
    rooms = (room("a", "1"), room("b", "2"))
    pods = [demand("p-small", "0.5"), demand("p-mid", "1"), demand("p-large", "1.5")]
    assert capacity.fit(pods, rooms) == {"p-large": "b", "p-mid": "a", "p-small": "b"}
    assert capacity.fit([*pods, demand("p-more", "0.5")], rooms) is None  # 3.5 CPUs into 3


def test_a_node_selector_and_untolerated_taints_keep_a_pod_off_a_node():
    gpu = room("gpu", "8", labels={"accelerator": "a100"},
               taints=({"key": "dedicated", "value": "ml", "effect": "NoSchedule"},))
    plain = room("plain", "1")
    assert capacity.fit([demand("p", "2")], (gpu, plain)) is None  # untolerated taint; too small elsewhere
    tolerated = demand("p", "2", tolerations=({"key": "dedicated", "operator": "Exists"},))
    assert capacity.fit([tolerated], (gpu, plain)) == {"p": "gpu"}
    selected = demand("p", "0.5", node_selector={"accelerator": "a100"},
                      tolerations=({"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},))
    assert capacity.fit([selected], (plain, gpu)) == {"p": "gpu"}
    assert not capacity.may_hold(plain, selected)


def test_a_trial_that_fits_is_admitted_with_its_placement():
    verdict = capacity.judge((demand("t-ps-0", "1"), demand("t-worker-0", "1")), (room("n1", "2"),))
    assert verdict.kind == Kind.ADMIT and verdict.placed == {"t-ps-0": "n1", "t-worker-0": "n1"}


def test_a_trial_that_does_not_fit_now_waits_saying_what_it_needs_and_what_is_free():
    rooms = capacity.rooms([node("n1", "2", "4Gi"), node("n2", "2", "4Gi")],
                           [bound("x", "n1", "1500m", memory="1Gi"), bound("y", "n2", "1", memory="3Gi")])
    verdict = capacity.judge(tuple(demand(f"t-worker-{i}", "1") for i in range(3)), rooms)
    assert verdict.kind == Kind.WAIT
    assert verdict.message == ("needs 3 pods of cpu 1, memory 128Mi; "
                               "free: n2 cpu 1, memory 1Gi; n1 cpu 500m, memory 3Gi")


def test_a_request_larger_than_every_node_is_never_admitted_and_names_the_largest_node():
    rooms = (room("small", "1"), room("large", "2"))
    verdict = capacity.judge((demand("t-worker-0", "64"),), rooms)
    assert verdict.kind == Kind.NEVER and verdict.pod == "t-worker-0"
    assert verdict.message == ("pod t-worker-0 requests cpu 64, memory 128Mi, more than any node has: "
                               "the largest node, large, has cpu 2 allocatable")


def test_without_a_known_node_or_with_none_a_pod_may_go_to_the_scheduler_decides():
    assert capacity.judge((demand("p", "64"),), ()).kind == Kind.ADMIT  # nodes report nothing: as before
    only_gpu = room("gpu", "1", labels={"accelerator": "a100"})
    # No node matches the selector: a matching one may join; the scheduler and the startup deadline decide.
    assert capacity.judge((demand("p", "64", node_selector={"pool": "big"}),), (only_gpu,)).kind == Kind.ADMIT


def test_trials_take_capacity_in_order_and_a_waiting_trial_holds_back_the_later_ones():
    demands = {"q-0": (demand("q-0-a", "1"), demand("q-0-b", "1")),
               "q-1": (demand("q-1-a", "1"), demand("q-1-b", "1")),
               "q-2": (demand("q-2-a", "0.5"),)}
    left = capacity.Capacity((room("n1", "3"),), demands)
    first, left = left.take("q-0")
    second, left = left.take("q-1")
    third, left = left.take("q-2")  # would fit the 1 CPU left, but q-1 came first
    assert [v.kind for v in (first, second, third)] == [Kind.ADMIT, Kind.WAIT, Kind.WAIT]
    assert left.rooms[0].free["cpu"] == D(1)
    assert third.message == "queued behind trial q-1, created earlier and waiting for capacity"
    verdict, _ = capacity.Capacity((room("n1", "3"),), demands, ahead="other/e-0").take("q-2")
    assert (verdict.kind, verdict.message) == (Kind.WAIT, "queued behind trial other/e-0, created earlier and "
                                                          "waiting for capacity")


def test_capacity_only_for_messages_judges_no_trial():
    verdict, _ = capacity.Capacity((room("n1", "0"),), {"q-0": (demand("q-0-a", "1"),)}, admit=False).take("q-0")
    assert verdict is None


def test_quantities_read_as_people_write_them():
    assert [capacity.quantity_text("cpu", D(v)) for v in ("2", "0.5", "1.25")] == ["2", "500m", "1250m"]
    assert [capacity.quantity_text("memory", D(v)) for v in (2 ** 30, 1536 * 2 ** 20, 1000)] == ["1Gi", "1.5Gi", "1000"]
