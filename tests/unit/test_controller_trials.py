"""A trial's life, one step at a time: start, gang wait, run, fail and restart, give up, deadline, succeed, suspend."""

import dataclasses
import datetime
import json

from ringleader.api import constants
from ringleader.api import spec as spec_
from ringleader.api import status as status_
from ringleader.contract import unpublished
from ringleader.controller import capacity, cleanup, pending_records, reasons, trials

Phase = status_.Phase
T0 = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)
EXPECTED = (trials.ExpectedPod("q-0-ps-0", "ps", 0), trials.ExpectedPod("q-0-worker-0", "worker", 1),
            trials.ExpectedPod("q-0-worker-1", "worker", 2))


def pod(name, phase="Running", *, scheduled=True, exit_code=None, reason=None, message=None, deleting=False,
        finished="2030-01-01T00:01:00Z"):
    role = "ps" if "-ps-" in name else "worker"
    rank = {e.name: e.rank for e in EXPECTED}.get(name, 9)
    containers = []
    if exit_code is not None:
        containers = [{"name": "trainer", "state": {"terminated": {
            "exitCode": exit_code, "reason": reason, "message": message, "finishedAt": finished}}}]
    metadata = {"name": name, "labels": {constants.LABEL_ROLE: role, constants.LABEL_RANK: str(rank)}}
    if deleting:
        metadata["deletionTimestamp"] = "2030-01-01T00:02:00Z"
    return {"metadata": metadata, "spec": {},
            "status": {"phase": phase, "containerStatuses": containers,
                       "conditions": [{"type": "PodScheduled", "status": "True" if scheduled else "False"}]}}


def all_running():
    return [pod(e.name) for e in EXPECTED]


def context(at=0, **policy):
    return trials.Context(now=T0 + datetime.timedelta(seconds=at), run_policy=spec_.RunPolicy(**policy),
                          expected=EXPECTED, may_start=True)


def trial(phase=Phase.PENDING, **fields):
    return status_.TrialStatus(name="q-0", index=0, phase=phase, **fields)


def test_a_pending_trial_with_a_free_slot_creates_its_objects_and_records_its_start():
    step = trials.step(trial(), [], context())
    assert (step.status.phase, step.create, step.status.start_time) == (Phase.CREATED, True, T0)
    assert step.status.message == ("created 3 pods (1 parameter server, 2 workers); "
                                   "waiting for all of them to be scheduled")


def test_a_pending_trial_without_a_slot_waits_and_says_why():
    ctx = trials.Context(now=T0, run_policy=spec_.RunPolicy(), expected=EXPECTED, may_start=False)
    step = trials.step(trial(), [], ctx)
    assert (step.status.phase, step.status.reason, step.create) == (Phase.PENDING, reasons.WAITING_FOR_SLOT, False)


def test_a_pending_trial_first_deletes_pods_left_by_an_earlier_run():
    step = trials.step(trial(), [pod("q-0-worker-0")], context())
    assert (step.status.phase, step.delete, step.create) == (Phase.PENDING, ("q-0-worker-0",), False)


def test_gang_semantics_a_trial_is_not_running_until_every_pod_is_scheduled_and_running():
    pods = all_running()
    pods[2] = pod("q-0-worker-1", phase="Pending", scheduled=False)
    step = trials.step(trial(Phase.CREATED, start_time=T0), pods, context())
    assert (step.status.phase, step.status.reason) == (Phase.CREATED, reasons.WAITING_FOR_PODS)
    assert step.status.message.startswith("2 of 3 pods running, 2 of 3 scheduled; pod q-0-worker-1: not scheduled yet")


def test_a_trial_whose_pods_all_run_is_running():
    step = trials.step(trial(Phase.CREATED, start_time=T0), all_running(), context())
    assert (step.status.phase, step.status.message) == (Phase.RUNNING,
                                                        "all 3 pods (1 parameter server, 2 workers) are running")


def test_a_created_trial_recreates_a_pod_that_is_missing():
    step = trials.step(trial(Phase.CREATED, start_time=T0), all_running()[:2], context())
    assert (step.status.phase, step.create) == (Phase.CREATED, True)


def test_a_failed_pod_restarts_the_whole_trial_and_counts_the_restart():
    pods = all_running()
    pods[1] = pod("q-0-worker-0", "Failed", exit_code=137, reason="OOMKilled")
    step = trials.step(trial(Phase.RUNNING, start_time=T0), pods, context(backoff_limit=2))
    assert (step.status.phase, step.status.restarts, step.status.reason) == (Phase.RESTARTING, 1, reasons.RANK_FAILED)
    assert step.delete == ("q-0-ps-0", "q-0-worker-0", "q-0-worker-1")
    assert step.status.message == ("pod q-0-worker-0: container trainer exited with code 137 (OOMKilled); "
                                   "restarting the trial (restart 1 of at most 2)")


