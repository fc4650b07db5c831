"""An experiment's next status and the pod work to reach it, from its recorded status and its observed pods; used by
`reconciler`.

Pure: the reconciler observes (API reads, log reads, the clock), calls `decide`, then acts. Everything
`kubectl get dte -o yaml` shows is computed here: trial phases, the sweep's parallelism, the
conditions (the contract), the phase (their summary), progress, the estimated end, replica counts and the summary.
"""

from __future__ import annotations

import dataclasses
import datetime

from ringleader.models import combinations
from ringleader.api.spec import ExperimentSpec
from ringleader.api.status import (Best, Compared, Condition, ConditionType, ExperimentStatus, Phase, Progress,
                                   TrialStatus)
from ringleader.api.trial import Expansion, REPETITION
from ringleader.contract import outcomes
from ringleader.contract import progress as progress_line
from ringleader.contract import unpublished
from ringleader.controller.admission import Action, Admission
from ringleader.controller import capacity, conditions, estimates, pending_records, reasons, trials
from ringleader.controller import pods as pods_

Type = ConditionType

# Failed reasons that a corrected spec clears (nothing ran, so nothing is lost by trying again).
SPEC_REASONS = (reasons.INVALID_SPEC, reasons.PODGROUPS_DISABLED, reasons.TRACKING_URI_NOT_ALLOWED,
                reasons.KUEUE_DISABLED)
MAX_LISTED_FAILURES = 3
QUEUED = (reasons.WAITING_FOR_ADMISSION, reasons.WAITING_FOR_CAPACITY)  # a trial's reasons for waiting in a queue


@dataclasses.dataclass(frozen=True)
class Observation:
    """What the reconciler saw of the cluster for one experiment."""

    now: datetime.datetime
    generation: int | None
    pods: dict[str, list[pods_.Pod]]
    """Pods by trial name (the trial label)."""
    expected: dict[str, tuple[trials.ExpectedPod, ...]]
    """Pods each trial's topology renders, by trial name."""
    progress: dict[str, tuple[progress_line.Line, ...]] = dataclasses.field(default_factory=dict)
    """The progress lines last read from the reporting worker's log, by trial name, for the trials whose logs
    were read (controller/progress_logs.py)."""
    workloads: dict[str, Admission] = dataclasses.field(default_factory=dict)
    """Kueue Workloads by trial name (`scheduling.queueName` only)."""
    waiting: dict[str, unpublished.Waiting] = dataclasses.field(default_factory=dict)
    """The last waiting line (a rank that trained, waiting for MLflow to take its records) read from the reporting
    pod's log, by trial name, for the trials whose reporting rank printed one."""
    capacity: capacity.Capacity | None = None
    """The free capacity trials about to start may take (`admitter`); None: no admission by capacity, no node known."""


@dataclasses.dataclass(frozen=True)
class Plan:
    status: ExperimentStatus
    delete: tuple[str, ...] = ()
    force_delete: tuple[str, ...] = ()
    """Pods on a lost node, deleted with no grace period: no kubelet is left to confirm a graceful deletion."""
    create: tuple[int, ...] = ()
    """Indices of the trials whose objects to create (409 AlreadyExists counts as created)."""
    workloads: tuple[tuple[int, Action], ...] = ()
    """(trial index, action) for the trials' Kueue Workloads: queue, finish or delete."""
    placed: dict[str, str] = dataclasses.field(default_factory=dict)
    """Pod -> node, for the pods of the trials admitted by free capacity (held until the scheduler binds them)."""
    due: datetime.datetime | None = None
    """When a pass is due though no event may come: the earliest startup deadline of a pod not running yet."""


def _initial_trials(expansion: Expansion, old: ExperimentStatus) -> list[TrialStatus]:
    recorded = {t.name: t for t in old.trials}
    return [
        recorded.get(t.name) or TrialStatus(name=t.name, index=t.index, parameters=dict(t.parameters))
        for t in expansion.trials
    ]


def pods_went(old: ExperimentStatus, new: ExperimentStatus) -> bool:
    """Whether `new` restarts or fails a trial because its pods were deleted by someone else: worth asking whether the
    namespace itself is going before acting on it."""
    before = {t.name: t.phase for t in old.trials}
    return any(t.reason == reasons.POD_DELETED and before.get(t.name) != t.phase for t in new.trials)


