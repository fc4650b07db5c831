"""What the controller reads from a trial's pods: failures in people's words, waiting reasons, the summary, counts."""

import json

from ringleader.api import constants
from ringleader.contract import failures
from ringleader.controller import pods


def pod(name="q-0-worker-0", role="worker", rank=1, phase="Running", *, scheduled=True, containers=(),
        reason=None, message=None, ready=False, deleting=False):
    conditions = [{"type": "PodScheduled", "status": "True" if scheduled else "False",
                   **({} if scheduled else {"reason": "Unschedulable",
                                            "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."})}]
    if ready:
        conditions.append({"type": "Ready", "status": "True"})
    status = {"phase": phase, "conditions": conditions, "containerStatuses": list(containers)}
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    metadata = {"name": name, "labels": {constants.LABEL_ROLE: role, constants.LABEL_RANK: str(rank)}}
    if deleting:
        metadata["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    return {"metadata": metadata, "spec": {}, "status": status}


def terminated(exit_code, reason=None, message=None, finished="2030-01-01T00:00:10Z", name="trainer"):
    state = {"exitCode": exit_code, "finishedAt": finished}
    if reason:
        state["reason"] = reason
    if message:
        state["message"] = message
    return {"name": name, "state": {"terminated": state}}


def test_a_running_pod_has_not_failed():
    assert pods.failure_of(pod()) is None


def test_an_oom_killed_container_is_reported_with_pod_container_exit_code_and_reason():
    failure = pods.failure_of(pod(phase="Failed", containers=[terminated(137, "OOMKilled")]))
    assert failure.describe() == "pod q-0-worker-0: container trainer exited with code 137 (OOMKilled)"


def test_a_container_error_keeps_the_start_of_its_termination_message():
    failure = pods.failure_of(pod(phase="Failed", containers=[terminated(1, "Error", "RuntimeError: boom\nat line 3")]))
    assert (failure.describe()
            == "pod q-0-worker-0: container trainer exited with code 1 (Error): RuntimeError: boom at line 3")


def test_a_container_that_exited_non_zero_counts_before_the_pod_phase_catches_up():
    assert pods.failure_of(pod(phase="Running", containers=[terminated(2, "Error")])).exit_code == 2


def test_an_eviction_names_the_pod_level_reason_and_the_container_it_killed():
    failure = pods.failure_of(pod(phase="Failed", reason="Evicted", message="The node was low on resource: memory.",
                                  containers=[terminated(137, "Error")]))
    assert failure.describe() == ("pod q-0-worker-0 failed: Evicted: The node was low on resource: memory.; "
                                  "container trainer exited with code 137")


def test_a_pod_failure_is_weighed_as_from_outside_or_not_with_its_reason_and_time():
    oom = pods.exit_of(pods.failure_of(pod("q-0-worker-1", rank=2, phase="Failed",
                                           containers=[terminated(137, "OOMKilled", finished="2030-01-01T00:00:05Z")])))
    assert (oom.rank, oom.external, oom.order) == (2, True, 1893456005.0)
    message = "ringleader: rank 1 (worker) failed: lost contact with rank 2 (it died, hung or is unreachable): reset"
    echo = pods.exit_of(pods.failure_of(pod(rank=1, phase="Failed", containers=[terminated(1, "Error", message)])))
    assert (echo.external, echo.echo, failures.lost_rank(echo.reason)) == (False, True, 2)
    evicted = pods.exit_of(pods.failure_of(pod(phase="Failed", reason="Evicted")))
    assert evicted.external and evicted.order == float("inf")


def test_waiting_reasons_say_what_a_pod_waits_on():
    assert pods.waiting_reason(pod(phase="Pending", scheduled=False)) == \
        "unschedulable (0/1 nodes are available: 1 Insufficient nvidia.com/gpu.)"
    pulling = {"name": "trainer", "state": {"waiting": {"reason": "ImagePullBackOff", "message": "not found"}}}
    assert pods.waiting_reason(pod(phase="Pending", containers=[pulling])) == "ImagePullBackOff (not found)"


def test_a_pod_is_scheduled_once_bound_to_a_node_or_reported_scheduled():
    assert pods.is_scheduled(pod(scheduled=True))
    assert not pods.is_scheduled(pod(scheduled=False))
    bound = pod(scheduled=False)
    bound["spec"]["nodeName"] = "node-1"
    assert pods.is_scheduled(bound)


def test_the_summary_is_read_from_the_termination_message_and_unknown_keys_are_ignored():
    document = {"throughput": 1234.5, "iterationTimeP50Seconds": 0.1, "stragglerRank": 3, "runtimeVersion": "x"}
    summary = pods.summary_of(pod(phase="Succeeded", containers=[terminated(0, "Completed", json.dumps(document))]))
    assert (summary.throughput, summary.iteration_time_p50_seconds, summary.straggler_rank) == (1234.5, 0.1, 3)
    assert summary.predicted_iteration_seconds is None  # it made no prediction


def test_the_summary_keeps_the_iteration_time_the_prediction_gives_each_architecture():
    document = {"iterationTimeP50Seconds": 0.1, "prediction": {"architecture": "1ps", "iterationSeconds": 0.09,
                "architectures": {"1ps": {"iterationSeconds": 0.09, "commSeconds": 0.05},
                                  "ring": {"iterationSeconds": 0.0412345678, "commSeconds": 0.01}}}}
    summary = pods.summary_of(pod(phase="Succeeded", containers=[terminated(0, "Completed", json.dumps(document))]))
    assert summary.predicted_iteration_seconds == {"1ps": 0.09, "ring": 0.041235}


def test_a_termination_message_that_is_not_json_gives_no_summary():
    assert pods.summary_of(pod(phase="Succeeded", containers=[terminated(0, "Completed", "done")])) is None


def test_replica_counts_follow_a_jobs_counting_and_skip_terminating_pods():
    counts = pods.replica_counts([
        pod("a", role="ps", phase="Running", ready=True),
        pod("b", phase="Running", ready=True), pod("c", phase="Pending"), pod("d", phase="Succeeded"),
        pod("e", phase="Failed"), pod("f", phase="Running", deleting=True),
    ])
    assert counts["ps"].model_dump() == {"active": 1, "ready": 1, "succeeded": 0, "failed": 0}
    assert counts["worker"].model_dump() == {"active": 2, "ready": 1, "succeeded": 1, "failed": 1}


def test_a_killed_pod_is_the_cause_not_the_peer_that_lost_contact_with_it_even_when_the_peer_ended_first():
    killed = pod("q-0-worker-1", rank=2, phase="Failed",
                 containers=[terminated(137, "Error", finished="2030-01-01T00:00:11Z")])
    peer = pod("q-0-worker-0", rank=1, phase="Failed", containers=[terminated(
        1, "Error", message="ringleader: rank 1 (worker) failed: lost contact with a peer rank: Read error")])
    blamed = failures.blame(pods.exit_of(pods.failure_of(p)) for p in (peer, killed))
    assert (blamed.rank, blamed.external) == (2, True)


def test_a_pod_of_several_ranks_fails_as_the_rank_its_message_names_and_never_as_another_pods():
    killed = "ringleader: rank 3 (worker-1 local rank 1, killed by SIGKILL) failed: no reason of its own"
    found = pod("q-0-worker-1", rank=2, phase="Failed", containers=[terminated(137, "Error", killed)])
    found["metadata"]["labels"][constants.LABEL_LOCAL_WORLD_SIZE] = "2"
    assert (pods.ranks(found), pods.ranks_text(found)) == (range(2, 4), "ranks 2-3")
    assert pods.failure_of(found).rank == 3
    assert pods.exit_of(pods.failure_of(found)).external  # its agent exits as the signal would have: 137
    elsewhere = pod("q-0-worker-1", rank=2, phase="Failed",
                    containers=[terminated(1, "Error", killed.replace("3", "7"))])
    assert pods.failure_of(elsewhere).rank == 2  # a rank not in the pod: the pod's first rank
    assert pods.ranks(pod(rank=5)) == range(5, 6)  # a pod without the label runs one rank