def test_a_restarting_trial_waits_until_its_old_pods_are_gone_before_recreating_them():
    going = [pod("q-0-worker-0", deleting=True)]
    waiting = trials.step(trial(Phase.RESTARTING, restarts=1, start_time=T0), going, context())
    assert (waiting.status.phase, waiting.create, waiting.delete) == (Phase.RESTARTING, False, ())
    recreated = trials.step(trial(Phase.RESTARTING, restarts=1, start_time=T0), [], context())
    assert (recreated.status.phase, recreated.create) == (Phase.CREATED, True)


def test_after_backoff_limit_restarts_the_trial_fails_naming_pod_exit_code_and_reason():
    pods = all_running()
    pods[2] = pod("q-0-worker-1", "Failed", exit_code=1, reason="Error", message="RuntimeError: NCCL timeout")
    step = trials.step(trial(Phase.RUNNING, restarts=2, start_time=T0), pods, context(backoff_limit=2))
    assert (step.status.phase, step.status.reason) == (Phase.FAILED, reasons.BACKOFF_LIMIT_EXCEEDED)
    assert step.status.message == ("pod q-0-worker-1: container trainer exited with code 1 (Error): "
                                   "RuntimeError: NCCL timeout; backoffLimit 2 reached after 2 restarts")
    assert step.status.completion_time == T0
    # cleanPodPolicy Running (the default): the pods still running go, the failed one stays for its logs.
    assert step.delete == ("q-0-ps-0", "q-0-worker-0")


def test_backoff_limit_zero_fails_at_the_first_failure():
    pods = all_running()
    pods[1] = pod("q-0-worker-0", "Failed", exit_code=1, reason="Error")
    assert trials.step(trial(Phase.RUNNING, start_time=T0), pods, context(backoff_limit=0)).status.phase == Phase.FAILED


ECHO = "ringleader: rank 1 (worker) failed: lost contact with a peer rank (it died, hung or is unreachable): Read error"


def test_a_peer_that_lost_contact_is_not_blamed_while_the_grace_for_the_cause_runs():
    # The cold-CI failure: worker-0's exit (lost contact) is seen before worker-1's SIGKILL is.
    pods = all_running()
    pods[1] = pod("q-0-worker-0", "Failed", exit_code=1, reason="Error", message=ECHO)
    waiting = trials.step(trial(Phase.RUNNING, start_time=T0), pods, context(at=61, backoff_limit=0))
    assert (waiting.status.phase, waiting.status.reason) == (Phase.RUNNING, reasons.DECIDING_CAUSE)
    assert waiting.delete == () and not waiting.create
    pods[2] = pod("q-0-worker-1", "Failed", exit_code=137, reason="Error", finished="2030-01-01T00:01:01Z")
    decided = trials.step(waiting.status, pods, context(at=62, backoff_limit=0))
    assert decided.status.phase == Phase.FAILED
    assert decided.status.message.startswith("pod q-0-worker-1: container trainer exited with code 137 (Error) "
                                             "(and 1 more pod failed)")


def test_after_the_grace_a_lone_echo_is_blamed_or_the_rank_it_names():
    pods = all_running()
    pods[1] = pod("q-0-worker-0", "Failed", exit_code=1, reason="Error", message=ECHO)
    late = trials.step(trial(Phase.RUNNING, start_time=T0), pods, context(at=70, backoff_limit=0))
    assert late.status.phase == Phase.FAILED and late.status.message.startswith("pod q-0-worker-0: container")
    pods[1] = pod("q-0-worker-0", "Failed", exit_code=1, reason="Error", message=ECHO.replace("a peer rank", "rank 2"))
    named = trials.step(trial(Phase.RUNNING, start_time=T0), pods, context(at=70, backoff_limit=0))
    assert named.status.message.startswith("pod q-0-worker-1 stopped responding: pod q-0-worker-0: container")


# A ring of 4 workers, 2 to a pod: pod worker-0 runs ranks 0 and 1, pod worker-1 ranks 2 and 3.
PAIRS = (trials.ExpectedPod("q-0-worker-0", "worker", 0, 2), trials.ExpectedPod("q-0-worker-1", "worker", 2, 2))


def pair_pod(expected, phase="Running", *, exit_code=None, message=None, finished="2030-01-01T00:01:00Z"):
    found = pod(expected.name, phase, exit_code=exit_code, reason="Error" if exit_code else None, message=message,
                finished=finished)
    found["metadata"]["labels"].update({constants.LABEL_RANK: str(expected.rank),
                                        constants.LABEL_LOCAL_WORLD_SIZE: str(expected.ranks)})
    return found


def pairs_context(at=0, **policy):
    return dataclasses.replace(context(at, **policy), expected=PAIRS)


