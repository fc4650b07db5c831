"""One trial's next state from its recorded status and its observed pods: the per-trial rules of `plan`.

Level-based: the step depends only on what is recorded (phase, restarts, start time) and what is
observed now, so running it twice, or after an operator restart, gives the same answer. The
status is written before the pods are touched, so a crash in between never counts a restart twice.
"""

from __future__ import annotations

import dataclasses
import datetime
import math

from ringleader.api import constants
from ringleader.api.spec import Placement, PlacementMode, RunPolicy
from ringleader.api.status import Phase, Summary, TERMINAL_PHASES, TrialStatus
from ringleader.contract import failures
from ringleader.controller.admission import Action, Admission, State
from ringleader.controller import capacity as capacity_
from ringleader.controller import cleanup, pending_records, reasons
from ringleader.controller import pods as pods_

ACTIVE_PHASES = (Phase.CREATED, Phase.RUNNING, Phase.RESTARTING)
DEFAULT_STARTUP_DEADLINE_SECONDS = 300
"""The operator's default for runPolicy.startupDeadlineSeconds (its --startup-deadline): 5 minutes hold a cold pull
of a multi-GB image and Kubernetes' image-pull backoff reaching its 5-minute cap, and bound what a pod that can
never start (an image that does not exist, a missing Secret or claim, a request no node fits) holds."""
DEFAULT_CAPACITY_RETRY_SECONDS = 5.0
"""The operator's default for how soon a trial waiting for capacity is judged again (its --capacity-retry-interval)."""
# Failed trials whose pods are all stopped whatever cleanPodPolicy says, as a Job's deadline stops them: a pod that
# never started has no log to keep, and holds its node's resources while it waits.
STOPS_RUNNING = (reasons.DEADLINE_EXCEEDED, reasons.STARTUP_DEADLINE_EXCEEDED, reasons.INVALID_IMAGE)


@dataclasses.dataclass(frozen=True)
class ExpectedPod:
    """A pod the trial's topology renders."""

    name: str
    role: str
    rank: int
    """rank is the pod's first rank."""
    ranks: int = 1
    """ranks is how many ranks the pod runs (`workers.ranksPerPod` for a worker pod): `rank` and those after it."""


@dataclasses.dataclass(frozen=True)
class Context:
    """What a step needs besides the trial's own status and pods."""

    now: datetime.datetime
    run_policy: RunPolicy
    expected: tuple[ExpectedPod, ...]
    suspended: bool = False
    may_start: bool = False
    queue_name: str | None = None
    """The Kueue LocalQueue that admits the trial (`scheduling.queueName`); None: no admission to wait for."""
    admission: Admission | None = None
    """The trial's Workload as Kueue left it; None when it has none."""
    default_startup_deadline_seconds: float = DEFAULT_STARTUP_DEADLINE_SECONDS
    """The operator's runPolicy.startupDeadlineSeconds, for experiments that set none."""
    placement: Placement = Placement()
    """The trial's `scheduling.placement`: a pod its Required terms keep unscheduled waits, then fails, in its name."""
    records: pending_records.Records = pending_records.Records()  # what its ranks say of records MLflow lacks
    capacity: capacity_.CapacityVerdict | None = None  # whether its pods fit the free capacity together; None: unjudged
    rooms: tuple[capacity_.Room, ...] = ()  # the nodes as last read (if at all): named when a request fits no node
    capacity_retry_seconds: float = DEFAULT_CAPACITY_RETRY_SECONDS

    def unmet_placement(self, pod: pods_.Pod) -> str | None:
        """The Required placement that keeps `pod` from every node, in words; None when nothing of it does."""
        required = not self.placement.is_any() and self.placement.mode == PlacementMode.REQUIRED
        if not (required and pods_.blocked_by_affinity(pod)):
            return None
        return f"placement {self.placement.label()} by {self.placement.topology_key}"

    @property
    def startup_deadline_seconds(self) -> float:
        """How long each pod may take from its creation until it runs."""
        return self.run_policy.startup_deadline_seconds or self.default_startup_deadline_seconds