def decide(experiment, expansion: Expansion, old: ExperimentStatus, seen: Observation, *,
           startup_deadline_seconds: float = trials.DEFAULT_STARTUP_DEADLINE_SECONDS,
           capacity_retry_seconds: float = trials.DEFAULT_CAPACITY_RETRY_SECONDS) -> Plan:
    """The experiment's next status; pods to delete and trials to create on the way there.
    `startup_deadline_seconds` is the operator's default for runPolicy.startupDeadlineSeconds;
    `capacity_retry_seconds` how soon a trial waiting for capacity is looked at again."""
    spec: ExperimentSpec = experiment.spec
    suspended = spec.run_policy.suspend
    max_parallel = spec.sweep.max_parallel if spec.sweep else 1
    statuses = _initial_trials(expansion, old)
    steps: dict[int, trials.Step] = {}

    def run(position: int, may_start: bool = False, verdict: capacity.CapacityVerdict | None = None) -> None:
        status = statuses[position]
        ctx = trials.Context(now=seen.now, run_policy=spec.run_policy, expected=seen.expected.get(status.name, ()),
                             suspended=suspended, may_start=may_start, queue_name=spec.scheduling.queue_name,
                             admission=seen.workloads.get(status.name),
                             default_startup_deadline_seconds=startup_deadline_seconds,
                             placement=expansion.trials[position].spec.scheduling.placement,
                             records=pending_records.Records(
                                 seen.waiting.get(status.name),
                                 expansion.trials[position].spec.tracking.records_wait_seconds),
                             capacity=verdict, rooms=seen.capacity.rooms if seen.capacity else (),
                             capacity_retry_seconds=capacity_retry_seconds)
        steps[position] = trials.step(status, seen.pods.get(status.name, []), ctx)

    # Started trials first, so those that finish now free their slot for a pending one in the same pass.
    for position, status in enumerate(statuses):
        if status.phase != Phase.PENDING:
            run(position)
    active = sum(1 for s in steps.values() if s.status.phase in trials.ACTIVE_PHASES)
    room = seen.capacity
    for position, status in enumerate(statuses):
        if status.phase == Phase.PENDING:
            may_start = not suspended and active < max_parallel
            active += int(may_start)
            verdict = None
            if may_start and room is not None and not seen.pods.get(status.name):
                verdict, room = room.take(status.name)  # in trial order: an earlier trial fits first
            run(position, may_start, verdict)

    new_trials = [conditions.of_trial(steps[i].status, now=seen.now, generation=seen.generation)
                  for i in range(len(statuses))]
    experiment_status = _experiment_status(experiment, expansion, old, new_trials, seen)
    delete = tuple(name for i in range(len(statuses)) for name in steps[i].delete)
    # Pods of no current trial (a spec change shrank the sweep) would otherwise hold resources forever.
    known = {t.name for t in statuses}
    delete += tuple(sorted(pods_.name(p) for trial, found in seen.pods.items() if trial not in known
                           for p in found if not pods_.is_terminating(p)))
    force_delete = tuple(sorted(pods_.name(p) for found in seen.pods.values() for p in found
                                if pods_.on_lost_node(p) and (pods_.is_terminating(p) or pods_.name(p) in delete)))
    create = tuple(statuses[i].index for i in range(len(statuses)) if steps[i].create)
    workloads = tuple((statuses[i].index, workload) for i in range(len(statuses)) if (workload := steps[i].workload))
    due = min((s.due for s in steps.values() if s.due is not None), default=None)
    placed = {pod: node for s in steps.values() if s.create for pod, node in s.placed.items()}
    return Plan(status=experiment_status, delete=delete, force_delete=force_delete, create=create,
                workloads=workloads, due=due, placed=placed)


def _iteration(lines: tuple[progress_line.Line, ...]) -> int:
    return lines[-1].iteration if lines else 0