def test_pods_of_several_ranks_are_counted_as_pods_and_their_ranks_as_workers():
    assert trials.step(trial(), [], pairs_context()).status.message == (
        "created 2 pods (4 workers, 2 to a pod); waiting for all of them to be scheduled")


KILLED_IN_POD = "ringleader: rank 3 (worker-1 local rank 1, killed by SIGKILL) failed: no reason of its own"
LOST_RANK_3 = "ringleader: rank 0 (worker-0 local rank 0, exit code 1) failed: lost contact with rank 3 (it died)"


def test_a_rank_killed_inside_a_pod_blames_its_pod_and_names_the_rank_not_the_pod_that_lost_it():
    pods = [pair_pod(PAIRS[0], "Failed", exit_code=1, message=LOST_RANK_3),
            pair_pod(PAIRS[1], "Failed", exit_code=137, message=KILLED_IN_POD, finished="2030-01-01T00:01:01Z")]
    step = trials.step(trial(Phase.RUNNING, start_time=T0), pods, pairs_context(at=62, backoff_limit=0))
    assert (step.status.phase, step.status.reason) == (Phase.FAILED, reasons.BACKOFF_LIMIT_EXCEEDED)
    assert step.status.message.startswith(f"pod q-0-worker-1: container trainer exited with code 137 (Error): "
                                          f"{KILLED_IN_POD} (and 1 more pod failed)")
    restarted = trials.step(trial(Phase.RUNNING, start_time=T0), pods, pairs_context(at=62, backoff_limit=1))
    assert (restarted.status.phase, restarted.status.restarts) == (Phase.RESTARTING, 1)
    assert restarted.delete == ("q-0-worker-0", "q-0-worker-1")


def test_an_echo_naming_a_rank_inside_a_pod_still_running_blames_that_pod():
    pods = [pair_pod(PAIRS[0], "Failed", exit_code=1, message=LOST_RANK_3), pair_pod(PAIRS[1])]
    step = trials.step(trial(Phase.RUNNING, start_time=T0), pods, pairs_context(at=75, backoff_limit=0))
    assert step.status.phase == Phase.FAILED
    assert step.status.message.startswith("pod q-0-worker-1 stopped responding: pod q-0-worker-0: container "
                                          "trainer exited with code 1"), step.status.message


def test_a_pod_that_exited_0_outside_the_runtime_is_blamed_not_the_peer_that_lost_it():
    # os._exit(0) in user code: the pod Succeeded without the message every rank the runtime ends leaves.
    pods = all_running()
    pods[1] = pod("q-0-worker-0", "Failed", exit_code=1, reason="Error", message=ECHO.replace("a peer rank", "rank 2"))
    pods[2] = pod("q-0-worker-1", "Succeeded", exit_code=0, reason="Completed", message="")
    step = trials.step(trial(Phase.RUNNING, start_time=T0), pods, context(at=70, backoff_limit=0))
    assert step.status.phase == Phase.FAILED
    assert step.status.message.startswith("pod q-0-worker-1 exited with code 0 before its run ended (os._exit in user "
                                          "code?); pod q-0-worker-0: container trainer exited with code 1")


def test_a_pod_the_runtime_ended_is_not_taken_for_one_that_left_early():
    pods = all_running()
    pods[1] = pod("q-0-worker-0", "Failed", exit_code=1, reason="Error", message=ECHO.replace("a peer rank", "rank 2"))
    pods[2] = pod("q-0-worker-1", "Succeeded", exit_code=0, reason="Completed", message="ringleader: ended, 20 records")
    step = trials.step(trial(Phase.RUNNING, start_time=T0), pods, context(at=70, backoff_limit=0))
    assert not step.status.message.startswith("pod q-0-worker-1 exited with code 0")


def test_a_pod_deleted_while_the_trial_runs_breaks_the_gang_and_restarts_the_trial():
    pods = all_running()
    pods[1] = pod("q-0-worker-0", deleting=True)
    step = trials.step(trial(Phase.RUNNING, start_time=T0), pods, context())
    assert (step.status.phase, step.status.reason) == (Phase.RESTARTING, reasons.POD_DELETED)
    assert step.status.message.startswith("pod q-0-worker-0 was deleted")


def test_the_deadline_fails_an_active_trial_at_its_start_plus_active_deadline_seconds():
    before = trials.step(trial(Phase.RUNNING, start_time=T0), all_running(), context(at=59, active_deadline_seconds=60))
    at = trials.step(trial(Phase.RUNNING, start_time=T0), all_running(), context(at=60, active_deadline_seconds=60))
    assert before.status.phase == Phase.RUNNING
    assert (at.status.phase, at.status.reason) == (Phase.FAILED, reasons.DEADLINE_EXCEEDED)
    assert at.delete == ("q-0-ps-0", "q-0-worker-0", "q-0-worker-1")