@dataclasses.dataclass(frozen=True)
class Step:
    """The trial's next status, and what to do to its pods to get there."""

    status: TrialStatus
    delete: tuple[str, ...] = ()
    create: bool = False
    workload: Action | None = None
    """What to do to the trial's Kueue Workload: create it (queue the trial), finish it, or delete it."""
    due: datetime.datetime | None = None
    """When the trial needs another look though no event may come: a pod's startup deadline, a capacity retry."""
    placed: dict[str, str] = dataclasses.field(default_factory=dict)
    """Pod -> node, when the trial was admitted by free capacity: the room to hold until its pods are bound."""


def deadline_of(trial: TrialStatus, run_policy: RunPolicy) -> datetime.datetime | None:
    """When an active trial exceeds activeDeadlineSeconds, counted from its start (restarts included, as a Job's)."""
    if run_policy.active_deadline_seconds is None or trial.start_time is None or trial.phase not in ACTIVE_PHASES:
        return None
    return trial.start_time + datetime.timedelta(seconds=run_policy.active_deadline_seconds)


def _with(trial: TrialStatus, **changes) -> TrialStatus:
    return trial.model_copy(update=changes)


def _live(pods: list[pods_.Pod]) -> list[pods_.Pod]:
    return [p for p in pods if not pods_.is_terminating(p)]


def _count(expected: tuple[ExpectedPod, ...], role: str) -> int:
    return sum(1 for e in expected if e.role == role)


def _workers(expected: tuple[ExpectedPod, ...]) -> str:
    """"2 workers": ranks, whatever their pods."""
    ranks = sum(e.ranks for e in expected if e.role == constants.ROLE_WORKER)
    return f"{ranks} worker{'s' * (ranks != 1)}"


def _pods_phrase(expected: tuple[ExpectedPod, ...]) -> str:
    """"3 pods (1 parameter server, 2 workers)", "2 pods (4 workers, 2 to a pod)"."""
    ps = _count(expected, constants.ROLE_PS)
    per_pod = max((e.ranks for e in expected if e.role == constants.ROLE_WORKER), default=1)
    parts = ([f"{ps} parameter server{'s' * (ps != 1)}"] if ps else []) + [_workers(expected)]
    return f"{len(expected)} pods ({', '.join(parts)}{f', {per_pod} to a pod' if per_pod > 1 else ''})"


def _finish(trial: TrialStatus, pods: list[pods_.Pod], ctx: Context, phase: Phase, reason: str, message: str,
            *, workers_done: bool = False, stop_running: bool = False, summary: Summary | None = None) -> Step:
    status = _with(trial, phase=phase, reason=reason, message=message, completion_time=ctx.now,
                   summary=summary if summary is not None else trial.summary)
    return Step(status, delete=cleanup.pods_to_delete(pods, ctx.run_policy.clean_pod_policy,
                                       workers_done=workers_done, stop_running=stop_running))


def _fail_or_restart(trial: TrialStatus, pods: list[pods_.Pod], ctx: Context, reason: str, cause: str) -> Step:
    limit = ctx.run_policy.backoff_limit
    if trial.restarts < limit:
        restarts = trial.restarts + 1
        message = f"{cause}; restarting the trial (restart {restarts} of at most {limit})"
        status = _with(trial, phase=Phase.RESTARTING, reason=reason, message=message, restarts=restarts)
        # Every pod goes, finished ones included: the new attempt reuses their names and ranks.
        return Step(status, delete=tuple(sorted(pods_.name(p) for p in _live(pods))))
    message = f"{cause}; backoffLimit {limit} reached after {trial.restarts} restart{'s' * (trial.restarts != 1)}"
    # A lost node keeps its own word: it is the platform's fault, not the trial's, and alerts tell them apart.
    final = reasons.NODE_LOST if reason == reasons.NODE_LOST else reasons.BACKOFF_LIMIT_EXCEEDED
    return _finish(trial, pods, ctx, Phase.FAILED, final, message)


def _lost_nodes(lost: list[pods_.Pod]) -> str:
    nodes = sorted({pods_.node(p) or "?" for p in lost})
    ranks = ", ".join(f"{pods_.name(p)} ({pods_.ranks_text(p)})" for p in lost)
    return (f"node{'s' * (len(nodes) > 1)} {', '.join(nodes)} stopped answering (marked not ready by the node "
            f"controller); lost: {ranks}")