def with_progress(status: ExperimentStatus, progress: dict[str, tuple[progress_line.Line, ...]],
                  sweep: estimates.PlannedSweep) -> ExperimentStatus:
    """The status with its latest running trial's iteration as just read (a progress-only pass), and the
    estimate refined: the same `decide` would report from the same reads."""
    running = [t for t in status.trials if t.phase == Phase.RUNNING]
    latest = max(running, key=lambda t: t.index, default=None)
    if latest is None or latest.name not in progress:
        return status
    found = status.progress.model_copy(update={"iteration": _iteration(progress[latest.name])})
    estimate = estimates.estimate(sweep, status.trials, progress)
    if found == status.progress and estimate == status.estimate:
        return status
    return status.model_copy(update=dict(progress=found, progress_text=found.text(), estimate=estimate))


def records_news(status: ExperimentStatus, waiting: dict[str, unpublished.Waiting]) -> bool:
    """Whether a running trial's reporting rank says it waits for MLflow while its status does not say so yet."""
    return any(t.phase == Phase.RUNNING and t.reason != reasons.RECORDS_PENDING and t.name in waiting
               for t in status.trials)


def invalid(old: ExperimentStatus, reason: str, message: str, *, now: datetime.datetime,
            generation: int | None) -> ExperimentStatus:
    """The status of an experiment that can never run as written (its spec must change)."""
    found = conditions.set_condition(old.conditions, Type.FAILED, True, reason, message, now=now, generation=generation)
    found = conditions.set_condition(found, Type.RUNNING, False, reason, "the experiment cannot run as written",
                                     now=now, generation=generation)
    return old.model_copy(update=dict(
        conditions=found, phase=conditions.phase_of(found), observed_generation=generation,
        completion_time=old.completion_time or now,
    ))


def is_finished(status: ExperimentStatus) -> bool:
    return conditions.is_true(status.conditions, Type.SUCCEEDED) or conditions.is_true(status.conditions, Type.FAILED)


def _describe(trial: TrialStatus) -> str:
    return f"trial {trial.name}: {trial.message}" if trial.message else f"trial {trial.name}"


Setting = tuple[Type, bool, str, str]
"""A condition to set: (type, status, reason, message)."""


def _conditions(experiment, expansion: Expansion, old: ExperimentStatus,
                new_trials: list[TrialStatus], seen: Observation) -> list[Condition]:
    found = list(old.conditions)
    failed = conditions.find(found, Type.FAILED)
    if failed is not None and failed.reason in SPEC_REASONS:
        found = [c for c in found if c.type != Type.FAILED]  # the spec was corrected
    suspended = experiment.spec.run_policy.suspend
    # Each step reads only the recorded condition of its own type, so the order of setting them is free.
    settings = [_created(expansion, len(new_trials)), *_suspended(suspended, found),
                *_restarting(new_trials, found), *_outcome(new_trials, suspended)]
    for type_, value, reason, message in settings:
        found = conditions.set_condition(found, type_, value, reason, message, now=seen.now, generation=seen.generation)
    return found


def _created(expansion: Expansion, count: int) -> Setting:
    planned = f"{count} trial{'s' * (count != 1)} planned"
    if expansion.skipped:
        planned += f"; {len(expansion.skipped)} combination{'s' * (len(expansion.skipped) != 1)} skipped (" + \
            "; ".join(sorted({reason for _, reason in expansion.skipped})) + ")"
    return Type.CREATED, True, reasons.EXPERIMENT_CREATED, planned


def _suspended(suspended: bool, found: list[Condition]) -> list[Setting]:
    if suspended:
        return [(Type.SUSPENDED, True, reasons.SUSPENDED, "runPolicy.suspend is true: running trials' pods were "
                 "deleted; they restart from the beginning when it is set back to false")]
    if conditions.find(found, Type.SUSPENDED):
        return [(Type.SUSPENDED, False, reasons.RESUMED, "runPolicy.suspend is false: trials run again")]
    return []


def _restarting(new_trials: list[TrialStatus], found: list[Condition]) -> list[Setting]:
    restarting = [t for t in new_trials if t.phase == Phase.RESTARTING]
    if restarting:
        return [(Type.RESTARTING, True, restarting[0].reason or reasons.RANK_FAILED, _describe(restarting[0]))]
    last = conditions.find(found, Type.RESTARTING)
    if last is None:
        return []
    # The last restart's cause stays readable after the pods are back: its message is kept.
    message = last.message if last.reason == reasons.NO_RESTART else f"pods recreated after {last.message}"
    return [(Type.RESTARTING, False, reasons.NO_RESTART, message)]