def test_the_deadline_counts_from_the_trials_start_across_restarts():
    deadline = trials.deadline_of(trial(Phase.RESTARTING, restarts=2, start_time=T0),
                                  spec_.RunPolicy(active_deadline_seconds=30))
    assert deadline == T0 + datetime.timedelta(seconds=30)
    assert (trials.deadline_of(trial(Phase.SUCCEEDED, start_time=T0), spec_.RunPolicy(active_deadline_seconds=30))
            is None)


def test_when_all_ranks_succeed_the_trial_succeeds_with_the_aggregators_summary():
    summary = json.dumps({"throughput": 250.0, "iterationTimeP50Seconds": 0.5})
    pods = [pod("q-0-ps-0", "Succeeded", exit_code=0), pod("q-0-worker-0", "Succeeded", exit_code=0, message=summary),
            pod("q-0-worker-1", "Succeeded", exit_code=0)]
    step = trials.step(trial(Phase.RUNNING, start_time=T0), pods, context(clean_pod_policy="None"))
    assert (step.status.phase, step.status.summary.throughput) == (Phase.SUCCEEDED, 250.0)
    assert step.status.message == "all 2 workers succeeded: 250.0 samples/s"
    assert step.delete == ()


def waiting_for_mlflow(rank, published=5, recorded=20, waited=30):
    return unpublished.last_waiting(
        unpublished.waiting_line(rank, published, recorded, "http://mlflow:5000", waited, 900))


def test_a_server_still_running_after_the_workers_holds_the_trial_while_it_waits_for_mlflow():
    summary = json.dumps({"throughput": 250.0})
    pods = [pod("q-0-ps-0"), pod("q-0-worker-0", "Succeeded", exit_code=0, message=summary),
            pod("q-0-worker-1", "Succeeded", exit_code=0)]  # the workers ended at T0 + 60 s
    running = trial(Phase.RUNNING, start_time=T0, reason=reasons.ALL_PODS_RUNNING)
    # A server ends a moment after the workers (its last publish): the trial waits without a word.
    settling = trials.step(running, pods, context(at=61, clean_pod_policy="None"))
    assert (settling.status, settling.delete) == (running, ())
    assert settling.due == T0 + datetime.timedelta(seconds=60 + 10)
    # Its log says it waits for MLflow: the trial waits too, saying so, at most recordsWaitSeconds and a grace.
    told = trials.step(running, pods,
                       dataclasses.replace(context(at=90), records=pending_records.Records(waiting_for_mlflow(0))))
    assert (told.status.phase, told.status.reason) == (Phase.RUNNING, reasons.RECORDS_PENDING)
    assert told.status.message == ("all workers succeeded; 2 of 3 ranks' records published; waiting for MLflow at "
                                   "http://mlflow:5000: rank 0 has 5 of 20 iterations published, after 30 of at most "
                                   "900 s")
    assert told.due == T0 + datetime.timedelta(seconds=60 + 900 + 60)
    over = trials.step(running, pods, dataclasses.replace(context(at=60 + 900 + 60, clean_pod_policy="None"),
                                                          records=pending_records.Records(waiting_for_mlflow(0))))
    assert (over.status.phase, over.status.summary.throughput, over.delete) == (Phase.SUCCEEDED, 250.0, ("q-0-ps-0",))
    # Silent past the settling time: a server that hangs, stopped as ever, since nothing is left to serve.
    silent = trials.step(running, pods, context(at=71, clean_pod_policy="None"))
    assert (silent.status.phase, silent.delete) == (Phase.SUCCEEDED, ("q-0-ps-0",))


def test_ranks_that_trained_and_wait_for_mlflow_make_the_trial_records_pending():
    running = trial(Phase.RUNNING, start_time=T0, reason=reasons.ALL_PODS_RUNNING)
    step = trials.step(running, all_running(),
                       dataclasses.replace(context(), records=pending_records.Records(waiting_for_mlflow(1))))
    assert (step.status.phase, step.status.reason) == (Phase.RUNNING, reasons.RECORDS_PENDING)
    assert step.status.message == ("0 of 3 ranks' records published; waiting for MLflow at http://mlflow:5000: rank 1 "
                                   "has 5 of 20 iterations published, after 30 of at most 900 s")
    # A line read before its rank's pod ended says nothing of the ranks still running.
    pods = [pod("q-0-ps-0"), pod("q-0-worker-0", "Succeeded", exit_code=0), pod("q-0-worker-1")]
    stale = trials.step(running, pods,
                        dataclasses.replace(context(), records=pending_records.Records(waiting_for_mlflow(1))))
    assert stale.status == running