def step(trial: TrialStatus, pods: list[pods_.Pod], ctx: Context) -> Step:
    """The next status of one trial, and the pod and Workload actions that lead there."""
    found = _step(trial, pods, ctx)
    if ctx.admission is None or found.workload is not None:
        return found
    # A Workload holds quota only while its trial may run: released when the trial ends, dropped when it stops.
    if found.status.phase in TERMINAL_PHASES and ctx.admission.state != State.FINISHED:
        return dataclasses.replace(found, workload=Action.FINISH)
    if found.status.phase == Phase.SUSPENDED or (found.status.phase == Phase.PENDING and ctx.suspended):
        return dataclasses.replace(found, workload=Action.DELETE)
    return found


def _step(trial: TrialStatus, pods: list[pods_.Pod], ctx: Context) -> Step:
    if trial.phase in TERMINAL_PHASES:
        return _finished(trial, pods, ctx)
    if ctx.suspended:
        return _suspend(trial, pods)
    if trial.phase == Phase.SUSPENDED:
        trial = _with(trial, phase=Phase.PENDING, reason=reasons.RESUMED,
                      message="resumed: restarts from the beginning",
                      start_time=None)
    if trial.phase == Phase.PENDING:
        return _start(trial, pods, ctx)
    if ctx.queue_name is not None and (ctx.admission is None or ctx.admission.state != State.ADMITTED):
        return _evicted(trial, pods, ctx)
    if trial.phase == Phase.RESTARTING:
        return _recreate(trial, pods, ctx)
    return _watch(trial, pods, ctx)


def _finished(trial: TrialStatus, pods: list[pods_.Pod], ctx: Context) -> Step:
    # Clean-up is repeated at every pass (idempotent), so one interrupted by an operator restart completes.
    workers_done = trial.phase == Phase.SUCCEEDED
    stop_running = trial.reason in STOPS_RUNNING
    return Step(trial, delete=cleanup.pods_to_delete(pods, ctx.run_policy.clean_pod_policy,
                                      workers_done=workers_done, stop_running=stop_running))


def _suspend(trial: TrialStatus, pods: list[pods_.Pod]) -> Step:
    delete = tuple(sorted(pods_.name(p) for p in _live(pods)))
    if trial.phase in (Phase.PENDING, Phase.SUSPENDED):
        return Step(trial, delete=delete)
    message = "suspended: its pods were deleted; it restarts from the beginning when the experiment resumes"
    return Step(_with(trial, phase=Phase.SUSPENDED, reason=reasons.SUSPENDED, message=message), delete=delete)


def _start(trial: TrialStatus, pods: list[pods_.Pod], ctx: Context) -> Step:
    if not ctx.may_start:
        message = "waiting for a running trial to finish (sweep.maxParallel)"
        return Step(_with(trial, reason=reasons.WAITING_FOR_SLOT, message=message))
    if ctx.queue_name is not None and (ctx.admission is None or ctx.admission.state != State.ADMITTED):
        return _queue(trial, pods, ctx)
    if pods:
        # Pods left by an earlier run (suspended, or an interrupted clean-up) hold the names it needs.
        message = f"waiting for {len(pods)} pod{'s' * (len(pods) != 1)} of an earlier run to terminate"
        return Step(_with(trial, reason=reasons.WAITING_FOR_OLD_PODS, message=message),
                    delete=tuple(sorted(pods_.name(p) for p in _live(pods))))
    verdict = ctx.capacity
    if verdict is not None and verdict.kind == capacity_.CapacityKind.NEVER:
        role = next((e.role for e in ctx.expected if e.name == verdict.pod), constants.ROLE_WORKER)
        cause = f"{verdict.message}: lower {pods_.resources_field(role)}.resources, or add a larger node"
        return _finish(trial, pods, ctx, Phase.FAILED, reasons.REQUEST_FITS_NO_NODE, cause)
    if verdict is not None and verdict.kind == capacity_.CapacityKind.WAIT:
        # No pod is created before all fit: none of them holds a node while a peer waits for one.
        message = f"waiting for free capacity for all {_pods_phrase(ctx.expected)}: {verdict.message}"
        return Step(_with(trial, reason=reasons.WAITING_FOR_CAPACITY, message=message),
                    due=ctx.now + datetime.timedelta(seconds=ctx.capacity_retry_seconds))
    message = f"created {_pods_phrase(ctx.expected)}; waiting for all of them to be scheduled"
    status = _with(trial, phase=Phase.CREATED, reason=reasons.PODS_CREATED, message=message,
                   start_time=trial.start_time or ctx.now, completion_time=None)
    return Step(status, create=True, placed=dict(verdict.placed) if verdict is not None else {})