def _outcome(new_trials: list[TrialStatus], suspended: bool) -> list[Setting]:
    """Running, and once every trial finished, Succeeded or Failed."""
    count = len(new_trials)
    if all(t.phase in trials.TERMINAL_PHASES for t in new_trials):
        never = sum(1 for t in new_trials if t.reason in reasons.NEVER_STARTED)
        ended: Setting = (Type.RUNNING, False, reasons.EXPERIMENT_FINISHED,
                          ("the trial never started" if never else "the trial finished") if count == 1 else
                          f"all {count} trials finished" + (f" ({never} never started)" if never else ""))
        failed = [t for t in new_trials if t.phase == Phase.FAILED]
        if failed:
            return [ended, (Type.FAILED, True, *_failure(failed, count))]
        message = _describe(new_trials[0]) if count == 1 else f"all {count} trials succeeded" + _answer(new_trials)
        return [ended, (Type.SUCCEEDED, True, reasons.TRIALS_SUCCEEDED, message)]
    if suspended:
        return [(Type.RUNNING, False, reasons.SUSPENDED, "the experiment is suspended")]
    running = [t for t in new_trials if t.phase == Phase.RUNNING]
    if running:
        message = _describe(running[0]) if len(running) == 1 else \
            f"{len(running)} trials running: " + ", ".join(t.name for t in running)
        # Trials that only wait for MLflow to take their ranks' records say so, whose message says what waits.
        pending = all(t.reason == reasons.RECORDS_PENDING for t in running)
        return [(Type.RUNNING, True, reasons.RECORDS_PENDING if pending else reasons.TRIAL_RUNNING, message)]
    return [_waiting(new_trials)]


def _waiting(new_trials: list[TrialStatus]) -> Setting:
    """Running while no trial runs: the trial closest to running says what the experiment waits for."""
    created, restarting, pending = (next((t for t in new_trials if t.phase == phase), None)
                                    for phase in (Phase.CREATED, Phase.RESTARTING, Phase.PENDING))
    waiting = created or restarting or pending
    if created:
        reason = reasons.WAITING_FOR_PODS
    elif restarting:
        reason = restarting.reason or reasons.RANK_FAILED
    elif waiting is not None and waiting.reason in (reasons.WAITING_FOR_ADMISSION, reasons.EVICTED):
        reason = reasons.WAITING_FOR_ADMISSION
    elif waiting is not None and waiting.reason == reasons.WAITING_FOR_CAPACITY:
        reason = reasons.WAITING_FOR_CAPACITY
    else:
        reason = reasons.TRIALS_PENDING
    message = _describe(waiting) if waiting is not None else "no trial is running"
    if any(t.phase in trials.TERMINAL_PHASES for t in new_trials) and reason not in QUEUED:
        # A sweep between trials is still running (phase Running, not Created): the next trial is starting.
        return Type.RUNNING, True, reasons.TRIAL_STARTING, message
    return Type.RUNNING, False, reason, message


def _answer(new_trials: list[TrialStatus]) -> str:
    """"; best: RingAllReduce, workers=4 (q-1), 1845.6 samples/s": the sweep's answer, for its conditions."""
    best = _best(best_of(new_trials), len(new_trials))
    if best is None:
        return ""
    throughput = f", {best.throughput:.1f} samples/s" if best.throughput is not None else ""
    named = f"{best.text} ({best.trial})" if best.text != best.trial else best.trial
    return f"; best: {named}{throughput}"


def _failure(failed: list[TrialStatus], count: int) -> tuple[str, str]:
    reason = outcomes.sweep_reason(t.reason for t in failed)
    if count == 1:
        return reason, _describe(failed[0])
    listed = "; ".join(f"{t.name} ({t.reason}: {t.message})" for t in failed[:MAX_LISTED_FAILURES])
    more = f"; and {len(failed) - MAX_LISTED_FAILURES} more" if len(failed) > MAX_LISTED_FAILURES else ""
    return reason, f"{len(failed)} of {count} trials failed: {listed}{more}"