def test_ranks_that_gave_up_waiting_fail_the_trial_records_incomplete_and_their_pods_are_kept():
    def gave_up(name, rank, published):
        reason = unpublished.incomplete_reason(rank, published, 20, "http://mlflow:5000", 900)
        return pod(name, "Failed", exit_code=1, reason="Error", message=f"ringleader: rank {rank} (worker) failed "
                   f"(permanent): {reason}")

    pods = [pod("q-0-ps-0", "Succeeded", exit_code=0), gave_up("q-0-worker-0", 1, 5), gave_up("q-0-worker-1", 2, 7)]
    step = trials.step(trial(Phase.RUNNING, start_time=T0), pods, context(at=120, clean_pod_policy="All"))
    assert ((step.status.phase, step.status.reason, step.status.restarts)
            == (Phase.FAILED, reasons.RECORDS_INCOMPLETE, 0))
    assert step.status.message.startswith("records incomplete: 12 of 40 iterations of 2 ranks published: MLflow did "
                                          "not take the rest within tracking.recordsWaitSeconds")
    assert "for pod in q-0-worker-0 q-0-worker-1; do kubectl logs -n NAMESPACE $pod | ringleader publish " \
           "--from-log - " in step.status.message
    assert step.delete == ("q-0-ps-0",)  # cleanPodPolicy All, but the pods whose logs hold records stay


def test_workers_that_exit_0_without_the_summary_fail_the_trial_never_succeed_it():
    # What os._exit(0) in a model factory looks like: every rank "succeeds" before training, and writes nothing.
    pods = [pod("q-0-ps-0", "Succeeded", exit_code=0), pod("q-0-worker-0", "Succeeded", exit_code=0),
            pod("q-0-worker-1", "Succeeded", exit_code=0)]
    step = trials.step(trial(Phase.RUNNING, start_time=T0), pods, context(clean_pod_policy="None"))
    assert (step.status.phase, step.status.reason) == (Phase.FAILED, reasons.EXITED_EARLY)
    assert step.status.message.startswith("all 2 workers exited with code 0 but pod q-0-worker-0 left no summary")


def test_clean_pod_policy_all_deletes_every_pod_of_a_finished_trial():
    pods = [pod("q-0-worker-0", "Succeeded", exit_code=0), pod("q-0-worker-1", "Failed", exit_code=1)]
    step = trials.step(trial(Phase.FAILED), pods, context(clean_pod_policy="All"))
    assert step.delete == ("q-0-worker-0", "q-0-worker-1")


def test_clean_pod_policy_none_keeps_the_pods_of_a_failed_trial():
    assert trials.step(trial(Phase.FAILED, reason=reasons.BACKOFF_LIMIT_EXCEEDED), all_running(),
                       context(clean_pod_policy="None")).delete == ()


def test_suspending_deletes_the_pods_and_resuming_starts_the_trial_over():
    ctx = trials.Context(now=T0, run_policy=spec_.RunPolicy(suspend=True), expected=EXPECTED, suspended=True)
    suspended = trials.step(trial(Phase.RUNNING, start_time=T0), all_running(), ctx)
    assert (suspended.status.phase, len(suspended.delete)) == (Phase.SUSPENDED, 3)
    resumed = trials.step(suspended.status, [], context(at=100))
    assert (resumed.status.phase, resumed.create, resumed.status.start_time) == (
        Phase.CREATED, True, T0 + datetime.timedelta(seconds=100))


def test_a_trial_whose_objects_are_refused_fails_for_good():
    failed = trials.create_failed(trial(Phase.CREATED), "spec.containers[0].image: Required value", T0)
    assert (failed.phase, failed.reason) == (Phase.FAILED, reasons.CREATE_FAILED)


def test_cleanup_under_policy_running_keeps_a_pod_whose_container_exited_before_its_phase_caught_up():
    exited = pod("q-0-worker-1", "Running", exit_code=137, reason="Error")  # the kubelet has not marked it Failed yet
    still_running = pod("q-0-worker-0")
    doomed = cleanup.pods_to_delete([exited, still_running], spec_.CleanPodPolicy.RUNNING, workers_done=False,
                                     stop_running=False)
    assert doomed == ("q-0-worker-0",)


PULL_FAILED = ('Back-off pulling image "localhost/ringleader/does-not-exist:1.0": ErrImagePull: '
               'failed to pull and unpack '
               'image "localhost/ringleader/does-not-exist:1.0": failed to resolve reference "localhost/ringleader/'
               'does-not-exist:1.0": failed to do request: Head "https://localhost/v2/ringleader/does-not-exist/'
               'manifests/1.0": dial tcp 127.0.0.1:443: connect: connection refused')


def waiting_pod(name, reason, message="", created="2030-01-01T00:00:00Z"):
    found = pod(name, "Pending")
    found["metadata"]["creationTimestamp"] = created
    found["status"]["containerStatuses"] = [{"name": "trainer",
                                             "state": {"waiting": {"reason": reason, "message": message}}}]
    return found


def created(pods):
    for found in pods:
        found["metadata"]["creationTimestamp"] = "2030-01-01T00:00:00Z"
    return pods