def _queue(trial: TrialStatus, pods: list[pods_.Pod], ctx: Context) -> Step:
    """A trial that may start once Kueue admits its Workload: no pod of it exists before (never half-admitted)."""
    waiting = f"waiting for Kueue to admit all {_pods_phrase(ctx.expected)} (LocalQueue {ctx.queue_name})"
    delete = tuple(sorted(pods_.name(p) for p in _live(pods)))  # left by an admission Kueue took back
    if ctx.admission is None:
        return Step(_with(trial, reason=reasons.WAITING_FOR_ADMISSION, message=f"{waiting}: Workload created"),
                    delete=delete, workload=Action.CREATE)
    if ctx.admission.state in (State.FINISHED, State.EVICTED):
        # The Workload of an earlier attempt: a fresh one queues this attempt.
        return Step(_with(trial, reason=reasons.WAITING_FOR_ADMISSION, message=f"{waiting}: replacing the Workload "
                          f"of an earlier attempt ({ctx.admission.state.value})"),
                    delete=delete, workload=Action.DELETE)
    return Step(_with(trial, reason=reasons.WAITING_FOR_ADMISSION, message=f"{waiting}: {ctx.admission.message}"),
                delete=delete)


def _evicted(trial: TrialStatus, pods: list[pods_.Pod], ctx: Context) -> Step:
    """A started trial whose admission is gone: its pods go and it queues again, from the beginning."""
    if ctx.admission is None:
        cause = f"its Kueue Workload {trial.name} was deleted"
    else:
        cause = (f"Kueue evicted its Workload {ctx.admission.name} "
                 f"({ctx.admission.message or ctx.admission.state.value})")
    message = f"{cause}: its pods were deleted; it restarts from the beginning once Kueue admits it again"
    status = _with(trial, phase=Phase.PENDING, reason=reasons.EVICTED, message=message, start_time=None)
    return Step(status, delete=tuple(sorted(pods_.name(p) for p in _live(pods))),
                workload=None if ctx.admission is None else Action.DELETE)


def _recreate(trial: TrialStatus, pods: list[pods_.Pod], ctx: Context) -> Step:
    started = _started_if_overdue(trial, ctx)
    if started is not None:
        return _deadline(trial, pods, ctx, started)
    if pods:
        return Step(trial, delete=tuple(sorted(pods_.name(p) for p in _live(pods))))
    message = (f"recreated {_pods_phrase(ctx.expected)} (restart {trial.restarts}); "
               "waiting for all of them to be scheduled")
    return Step(_with(trial, phase=Phase.CREATED, reason=reasons.PODS_CREATED, message=message), create=True)


def _started_if_overdue(trial: TrialStatus, ctx: Context) -> datetime.datetime | None:
    """The trial's start when it has run past activeDeadlineSeconds; None while it has time, or no deadline."""
    deadline = deadline_of(trial, ctx.run_policy)
    return trial.start_time if deadline is not None and ctx.now >= deadline else None


def _deadline(trial: TrialStatus, pods: list[pods_.Pod], ctx: Context, started: datetime.datetime) -> Step:
    seconds = ctx.run_policy.active_deadline_seconds
    message = (f"the trial ran longer than activeDeadlineSeconds={seconds} "
               f"(started {started.isoformat()}); its running pods were stopped")
    return _finish(trial, pods, ctx, Phase.FAILED, reasons.DEADLINE_EXCEEDED, message, stop_running=True)


