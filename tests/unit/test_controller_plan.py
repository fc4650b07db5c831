"""An experiment's status from its trials: conditions (the contract), phase (their summary), sweeps, progress, due
times, events."""

import datetime

import pytest

from ringleader import api
from ringleader.models import eta
from ringleader.api import constants
from ringleader.api import status as status_
from ringleader.contract import progress as progress_line
from ringleader.controller import capacity, conditions, due, estimates, events, plan, reasons, rendering, statuses
from ringleader.controller import settings as settings_

Phase = status_.Phase
Type = status_.ConditionType
T0 = datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc)


def experiment(**spec):
    return api.parse({"apiVersion": constants.API_VERSION, "kind": constants.KIND,
                      "metadata": {"name": "q", "namespace": "default", "generation": 3}, "spec": spec})


def running_pods(trial):
    return [{"metadata": {"name": e.name, "labels": {constants.LABEL_ROLE: e.role, constants.LABEL_RANK: str(e.rank)}},
             "spec": {"nodeName": "node-1"}, "status": {"phase": "Running"}}
            for e in rendering.expected_pods(trial)]


def read(*iterations, iterations_in_all=200):
    """The progress lines a log read found, one per iteration given (no timestamps)."""
    return tuple(progress_line.Line(i, iterations_in_all, 0.005) for i in iterations)


def decide(dte, old=None, *, pods=None, at=0, progress=None, room=None):
    """`progress` maps a trial to the iteration its last progress line says, or to the lines read; `room` is the
    free capacity admission weighs (capacity.Capacity)."""
    expansion = api.expand(dte)
    seen = plan.Observation(now=T0 + datetime.timedelta(seconds=at), generation=3, pods=pods or {},
                            expected={t.name: rendering.expected_pods(t) for t in expansion.trials},
                            progress={name: read(i) if isinstance(i, int) else i
                                      for name, i in (progress or {}).items()},
                            capacity=room)
    return plan.decide(dte, expansion, old or status_.ExperimentStatus(), seen)


def condition(status, type_):
    return conditions.find(status.conditions, type_)


# -- conditions ------------------------------------------------------------------------------------

def test_a_condition_keeps_its_transition_time_until_its_status_flips():
    first = conditions.set_condition([], Type.RUNNING, False, "WaitingForPods", "a", now=T0, generation=1)
    later = T0 + datetime.timedelta(seconds=5)
    same = conditions.set_condition(first, Type.RUNNING, False, "WaitingForPods", "b", now=later, generation=1)
    flipped = conditions.set_condition(same, Type.RUNNING, True, "TrialRunning", "c", now=later, generation=2)
    assert same[0].last_transition_time == T0 and same[0].message == "b"
    assert flipped[0].last_transition_time == later and flipped[0].observed_generation == 2


@pytest.mark.parametrize("true_types, phase", [
    ((), Phase.PENDING),
    ((Type.CREATED,), Phase.CREATED),
    ((Type.CREATED, Type.RUNNING), Phase.RUNNING),
    ((Type.CREATED, Type.RUNNING, Type.RESTARTING), Phase.RESTARTING),
    ((Type.CREATED, Type.SUSPENDED), Phase.SUSPENDED),
    ((Type.CREATED, Type.SUCCEEDED), Phase.SUCCEEDED),
    ((Type.CREATED, Type.SUSPENDED, Type.FAILED), Phase.FAILED),
])
def test_the_phase_is_derived_from_the_conditions(true_types, phase):
    found = []
    for type_ in true_types:
        found = conditions.set_condition(found, type_, True, "Because", "", now=T0, generation=1)
    assert conditions.phase_of(found) == phase


def test_an_experiment_waiting_for_kueue_is_queued():
    found = conditions.set_condition([], Type.CREATED, True, "Because", "", now=T0, generation=1)
    found = conditions.set_condition(found, Type.RUNNING, False, reasons.WAITING_FOR_ADMISSION, "", now=T0,
                                     generation=1)
    assert conditions.phase_of(found) == Phase.QUEUED
    found = conditions.set_condition(found, Type.RUNNING, False, reasons.WAITING_FOR_PODS, "", now=T0, generation=1)
    assert conditions.phase_of(found) == Phase.CREATED