def _progress(expansion: Expansion, old: ExperimentStatus, new_trials: list[TrialStatus],
              seen: Observation, succeeded: bool) -> Progress:
    by_name = {t.name: t for t in expansion.trials}
    completed = sum(1 for t in new_trials if t.phase in trials.TERMINAL_PHASES)
    running = [t for t in new_trials if t.phase == Phase.RUNNING]
    if running:
        latest = max(running, key=lambda t: t.index)
        iteration = _iteration(seen.progress.get(latest.name, ()))
        iterations = by_name[latest.name].spec.model.iterations
    elif succeeded:
        last = by_name[new_trials[-1].name].spec.model.iterations
        iteration, iterations = last, last
    elif any(t.phase in (Phase.CREATED, Phase.RESTARTING) for t in new_trials):
        # A trial whose pods are (re)starting is at iteration 0 of its own iterations.
        starting = max((t for t in new_trials if t.phase in (Phase.CREATED, Phase.RESTARTING)), key=lambda t: t.index)
        iteration, iterations = 0, by_name[starting.name].spec.model.iterations
    else:
        iteration = old.progress.iteration
        iterations = old.progress.iterations or by_name[new_trials[0].name].spec.model.iterations
    queued = sum(1 for t in new_trials if t.phase == Phase.PENDING and t.reason in QUEUED)
    return Progress(iteration=iteration, iterations=iterations, trials_completed=completed, trials=len(new_trials),
                            trials_queued=queued)


def compared(expansion: Expansion) -> Compared:
    """Each printer column's values over the trials, in the order they run: one value, or what a sweep compares."""
    def values(of) -> str:
        return ",".join(dict.fromkeys(str(of(t.spec)) for t in expansion.trials))

    return Compared(architecture=values(lambda s: s.architecture.value),
                            paradigm=values(lambda s: s.sync.paradigm.value),
                            workers=values(lambda s: s.workers.replicas))


def best_of(trials_: list[TrialStatus]) -> TrialStatus | None:
    """The succeeded trial with the highest throughput (the first of equals); None before one succeeded."""
    succeeded = [t for t in trials_ if t.phase == Phase.SUCCEEDED and t.summary is not None]
    return max(succeeded, key=lambda t: (_throughput(t) or 0.0, -t.index), default=None)


def _throughput(trial: TrialStatus) -> float | None:
    return trial.summary.throughput if trial.summary is not None else None


def _best(trial: TrialStatus | None, count: int) -> Best | None:
    if trial is None or count <= 1:
        return None
    swept = {k: v for k, v in trial.parameters.items() if k != REPETITION}
    text = combinations.label(swept) if swept else trial.name  # as the report labels it
    return Best(trial=trial.name, parameters=swept, text=text, throughput=_throughput(trial))


def _experiment_status(experiment, expansion: Expansion, old: ExperimentStatus,
                       new_trials: list[TrialStatus], seen: Observation) -> ExperimentStatus:
    found = _conditions(experiment, expansion, old, new_trials, seen)
    best = best_of(new_trials)
    starts = [t.start_time for t in new_trials if t.start_time is not None]
    all_pods = [p for pods in seen.pods.values() for p in pods]
    done = conditions.is_true(found, Type.SUCCEEDED) or conditions.is_true(found, Type.FAILED)
    progress = _progress(expansion, old, new_trials, seen, conditions.is_true(found, Type.SUCCEEDED))
    return old.model_copy(update=dict(
        phase=conditions.phase_of(found),
        conditions=found,
        observed_generation=seen.generation,
        start_time=old.start_time or (min(starts) if starts else None),
        completion_time=(old.completion_time or seen.now) if done else None,
        replica_statuses=pods_.replica_counts(all_pods),
        progress=progress,
        progress_text=progress.text(),
        estimate=None if experiment.spec.run_policy.suspend else
        estimates.estimate(estimates.PlannedSweep.of(expansion), new_trials, seen.progress),
        compares=compared(expansion),
        best=_best(best, len(new_trials)),
        summary=best.summary if best else old.summary,
        trials=new_trials,
    ))