def test_a_pod_that_cannot_pull_its_image_waits_until_its_startup_deadline_then_fails_the_trial_naming_the_cause():
    pods = created(all_running())
    pods[1] = waiting_pod("q-0-worker-0", "ImagePullBackOff", PULL_FAILED)
    before = trials.step(trial(Phase.CREATED, start_time=T0), pods, context(at=119, startup_deadline_seconds=120))
    assert (before.status.phase, before.status.reason) == (Phase.CREATED, reasons.WAITING_FOR_PODS)
    assert before.due == T0 + datetime.timedelta(seconds=120)  # a pass then, though no pod event may come
    assert PULL_FAILED in before.status.message  # whole: nothing cut from the middle of the image's name

    after = trials.step(before.status, pods, context(at=120, startup_deadline_seconds=120))
    assert (after.status.phase, after.status.reason) == (Phase.FAILED, reasons.STARTUP_DEADLINE_EXCEEDED)
    assert after.status.message == ("pod q-0-worker-0 did not start within startupDeadlineSeconds=120 of its creation: "
                                    f"ImagePullBackOff ({PULL_FAILED})")
    assert after.status.restarts == 0 and after.status.completion_time == T0 + datetime.timedelta(seconds=120)
    # Every pod goes, whatever cleanPodPolicy says: the waiting one holds resources and has no log to keep.
    assert after.delete == ("q-0-ps-0", "q-0-worker-0", "q-0-worker-1")


def test_the_startup_deadline_is_the_operators_default_unless_the_experiment_sets_one():
    pods = created(all_running())
    pods[2] = waiting_pod("q-0-worker-1", "CreateContainerConfigError", 'secret "mlflow-credentials" not found')
    ctx = trials.Context(now=T0 + datetime.timedelta(seconds=60), run_policy=spec_.RunPolicy(), expected=EXPECTED,
                         default_startup_deadline_seconds=60)
    failed = trials.step(trial(Phase.CREATED, start_time=T0), pods, ctx)
    assert failed.status.reason == reasons.STARTUP_DEADLINE_EXCEEDED
    assert failed.status.message.endswith('CreateContainerConfigError (secret "mlflow-credentials" not found)')
    assert (dataclasses.replace(ctx, run_policy=spec_.RunPolicy(startup_deadline_seconds=30)).startup_deadline_seconds
            == 30)


def test_an_unschedulable_pod_fails_the_trial_at_its_startup_deadline_counting_the_others_not_running():
    pods = created([pod(e.name, "Pending", scheduled=False) for e in EXPECTED])
    for found in pods:
        found["status"]["conditions"][0].update(reason="Unschedulable",
                                                message="0/1 nodes are available: 1 Insufficient cpu.")
    failed = trials.step(trial(Phase.CREATED, start_time=T0), pods, context(at=300))
    assert failed.status.message == ("pod q-0-ps-0 did not start within startupDeadlineSeconds=300 of its creation: "
                                     "unschedulable (0/1 nodes are available: 1 Insufficient cpu.) "
                                     "(and 2 more pods not running)")


SPREAD_UNMET = ("0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. preemption: 0/2 nodes "
                "are available: 2 No preemption victims found for incoming pod.")


def spread_blocked_pods():
    pods = created(all_running())
    pods[2] = pod("q-0-worker-1", "Pending", scheduled=False)
    pods[2]["metadata"]["creationTimestamp"] = "2030-01-01T00:00:00Z"
    pods[2]["status"]["conditions"][0].update(reason="Unschedulable", message=SPREAD_UNMET)
    return pods


def test_a_required_placement_the_nodes_cannot_meet_waits_naming_it_then_fails_with_its_own_reason():
    ctx = dataclasses.replace(context(at=100, startup_deadline_seconds=120),
                              placement=spec_.Placement(ranks="Spread"))
    waiting = trials.step(trial(Phase.CREATED, start_time=T0), spread_blocked_pods(), ctx)
    assert (waiting.status.phase, waiting.status.reason) == (Phase.CREATED, reasons.WAITING_FOR_PLACEMENT)
    assert waiting.status.message.startswith("placement Spread by kubernetes.io/hostname cannot be met yet, so pods "
                                             "wait (until startupDeadlineSeconds=120): 2 of 3 pods running")
    assert waiting.due == T0 + datetime.timedelta(seconds=120)

    failed = trials.step(waiting.status, spread_blocked_pods(),
                         dataclasses.replace(ctx, now=T0 + datetime.timedelta(seconds=120)))
    assert (failed.status.phase, failed.status.reason) == (Phase.FAILED, reasons.PLACEMENT_UNSATISFIABLE)
    assert failed.status.message.startswith("placement Spread by kubernetes.io/hostname was not met within "
                                            "startupDeadlineSeconds=120: pod q-0-worker-1 fits no node")
    assert ("set `scheduling.placement.mode` to Preferred" in failed.status.message
            and SPREAD_UNMET in failed.status.message)
    assert failed.delete == ("q-0-ps-0", "q-0-worker-0", "q-0-worker-1")