# -- a single trial --------------------------------------------------------------------------------

def test_a_new_experiment_is_created_and_waits_for_its_pods_to_be_scheduled():
    result = decide(experiment())
    assert result.create == (0,)
    assert result.status.phase == Phase.CREATED
    assert condition(result.status, Type.CREATED).message == "1 trial planned"
    running = condition(result.status, Type.RUNNING)
    assert (running.status, running.reason, running.observed_generation) == ("False", "WaitingForPods", 3)


def test_an_experiment_runs_when_its_trial_runs_and_reports_the_slowest_workers_progress():
    dte = experiment(model={"iterations": 200})
    created = decide(dte).status
    trial = api.expand(dte).trials[0]
    running = decide(dte, created, pods={trial.name: running_pods(trial)}, at=5).status
    assert running.phase == Phase.RUNNING
    polled = decide(dte, running, pods={trial.name: running_pods(trial)}, at=20, progress={trial.name: 37}).status
    assert (polled.progress.iteration, polled.progress.iterations, polled.progress_text) == (37, 200, "37/200")
    assert polled.replica_statuses["worker"].active == 2


def test_a_succeeded_trial_makes_the_experiment_succeed_with_its_summary():
    dte = experiment()
    trial = api.expand(dte).trials[0]
    old = status_.ExperimentStatus(trials=[status_.TrialStatus(
        name=trial.name, index=0, phase=Phase.SUCCEEDED, reason=reasons.WORKERS_SUCCEEDED,
        message="all 2 workers succeeded",
        completion_time=T0, summary=status_.Summary(throughput=99.0))])
    result = decide(dte, old, at=1).status
    assert (result.phase, result.summary.throughput, result.completion_time) == (Phase.SUCCEEDED, 99.0,
                                                                                 T0 + datetime.timedelta(seconds=1))
    assert condition(result, Type.SUCCEEDED).message == "trial q-0: all 2 workers succeeded"
    assert condition(result, Type.RUNNING).status == "False"


def test_a_failed_trial_fails_the_experiment_with_the_trials_reason_and_message():
    dte = experiment()
    old = status_.ExperimentStatus(trials=[status_.TrialStatus(
        name="q-0", index=0, phase=Phase.FAILED, reason=reasons.BACKOFF_LIMIT_EXCEEDED,
        message="pod q-0-worker-1: ...")])
    failed = condition(decide(dte, old).status, Type.FAILED)
    assert (failed.reason, failed.message) == (reasons.BACKOFF_LIMIT_EXCEEDED, "trial q-0: pod q-0-worker-1: ...")
    assert condition(decide(dte, old).status, Type.RUNNING).message == "the trial finished"


def test_a_trial_that_failed_before_its_pods_ran_is_not_said_to_have_finished():
    never = status_.ExperimentStatus(trials=[status_.TrialStatus(
        name="q-0", index=0, phase=Phase.FAILED, reason=reasons.REQUEST_FITS_NO_NODE, message="pod q-0-worker-0 ...")])
    running = condition(decide(experiment(), never).status, Type.RUNNING)
    assert (running.status, running.reason, running.message) == ("False", reasons.EXPERIMENT_FINISHED,
                                                                 "the trial never started")


def test_a_restart_shows_as_the_restarting_condition_and_clears_when_the_trial_is_recreated():
    dte = experiment()
    restarting = status_.ExperimentStatus(trials=[status_.TrialStatus(
        name="q-0", index=0, phase=Phase.RESTARTING, restarts=1, reason=reasons.RANK_FAILED, message="pod x failed",
        start_time=T0)])
    first = decide(dte, restarting, pods={"q-0": [{"metadata": {"name": "q-0-ps-0", "deletionTimestamp": "x"}}]}).status
    assert (first.phase, condition(first, Type.RESTARTING).reason) == (Phase.RESTARTING, reasons.RANK_FAILED)
    second = decide(dte, first).status
    assert condition(second, Type.RESTARTING).status == "False"
    assert second.phase == Phase.CREATED
    # The trial's own Restarting condition says what ended it, not "the trial is Created".
    ended = conditions.find(second.trials[0].conditions, Type.RESTARTING)
    assert (ended.status.value, ended.reason) == ("False", reasons.PODS_CREATED)
    assert ended.message.startswith("recreated 3 pods (1 parameter server, 2 workers) (restart 1)")