def _watch(trial: TrialStatus, pods: list[pods_.Pod], ctx: Context) -> Step:
    """A trial whose pods were created (Created) or all ran (Running)."""
    started = _started_if_overdue(trial, ctx)
    if started is not None:
        return _deadline(trial, pods, ctx, started)
    live = {pods_.name(p): p for p in _live(pods)}
    lost = sorted((p for p in live.values() if pods_.on_lost_node(p)), key=pods_.rank)
    if lost:
        return _fail_or_restart(trial, pods, ctx, reasons.NODE_LOST, _lost_nodes(lost))
    failed = {f.rank: f for p in live.values() if (f := pods_.failure_of(p)) is not None}
    if failed:
        return _blame(trial, pods, live, failed, ctx)
    going = sorted(pods_.name(p) for p in pods if pods_.is_terminating(p))
    missing = [e.name for e in ctx.expected if e.name not in live]
    # Before all pods ran, a missing one is simply (re)created; after, a rank is gone and the gang is broken.
    if going or (missing and trial.phase == Phase.RUNNING):
        gone = going + [m for m in missing if m not in going]
        cause = f"pod {gone[0]} was deleted" + (f" (and {len(gone) - 1} more)" if len(gone) > 1 else "")
        return _fail_or_restart(trial, pods, ctx, reasons.POD_DELETED, cause)
    if missing:
        return Step(trial, create=True)
    workers = [live[e.name] for e in ctx.expected if e.role == constants.ROLE_WORKER]
    if workers and all(pods_.phase(p) == "Succeeded" for p in workers):
        if (held := pending_records.servers_hold(trial, list(live.values()), ctx.records, ctx.now)) is not None:
            return Step(held.status, due=held.due)
        aggregator = min(workers, key=pods_.rank)
        summary = pods_.summary_of(aggregator)
        if summary is None:
            # Every run the runtime finishes ends with the summary; exit 0 without it is user code ending the
            # process early (os._exit(0) skips the runtime's own checks), never a trial to report as done.
            return _finish(trial, pods, ctx, Phase.FAILED, reasons.EXITED_EARLY,
                           f"all {_workers(ctx.expected)} exited with code 0 but pod {pods_.name(aggregator)} left no "
                           "summary in its termination message: the ranks ended before training did (os._exit in "
                           "user code?) or the image does not run the ringleader runtime", workers_done=True)
        message = f"all {_workers(ctx.expected)} succeeded"
        if summary.throughput is not None:
            message += f": {summary.throughput:.1f} samples/s"
        return _finish(trial, pods, ctx, Phase.SUCCEEDED, reasons.WORKERS_SUCCEEDED, message,
                       workers_done=True, summary=summary)
    waiting = [p for p in (live[e.name] for e in ctx.expected) if not pods_.is_started(p)]
    stuck = _not_starting(trial, pods, waiting, ctx)
    if stuck is not None:
        return stuck
    if not waiting:
        if (pending := pending_records.waiting_message(list(live.values()), ctx.records.waiting)) is not None:
            return Step(_with(trial, phase=Phase.RUNNING, reason=reasons.RECORDS_PENDING, message=pending))
        if trial.phase == Phase.RUNNING:
            return Step(trial)
        message = f"all {_pods_phrase(ctx.expected)} are running"
        return Step(_with(trial, phase=Phase.RUNNING, reason=reasons.ALL_PODS_RUNNING, message=message))
    # Gang semantics: a trial with any pod not yet running is not Running, and says which pod waits on what.
    total = len(ctx.expected)
    scheduled = sum(1 for e in ctx.expected if pods_.is_scheduled(live[e.name]))
    first = waiting[0]
    message = (f"{total - len(waiting)} of {total} pods running, {scheduled} of {total} scheduled; "
               f"pod {pods_.name(first)}: {pods_.waiting_reason(first)}")
    if len(waiting) > 1:
        message += f" (and {len(waiting) - 1} more waiting)"
    deadlines = [pods_.created_at(p) + ctx.startup_deadline_seconds for p in waiting]
    due = min(deadlines)
    unmet = next((u for u in map(ctx.unmet_placement, waiting) if u), None)
    reason = reasons.WAITING_FOR_PODS
    if unmet:
        reason = reasons.WAITING_FOR_PLACEMENT
        message = (f"{unmet} cannot be met yet, so pods wait (until startupDeadlineSeconds="
                   f"{ctx.startup_deadline_seconds:g}): {message}")
    return Step(_with(trial, reason=reason, message=message),
                due=datetime.datetime.fromtimestamp(due, datetime.timezone.utc) if math.isfinite(due) else None)


