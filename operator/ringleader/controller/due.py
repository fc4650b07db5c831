"""When an experiment needs its next full pass: deadlines, TTL expiry, pods waited on; used by `reconciler`.

The work queue sleeps until the earliest of these times (not a periodic sweep), so a deadline or a
TTL is enforced when it falls due. Progress reads are due apart (`polling`). Pure: times in, seconds out.
"""

from __future__ import annotations

import datetime

from ringleader.api.spec import RunPolicy
from ringleader.api.status import ExperimentStatus, Phase
from ringleader.contract import failures
from ringleader.controller import plan, reasons, trials
from ringleader.controller.settings import TimingSettings



def expiry_of(status: ExperimentStatus, run_policy: RunPolicy) -> datetime.datetime | None:
    """When a finished experiment is deleted under ttlSecondsAfterFinished, or None."""
    if run_policy.ttl_seconds_after_finished is None or not plan.is_finished(status) or status.completion_time is None:
        return None
    return status.completion_time + datetime.timedelta(seconds=run_policy.ttl_seconds_after_finished)


def _waiting_on_pods(status: ExperimentStatus) -> bool:
    return any(
        (t.phase == Phase.CREATED)
        or (t.phase == Phase.RESTARTING)
        or (t.phase == Phase.PENDING and t.reason in (reasons.WAITING_FOR_OLD_PODS, reasons.WAITING_FOR_ADMISSION))
        for t in status.trials
    )


def next_wake(status: ExperimentStatus, run_policy: RunPolicy, now: datetime.datetime,
              timing: TimingSettings, *, retry_tracking_in: float | None = None,
              pods_due: datetime.datetime | None = None) -> float | None:
    """Seconds until the experiment needs a full pass without any event, or None to wait for one. Progress
    reads of running trials are due apart (`polling`): they need no full pass. `pods_due` is when a pod not
    running yet reaches its startup deadline (plan.Plan.due)."""
    times: list[float] = []
    if pods_due is not None:
        times.append((pods_due - now).total_seconds())
    for trial in status.trials:
        deadline = trials.deadline_of(trial, run_policy)
        if deadline is not None:
            times.append((deadline - now).total_seconds())
    expiry = expiry_of(status, run_policy)
    if expiry is not None:
        times.append((expiry - now).total_seconds())
    if _waiting_on_pods(status):
        times.append(timing.recheck_seconds)
    if any(t.reason == reasons.DECIDING_CAUSE for t in status.trials):
        # A grace of its own, not a pod event, ends this wait: look again a few times within it.
        times.append(failures.DEFAULT_GRACE_SECONDS / 5)
    if retry_tracking_in is not None:
        times.append(retry_tracking_in)
    return max(0.0, min(times)) if times else None