def test_an_affinity_the_trial_did_not_ask_for_or_only_prefers_is_an_ordinary_wait():
    for placement in (spec_.Placement(), spec_.Placement(ranks="Spread", mode="Preferred")):
        ctx = dataclasses.replace(context(at=100, startup_deadline_seconds=120), placement=placement)
        assert trials.step(trial(Phase.CREATED, start_time=T0), spread_blocked_pods(), ctx).status.reason == \
            reasons.WAITING_FOR_PODS
        ctx = dataclasses.replace(ctx, now=T0 + datetime.timedelta(seconds=120))
        assert trials.step(trial(Phase.CREATED, start_time=T0), spread_blocked_pods(), ctx).status.reason == \
            reasons.STARTUP_DEADLINE_EXCEEDED


def test_an_image_reference_that_does_not_parse_fails_the_trial_at_once():
    pods = created(all_running())
    pods[1] = waiting_pod("q-0-worker-0", "InvalidImageName", 'Failed to apply default image tag "Bad Image": '
                                                              'couldn\'t parse image name "Bad Image": '
                                                              'invalid reference format')
    failed = trials.step(trial(Phase.CREATED, start_time=T0), pods, context(at=1))
    assert (failed.status.phase, failed.status.reason) == (Phase.FAILED, reasons.INVALID_IMAGE)
    assert failed.status.message.startswith("pod q-0-worker-0 can never start: InvalidImageName (Failed to apply")


def test_a_finished_startup_failure_keeps_stopping_pods_that_reappear_whatever_the_policy():
    failed = trial(Phase.FAILED, reason=reasons.STARTUP_DEADLINE_EXCEEDED)
    assert trials.step(failed, all_running(), context(clean_pod_policy="None")).delete == (
        "q-0-ps-0", "q-0-worker-0", "q-0-worker-1")


def test_a_failure_the_runtime_calls_permanent_fails_the_trial_at_once_without_spending_backoff_limit():
    said = ("ringleader: rank 1 (worker) failed (permanent): ModelError: model 'nosuch.nets:tiny': "
            "importing nosuch.nets failed: cannot import 'nosuch' (No module named 'nosuch'); "
            "install it in the image or put it on PYTHONPATH")
    pods = all_running()
    pods[1] = pod("q-0-worker-0", "Failed", exit_code=1, reason="Error", message=said)
    step = trials.step(trial(Phase.RUNNING, start_time=T0), pods, context(backoff_limit=3))
    assert (step.status.phase, step.status.reason, step.status.restarts) == (Phase.FAILED, reasons.PERMANENT_FAILURE, 0)
    assert step.status.message == (f"pod q-0-worker-0: container trainer exited with code 1 (Error): {said}; "
                                   "not restarted: the runtime reported a failure no restart can fix")


def test_a_permanent_failure_of_a_killed_pod_is_not_believed():
    # A signal came from outside: the line the rank left before it says nothing about what killed it.
    said = "ringleader: rank 1 (worker) failed (permanent): DataError: /data: not a directory"
    pods = all_running()
    pods[1] = pod("q-0-worker-0", "Failed", exit_code=137, reason="OOMKilled", message=said)
    assert (trials.step(trial(Phase.RUNNING, start_time=T0), pods, context(backoff_limit=3)).status.phase
            == Phase.RESTARTING)


def on_node(name, node, *, answering=True):
    """A running pod on `node`; one whose node stopped answering, as the node controller leaves it: Ready=False
    while its container still says ready and running (no kubelet is left to say otherwise)."""
    found = pod(name)
    found["spec"]["nodeName"] = node
    found["status"]["containerStatuses"] = [{"name": "trainer", "ready": True, "state": {"running": {}}}]
    found["status"]["conditions"].append({"type": "Ready", "status": "True" if answering else "False"})
    return found


def test_a_rank_on_a_lost_node_restarts_the_trial_naming_the_node():
    pods = [on_node("q-0-ps-0", "n1"), on_node("q-0-worker-0", "n2", answering=False), on_node("q-0-worker-1", "n3")]
    step = trials.step(trial(Phase.RUNNING, start_time=T0), pods, context(backoff_limit=1))
    assert (step.status.phase, step.status.reason, step.status.restarts) == (Phase.RESTARTING, reasons.NODE_LOST, 1)
    assert "node n2 stopped answering" in step.status.message and "q-0-worker-0 (rank 1)" in step.status.message
    assert step.delete == ("q-0-ps-0", "q-0-worker-0", "q-0-worker-1")