def test_a_trials_conditions_keep_when_it_was_created_started_and_failed():
    dte = experiment()
    [trial] = api.expand(dte).trials
    created = decide(dte, at=0).status
    running = decide(dte, created, pods={trial.name: running_pods(trial)}, at=10).status
    failed_pods = running_pods(trial)
    failed_pods[0]["status"] = {"phase": "Failed", "containerStatuses": [
        {"name": "trainer", "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}
    failed = decide(experiment(runPolicy={"backoffLimit": 0}), running, pods={trial.name: failed_pods}, at=30).status
    [first], [second], [third] = created.trials, running.trials, failed.trials

    def of(trial_status, type_):
        found = conditions.find(trial_status.conditions, type_)
        return found and (found.status.value, found.last_transition_time - T0)

    assert of(first, Type.CREATED) == ("True", datetime.timedelta(0)) and of(first, Type.RUNNING) is None
    assert of(second, Type.RUNNING) == ("True", datetime.timedelta(seconds=10))
    assert third.phase == Phase.FAILED
    assert of(third, Type.FAILED) == ("True", datetime.timedelta(seconds=30))
    assert of(third, Type.RUNNING) == ("False", datetime.timedelta(seconds=30))
    assert of(third, Type.CREATED) == ("True", datetime.timedelta(0))
    assert conditions.find(third.conditions, Type.FAILED).message == third.message and "137" in third.message


def test_an_invalid_spec_fails_the_experiment_and_a_corrected_one_clears_it():
    invalid = plan.invalid(status_.ExperimentStatus(), reasons.INVALID_SPEC, "`spec.x` is wrong", now=T0, generation=1)
    assert (invalid.phase, condition(invalid, Type.FAILED).message) == (Phase.FAILED, "`spec.x` is wrong")
    assert condition(decide(experiment(), invalid).status, Type.FAILED) is None


# -- sweeps ----------------------------------------------------------------------------------------

def test_a_sweep_runs_at_most_max_parallel_trials_in_order():
    dte = experiment(sweep={"matrix": {"workers": [1, 2, 4]}, "repetitions": 2, "maxParallel": 2})
    result = decide(dte)
    assert result.create == (0, 1)
    assert [t.phase for t in result.status.trials] == [Phase.CREATED] * 2 + [Phase.PENDING] * 4
    assert result.status.trials[2].reason == reasons.WAITING_FOR_SLOT
    assert result.status.trials[3].parameters == {"workers": "2", "repetition": "1"}


def node(name, *, cpu):
    return {"metadata": {"name": name}, "status": {
        "allocatable": {"cpu": cpu, "memory": "8Gi", "ephemeral-storage": "100Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}]}}


def test_without_a_gang_scheduler_a_trial_starts_only_when_its_pods_fit_and_later_trials_queue_behind_it():
    dte = experiment(sweep={"matrix": {"workers": [1, 2, 1]}, "maxParallel": 3},
                     workers={"resources": {"cpu": "1", "memory": "128Mi"}},
                     parameterServers={"resources": {"cpu": "1", "memory": "128Mi"}})
    expansion = api.expand(dte)
    demands = {t.name: rendering.demands(t, settings_.Settings()) for t in expansion.trials}
    (one_node,) = capacity.rooms([node("n1", cpu="3")], [])
    result = decide(dte, room=capacity.Capacity((one_node,), demands))
    # q-0 (1 server + 1 worker: 2 CPUs) fits; q-1 (3 pods: 3 CPUs) does not fit the 1 CPU left; q-2 would, but
    # queues behind q-1.
    assert result.create == (0,)
    assert result.placed == {"q-0-ps-0": "n1", "q-0-worker-0": "n1"}
    assert [(t.phase, t.reason) for t in result.status.trials] == [
        (Phase.CREATED, reasons.PODS_CREATED), (Phase.PENDING, reasons.WAITING_FOR_CAPACITY),
        (Phase.PENDING, reasons.WAITING_FOR_CAPACITY)]
    assert result.status.trials[1].message.startswith("waiting for free capacity for all 3 pods (1 parameter server, "
                                                      "2 workers): needs 3 pods of cpu 1")
    assert result.due == T0 + datetime.timedelta(seconds=5)  # looked at again on a timer: no event says room freed
    assert condition(result.status, Type.RUNNING).reason == reasons.WAITING_FOR_PODS
    assert result.status.progress.trials_queued == 2


def test_a_request_no_node_holds_fails_before_any_pod_is_created_naming_the_largest_node():
    dte = experiment(workers={"resources": {"cpu": "64", "memory": "128Mi"}})
    expansion = api.expand(dte)
    nodes = capacity.rooms([node("kind-worker", cpu="2")], [])
    room = capacity.Capacity(nodes, {t.name: rendering.demands(t, settings_.Settings()) for t in expansion.trials})
    result = decide(dte, room=room)
    (failed,) = result.status.trials
    assert (result.create, failed.phase, failed.reason) == ((), Phase.FAILED, reasons.REQUEST_FITS_NO_NODE)
    assert failed.message.startswith("pod q-0-worker-0 requests cpu 64, memory 128Mi"), failed.message
    assert failed.message.endswith("more than any node has: the largest node, kind-worker, has cpu 2 allocatable: "
                                   "lower workers.resources, or add a larger node"), failed.message
    assert condition(result.status, Type.RUNNING).message == "the trial never started"


def test_a_finished_trial_frees_its_slot_for_the_next_one_in_the_same_pass():
    dte = experiment(sweep={"matrix": {"workers": [1, 2]}})
    first = decide(dte).status
    done = first.model_copy(update={"trials": [first.trials[0].model_copy(update={"phase": Phase.SUCCEEDED}),
                                               first.trials[1]]})
    assert decide(dte, done).create == (1,)


def test_a_sweep_between_trials_is_running_while_its_next_trial_starts():
    dte = experiment(sweep={"matrix": {"architecture": ["ParameterServer", "RingAllReduce"]}})
    first = decide(dte).status
    assert first.phase == Phase.CREATED  # nothing ran yet: its first trial's pods are starting
    done = first.model_copy(update={"trials": [first.trials[0].model_copy(update={"phase": Phase.SUCCEEDED}),
                                               first.trials[1]]})
    between = decide(dte, done, at=1).status
    assert [t.phase for t in between.trials] == [Phase.SUCCEEDED, Phase.CREATED]
    running = condition(between, Type.RUNNING)
    assert (between.phase, running.status, running.reason) == (Phase.RUNNING, "True", reasons.TRIAL_STARTING)
    assert running.message.startswith("trial q-1: created")


def test_a_sweep_with_a_failed_trial_runs_the_others_and_fails_at_the_end_listing_it():
    dte = experiment(sweep={"matrix": {"workers": [1, 2]}})
    old = status_.ExperimentStatus(trials=[
        status_.TrialStatus(name="q-0", index=0, phase=Phase.FAILED, reason=reasons.DEADLINE_EXCEEDED,
                            message="too slow"),
        status_.TrialStatus(name="q-1", index=1, phase=Phase.SUCCEEDED, message="ok")])
    failed = condition(decide(dte, old).status, Type.FAILED)
    assert (failed.reason, failed.message) == (reasons.DEADLINE_EXCEEDED,
                                               "1 of 2 trials failed: q-0 (DeadlineExceeded: too slow)")


def test_a_sweeps_status_names_what_it_compares_and_its_best_trial_not_the_specs_defaults_or_its_last():
    dte = experiment(sweep={"matrix": {"architecture": ["ParameterServer", "PeerToPeer", "RingAllReduce"]}})
    first = decide(dte).status
    assert first.compares == status_.Compared(architecture="ParameterServer,PeerToPeer,RingAllReduce",
                                              paradigm="BSP", workers="2")
    assert first.best is None and first.summary is None
    throughputs = (1845.6, 1500.0, 1774.7)  # the ring trial ends last, but the parameter server was fastest
    done = first.model_copy(update={"trials": [t.model_copy(update={
        "phase": Phase.SUCCEEDED, "summary": status_.Summary(throughput=throughput),
        "completion_time": T0 + datetime.timedelta(seconds=t.index)})
                                               for t, throughput in zip(first.trials, throughputs)]})
    result = decide(dte, done, at=5).status
    assert result.best == status_.Best(trial="q-0", parameters={"architecture": "ParameterServer"},
                                       text="ParameterServer",
                                       throughput=1845.6)
    assert result.summary.throughput == 1845.6
    assert [t.summary.throughput for t in result.trials] == list(throughputs)  # each trial's own stays
    assert condition(result, Type.SUCCEEDED).message == ("all 3 trials succeeded; best: ParameterServer (q-0), "
                                                         "1845.6 samples/s")


def test_a_sweep_over_repetitions_names_its_best_trial_and_one_trial_needs_no_best():
    dte = experiment(sweep={"repetitions": 2, "matrix": {"workers": [2, 4]}})
    status = decide(dte).status
    assert status.compares.workers == "2,4"
    done = status.model_copy(update={"trials": [t.model_copy(update={
        "phase": Phase.SUCCEEDED, "summary": status_.Summary(throughput=100.0 + t.index)}) for t in status.trials]})
    assert decide(dte, done).status.best.text == "workers=4"  # the repetition says nothing of what it compares
    single = experiment()
    trial = api.expand(single).trials[0]
    old = status_.ExperimentStatus(trials=[status_.TrialStatus(name=trial.name, index=0, phase=Phase.SUCCEEDED,
                                                               summary=status_.Summary(throughput=99.0))])
    found = decide(single, old).status
    assert (found.best, found.summary.throughput, found.compares.architecture) == (None, 99.0, "ParameterServer")


def test_skipped_combinations_are_reported_in_the_created_condition():
    dte = experiment(sweep={"matrix": {"architecture": ["ParameterServer", "RingAllReduce"],
                                       "paradigm": ["BSP", "ASP"]}})
    message = condition(decide(dte).status, Type.CREATED).message
    assert message.startswith("3 trials planned; 1 combination skipped (RingAllReduce runs BSP only, not ASP)")


def test_pods_of_a_trial_the_spec_no_longer_has_are_deleted():
    stray = {"metadata": {"name": "q-7-worker-0", "labels": {}}, "status": {"phase": "Running"}}
    assert decide(experiment(), pods={"q-7": [stray]}).delete == ("q-7-worker-0",)


def test_a_suspended_experiment_starts_nothing_and_says_so():
    result = decide(experiment(runPolicy={"suspend": True}))
    assert (result.create, result.status.phase) == ((), Phase.SUSPENDED)
    assert condition(result.status, Type.SUSPENDED).status == "True"


# -- the estimated end ----------------------------------------------------------------------------

def stamped(*seconds_and_iterations, iterations_in_all=200):
    """Progress lines as read with the kubelet's timestamps: (seconds after T0, iteration) each."""
    return tuple(progress_line.Line(i, iterations_in_all, 0.1, T0 + datetime.timedelta(seconds=s))
                 for s, i in seconds_and_iterations)


def test_a_running_trial_is_estimated_to_end_after_its_remaining_iterations_at_its_recent_pace():
    dte = experiment(model={"iterations": 200})
    trial = api.expand(dte).trials[0]
    old = status_.ExperimentStatus(trials=[status_.TrialStatus(name="q-0", index=0, phase=Phase.RUNNING,
                                                                start_time=T0)])
    pods = {trial.name: running_pods(trial)}
    unknown = decide(dte, old, pods=pods, at=5).status.estimate
    assert (unknown.completion_time, unknown.text, unknown.message) == (None, None, eta.UNKNOWN)
    # 20 iterations in 4 s (0.2 s each), seen at T0+12 with 160 to go.
    estimate = decide(dte, old, pods=pods, at=20, progress={trial.name: stamped((8, 20), (12, 40))}).status.estimate
    end = T0 + datetime.timedelta(seconds=12 + 160 * 0.2)
    assert estimate.completion_time == estimate.trial_completion_time == end
    assert (estimate.bound, estimate.text) == (status_.EstimateBound.EXPECTED, "2030-01-01T00:00:44Z")
    assert "recent pace" in estimate.message
    # The estimate is the lines', not the clock's: a later pass with the same reads writes nothing new.
    again = decide(dte, old, pods=pods, at=90, progress={trial.name: stamped((8, 20), (12, 40))}).status.estimate
    assert again == estimate
    assert statuses.dump(decide(dte, old, pods=pods, progress={trial.name: stamped((8, 20), (12, 40))}).status)[
        "estimate"]["completionTime"] == "2030-01-01T00:00:44Z"


def test_a_pace_beyond_any_date_leaves_the_end_unset():
    dte = experiment(model={"iterations": 200})
    trial = api.expand(dte).trials[0]
    old = status_.ExperimentStatus(trials=[status_.TrialStatus(name="q-0", index=0, phase=Phase.RUNNING,
                                                                start_time=T0)])
    utc = datetime.timezone.utc
    lines = (progress_line.Line(1, 200, 0.1, datetime.datetime(1, 1, 1, tzinfo=utc)),
             progress_line.Line(2, 200, 0.1, datetime.datetime(9000, 1, 1, tzinfo=utc)))
    estimate = decide(dte, old, pods={trial.name: running_pods(trial)}, progress={trial.name: lines}).status.estimate
    assert (estimate.completion_time, estimate.trial_completion_time, estimate.text) == (None, None, None)


def test_a_trial_not_run_yet_takes_its_iterations_at_the_predicted_iteration_time_plus_start_up():
    dte = experiment(model={"iterations": 200},
                     sweep={"matrix": {"architecture": ["ParameterServer", "RingAllReduce"]}})
    # The parameter-server trial took 30 s for 200 iterations of 0.05 s: 20 s beyond them. It predicted the ring.
    first = status_.TrialStatus(
        name="q-0", index=0, parameters={"architecture": "ParameterServer"}, phase=Phase.SUCCEEDED,
        start_time=T0 - datetime.timedelta(seconds=30), completion_time=T0,
        summary=status_.Summary(iteration_time_p50_seconds=0.05,
                                predicted_iteration_seconds={"1ps": 0.05, "ring": 0.04}))
    second = status_.TrialStatus(name="q-1", index=1, parameters={"architecture": "RingAllReduce"})
    result = decide(dte, status_.ExperimentStatus(trials=[first, second]), at=1)
    assert result.create == (1,)  # created now: start-up and its iterations to go
    estimate = result.status.estimate
    assert estimate.completion_time == T0 + datetime.timedelta(seconds=1 + 20 + 200 * 0.04)
    assert estimate.trial_completion_time is None  # not running yet
    # A repetition of a measured combination is priced by its measurement.
    dte = experiment(model={"iterations": 200}, sweep={"repetitions": 2})
    measured = first.model_copy(update=dict(parameters={"repetition": "0"}))
    repeat = status_.TrialStatus(name="q-1", index=1, parameters={"repetition": "1"})
    estimate = decide(dte, status_.ExperimentStatus(trials=[measured, repeat]), at=1).status.estimate
    assert estimate.completion_time == T0 + datetime.timedelta(seconds=1 + 20 + 200 * 0.05)


def test_a_target_that_stops_trials_makes_the_estimate_an_upper_bound():
    dte = experiment(model={"iterations": 200, "evaluation": {"everyIterations": 10},
                            "target": {"loss": 0.5, "onReached": "Stop"}}, data={"format": "Digits"})
    trial = api.expand(dte).trials[0]
    old = status_.ExperimentStatus(trials=[status_.TrialStatus(name="q-0", index=0, phase=Phase.RUNNING,
                                                                start_time=T0)])
    estimate = decide(dte, old, pods={trial.name: running_pods(trial)},
                      progress={trial.name: stamped((8, 20), (12, 40))}).status.estimate
    assert (estimate.bound, estimate.text) == (status_.EstimateBound.AT_MOST, "at most 2030-01-01T00:00:44Z")
    assert "at most" in estimate.message


def test_an_ended_or_suspended_experiment_has_no_estimate():
    old = status_.ExperimentStatus(trials=[status_.TrialStatus(name="q-0", index=0, phase=Phase.SUCCEEDED)])
    assert decide(experiment(), old).status.estimate is None
    running = status_.ExperimentStatus(trials=[status_.TrialStatus(name="q-0", index=0, phase=Phase.RUNNING,
                                                                    start_time=T0)])
    assert decide(experiment(runPolicy={"suspend": True}), running).status.estimate is None


# -- due times ------------------------------------------------------------------------------------

def test_the_next_wake_is_the_earliest_deadline_not_a_periodic_sweep():
    dte = experiment(runPolicy={"activeDeadlineSeconds": 30})
    status = decide(dte).status  # trial created at T0
    timing = settings_.TimingSettings(recheck_seconds=600)
    assert due.next_wake(status, dte.spec.run_policy, T0 + datetime.timedelta(seconds=12.5), timing) == 17.5


def test_a_pod_not_running_yet_makes_a_pass_due_at_its_startup_deadline():
    dte = experiment(runPolicy={"startupDeadlineSeconds": 90})
    created = decide(dte).status
    trial = api.expand(dte).trials[0]
    pods = running_pods(trial)
    for pod in pods:
        pod["metadata"]["creationTimestamp"] = "2030-01-01T00:00:10Z"
    pods[0]["status"]["phase"] = "Pending"
    found = decide(dte, created, pods={trial.name: pods}, at=20)
    assert found.due == T0 + datetime.timedelta(seconds=100)
    timing = settings_.TimingSettings(recheck_seconds=600)
    assert due.next_wake(found.status, dte.spec.run_policy, T0 + datetime.timedelta(seconds=20), timing,
                         pods_due=found.due) == 80
    assert decide(dte, found.status, pods={trial.name: pods}, at=100).status.trials[0].reason == \
        reasons.STARTUP_DEADLINE_EXCEEDED


def test_a_running_trial_needs_no_full_pass_for_its_progress_and_a_progress_read_changes_only_the_iteration():
    dte = experiment(model={"iterations": 200})
    old = status_.ExperimentStatus(trials=[status_.TrialStatus(name="q-0", index=0, phase=Phase.RUNNING)])
    trial = api.expand(dte).trials[0]
    running = decide(dte, old, pods={trial.name: running_pods(trial)}, progress={trial.name: 37}).status
    assert due.next_wake(running, dte.spec.run_policy, T0, settings_.TimingSettings()) is None  # polling's job
    sweep = estimates.PlannedSweep.of(api.expand(dte))
    found = plan.with_progress(running, {trial.name: read(52)}, sweep)
    assert (found.progress.iteration, found.progress_text) == (52, "52/200")
    assert found.model_copy(update=dict(progress=running.progress, progress_text=running.progress_text,
                                        estimate=running.estimate)) == running
    assert plan.with_progress(running, {}, sweep) is running  # nothing read: nothing changes
    assert plan.with_progress(found, {trial.name: read(52)}, sweep) is found  # the same read: nothing changes


def test_a_finished_experiment_expires_ttl_seconds_after_its_completion():
    dte = experiment(runPolicy={"ttlSecondsAfterFinished": 90})
    old = status_.ExperimentStatus(trials=[status_.TrialStatus(name="q-0", index=0, phase=Phase.SUCCEEDED)])
    finished = decide(dte, old).status
    assert due.expiry_of(finished, dte.spec.run_policy) == T0 + datetime.timedelta(seconds=90)
    assert due.next_wake(finished, dte.spec.run_policy, T0 + datetime.timedelta(seconds=60),
                         settings_.TimingSettings()) == 30
    assert due.expiry_of(finished, experiment().spec.run_policy) is None


def test_nothing_is_due_for_a_finished_experiment_without_ttl():
    old = status_.ExperimentStatus(trials=[status_.TrialStatus(name="q-0", index=0, phase=Phase.SUCCEEDED)])
    dte = experiment()
    assert due.next_wake(decide(dte, old).status, dte.spec.run_policy, T0, settings_.TimingSettings()) is None


# -- events and the status on the wire ----------------------------------------------------------------

def test_every_trial_transition_and_experiment_milestone_is_an_event():
    dte = experiment()
    created = decide(dte).status
    found = events.transitions(status_.ExperimentStatus(), created)
    assert [(e.type, e.reason) for e in found] == [("Normal", reasons.PODS_CREATED),
                                                   ("Normal", reasons.EXPERIMENT_CREATED)]
    failed = created.model_copy(update={"trials": [created.trials[0].model_copy(update={
        "phase": Phase.FAILED, "reason": reasons.BACKOFF_LIMIT_EXCEEDED, "message": "pod x"})]})
    finished = decide(dte, failed).status
    # The trial's event says it all: the experiment's Failed milestone would repeat it word for word.
    assert [(e.type, e.reason, e.message) for e in events.transitions(created, finished)] == [
        ("Warning", reasons.BACKOFF_LIMIT_EXCEEDED, "trial q-0: pod x")]
    assert events.transitions(finished, finished) == []


def test_a_sweeps_failure_milestone_is_an_event_of_its_own():
    dte = experiment(sweep={"matrix": {"workers": [1, 2]}})
    old = decide(dte, status_.ExperimentStatus(trials=[
        status_.TrialStatus(name="q-0", index=0, phase=Phase.SUCCEEDED, message="ok"),
        status_.TrialStatus(name="q-1", index=1, phase=Phase.RUNNING)])).status
    failed = old.model_copy(update={"trials": [old.trials[0], old.trials[1].model_copy(update={
        "phase": Phase.FAILED, "reason": reasons.BACKOFF_LIMIT_EXCEEDED, "message": "pod x"})]})
    found = events.transitions(old, decide(dte, failed).status)
    assert [(e.reason, e.message) for e in found] == [
        (reasons.BACKOFF_LIMIT_EXCEEDED, "trial q-1: pod x"),
        (reasons.BACKOFF_LIMIT_EXCEEDED, "1 of 2 trials failed: q-1 (BackoffLimitExceeded: pod x)")]


def test_the_status_patch_is_minimal_and_removes_what_disappeared():
    old = {"phase": "Running", "replicaStatuses": {"ps": {"active": 1}, "worker": {"active": 2}},
           "summary": {"throughput": 1.0}}
    new = {"phase": "Running", "replicaStatuses": {"worker": {"active": 2}}}
    assert statuses.merge_patch(old, new) == {"summary": None, "replicaStatuses": {"ps": None}}
    assert statuses.merge_patch(new, new) == {}


def test_a_phase_change_is_one_log_line_saying_why():
    dte = experiment()
    created = decide(dte).status
    assert events.log_line(status_.ExperimentStatus(), created) == (
        "Pending -> Created (WaitingForPods: trial q-0: created 3 pods (1 parameter server, 2 workers); "
        "waiting for all of them to be scheduled)")
    assert events.log_line(created, created) is None  # a progress write, no transition


def test_a_trial_waiting_for_its_placement_is_a_warning_event_naming_it():
    dte = experiment()
    created = decide(dte).status
    waiting = created.model_copy(update={"trials": [created.trials[0].model_copy(update={
        "reason": reasons.WAITING_FOR_PLACEMENT,
        "message": "placement Spread by kubernetes.io/hostname cannot be met"})]})
    assert [(e.type, e.reason, e.message) for e in events.transitions(created, waiting)] == [
        ("Warning", reasons.WAITING_FOR_PLACEMENT,
         "trial q-0: placement Spread by kubernetes.io/hostname cannot be met")]