def _not_starting(trial: TrialStatus, pods: list[pods_.Pod], waiting: list[pods_.Pod], ctx: Context) -> Step | None:
    """The trial failed because a pod cannot start: at once if it never can (`pods_.cannot_start`), else once it is
    still not running `startup_deadline_seconds` after its creation (an image that cannot be pulled, a missing
    Secret or claim, no node free to fit it). No restart: new pods would wait for the same thing."""
    never = [(p, c) for p in waiting if (c := pods_.cannot_start(p, ctx.rooms))]
    seconds = ctx.startup_deadline_seconds
    late = [p for p in waiting if ctx.now.timestamp() - pods_.created_at(p) >= seconds]
    if not never and not late:
        return None
    first = never[0][0] if never else late[0]
    unmet = None if never else ctx.unmet_placement(first)
    if never:
        reason, cause = never[0][1]
    elif unmet:
        reason, cause = reasons.PLACEMENT_UNSATISFIABLE, \
            (f"{unmet} was not met within startupDeadlineSeconds={seconds:g}: pod {pods_.name(first)} fits no "
             "node beside the others (fewer domains than Spread needs, or no domain large enough to Pack); "
             "add nodes, lower the ranks, or set `scheduling.placement.mode` to Preferred")
    else:
        reason, cause = reasons.STARTUP_DEADLINE_EXCEEDED, \
            f"pod {pods_.name(first)} did not start within startupDeadlineSeconds={seconds:g} of its creation"
    message = f"{cause}: {pods_.waiting_reason(first)}"
    others = len(waiting) - 1
    if others:
        message += f" (and {others} more pod{'s' * (others != 1)} not running)"
    return _finish(trial, pods, ctx, Phase.FAILED, reason, message, stop_running=True)


def _blame(trial: TrialStatus, pods: list[pods_.Pod], live: dict[str, pods_.Pod], failed: dict[int, pods_.PodFailure],
           ctx: Context) -> Step:
    """Fail or restart a trial, naming the pod that caused it; first a short grace while only echoes have ended."""
    exits = [pods_.exit_of(f) for f in failed.values()]
    running = sum(1 for p in live.values() if not pods_.is_finished(p) and pods_.failure_of(p) is None)
    earliest = min(e.order for e in exits)  # +inf when no pod said when it ended: nothing to wait from
    waited = ctx.now.timestamp() - earliest if math.isfinite(earliest) else math.inf
    if not failures.settled(exits, running=running, waited_seconds=waited,
                            grace_seconds=failures.DEFAULT_GRACE_SECONDS):
        first = min(failed.values(), key=lambda f: pods_.seconds_of(f.finished_at))
        message = (f"{first.describe()}; waiting up to {failures.DEFAULT_GRACE_SECONDS:g} s for the other pods "
                   "to end, to name the cause rather than a peer that lost contact with it")
        return Step(_with(trial, reason=reasons.DECIDING_CAUSE, message=message))
    by_rank = {rank: p for p in live.values() for rank in pods_.ranks(p)}  # a pod of several ranks under each
    # Peers that only lost contact, and a pod that exited 0 outside the runtime: that pod went away first.
    early = next((p for p in live.values() if pods_.ended_outside_runtime(p)), None)
    verdict = failures.verdict(
        exits, early=None if early is None else failures.Early(pods_.rank(early), f"pod {pods_.name(early)}", False),
        who=lambda rank: f"pod {pods_.name(by_rank[rank])}" if rank in by_rank else f"pod of rank {rank}",
        describe=lambda rank: failed[rank].describe())
    cause = verdict.message
    if len(failed) > 1 and verdict.reason != reasons.EXITED_EARLY:
        cause += f" (and {len(failed) - 1} more pod{'s' * (len(failed) > 2)} failed)"
    if verdict.reason in (reasons.PERMANENT_FAILURE, reasons.RECORDS_INCOMPLETE):
        # No restart can help: the rank said so (an import error, an invalid model or dataset), or MLflow did not take
        # its records within the wait. New pods would fail the same way, so backoffLimit is not spent on them.
        message = (pending_records.incomplete_message(live.values()) if verdict.reason == reasons.RECORDS_INCOMPLETE
                   else f"{cause}; not restarted: the runtime reported a failure no restart can fix")
        return _finish(trial, pods, ctx, Phase.FAILED, verdict.reason, message)
    return _fail_or_restart(trial, pods, ctx, verdict.reason, cause)


def create_failed(trial: TrialStatus, error: str, now: datetime.datetime) -> TrialStatus:
    """A trial whose objects the API server refused as invalid: retrying cannot help."""
    return _with(trial, phase=Phase.FAILED, reason=reasons.CREATE_FAILED, completion_time=now,
                 message=f"the API server refused the trial's objects: {error}")