def test_a_lost_node_past_the_backoff_limit_fails_the_trial_with_its_own_reason_and_stops_the_survivors():
    pods = [on_node("q-0-ps-0", "n1"), on_node("q-0-worker-0", "n1"), on_node("q-0-worker-1", "n3", answering=False)]
    step = trials.step(trial(Phase.RUNNING, start_time=T0), pods, context(backoff_limit=0))
    assert (step.status.phase, step.status.reason) == (Phase.FAILED, reasons.NODE_LOST)
    assert step.status.message.startswith("node n3 stopped answering")
    assert "backoffLimit 0 reached" in step.status.message
    assert step.delete == ("q-0-ps-0", "q-0-worker-0", "q-0-worker-1")


def test_a_pod_whose_own_container_is_not_ready_is_not_taken_for_a_lost_node():
    starting = on_node("q-0-worker-0", "n2", answering=False)
    starting["status"]["containerStatuses"][0]["ready"] = False
    assert not trials.pods_.on_lost_node(starting)
    assert trials.pods_.on_lost_node(on_node("q-0-worker-0", "n2", answering=False))
    assert not trials.pods_.on_lost_node(on_node("q-0-worker-0", "n2"))


# The scheduler's own words (Kubernetes 1.34) for a pod asking 64 CPUs of 2-CPU nodes, and for one that would fit
# a node once other pods of the same priority leave.
TOO_LARGE = ("0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 Preemption is "
             "not helpful for scheduling.")
BUSY = ("0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims "
        "found for incoming pod.")


def unschedulable(message):
    pods = created(all_running())
    pods[1] = pod("q-0-worker-0", "Pending", scheduled=False)
    pods[1]["metadata"]["creationTimestamp"] = "2030-01-01T00:00:00Z"
    pods[1]["spec"] = {"containers": [{"name": "trainer", "resources": {"requests": {"cpu": "64", "memory": "1Gi"}}}]}
    pods[1]["status"]["conditions"][0].update(reason="Unschedulable", message=message)
    return pods


def test_a_request_no_node_can_ever_hold_fails_the_trial_at_once_naming_the_request():
    failed = trials.step(trial(Phase.CREATED, start_time=T0), unschedulable(TOO_LARGE), context(at=1))
    assert (failed.status.phase, failed.status.reason) == (Phase.FAILED, reasons.REQUEST_FITS_NO_NODE)
    assert failed.status.message.startswith("pod q-0-worker-0 requests cpu 64, memory 1Gi, more than any node has: "
                                            "lower workers.resources"), failed.status.message
    assert "3 Insufficient cpu" in failed.status.message  # the scheduler's verdict, kept
    assert failed.delete == ("q-0-ps-0", "q-0-worker-0", "q-0-worker-1")  # none left waiting or running


def test_where_the_operator_reads_nodes_the_request_is_set_against_the_largest_nodes_allocatable():
    rooms = capacity.rooms([{"metadata": {"name": name}, "status": {
        "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}]}}
        for name, cpu in (("n1", "1"), ("n2", "2"), ("n3", "2"))], [])
    failed = trials.step(trial(Phase.CREATED, start_time=T0), unschedulable(TOO_LARGE),
                         dataclasses.replace(context(at=1), rooms=rooms))
    assert failed.status.message.startswith("pod q-0-worker-0 requests cpu 64, memory 1Gi, more than any node has "
                                            "(the largest node, n2, has cpu 2 allocatable): lower workers.resources"), \
        failed.status.message
    assert "3 Preemption is not helpful" in failed.status.message  # the scheduler's verdict, kept


def test_a_trial_waiting_for_capacity_creates_nothing_and_is_looked_at_again_on_a_timer():
    verdict = capacity.CapacityVerdict(capacity.CapacityKind.WAIT, "needs 3 pods of cpu 1; free: n1 cpu 500m")
    step = trials.step(trial(), [], dataclasses.replace(context(), capacity=verdict, capacity_retry_seconds=7))
    assert (step.status.phase, step.status.reason, step.create) == (Phase.PENDING, reasons.WAITING_FOR_CAPACITY, False)
    assert step.status.message == ("waiting for free capacity for all 3 pods (1 parameter server, 2 workers): "
                                   "needs 3 pods of cpu 1; free: n1 cpu 500m")
    assert step.due == T0 + datetime.timedelta(seconds=7) and step.status.start_time is None


def test_a_request_that_waits_for_busy_nodes_is_an_ordinary_wait_until_the_startup_deadline():
    waiting = trials.step(trial(Phase.CREATED, start_time=T0), unschedulable(BUSY), context(at=1))
    assert (waiting.status.phase, waiting.status.reason) == (Phase.CREATED, reasons.WAITING_FOR_PODS)
    late = trials.step(trial(Phase.CREATED, start_time=T0), unschedulable(BUSY),
                       context(at=120, startup_deadline_seconds=120))
    assert late.status.reason == reasons.STARTUP_DEADLINE_EXCEEDED
