"""A trial whose ranks trained while MLflow was away: RecordsPending while they hold their pods and retry, and the
RecordsIncomplete message once they gave up and handed their records over in their logs; used by `trials`.

A rank that finished training keeps its pod until MLflow has taken every record, at most
`tracking.recordsWaitSeconds` (tracking/live.py), printing a waiting line the operator reads from the reporting
pod's log (contract/unpublished.py). So the trial is not Succeeded, nor its report made, while records are
missing. Pure: pods, the last waiting line and the clock in; messages out.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Iterable

from ringleader.api import constants
from ringleader.api.status import TrialStatus
from ringleader.contract import unpublished
from ringleader.controller import reasons
from ringleader.controller import pods as pods_

SETTLE_SECONDS = 10.0
"""How long after the workers ended a server still running is simply ending (its last publish, its exit) before
the trial says it waits on it: so a trial whose records all went through never shows RecordsPending."""
GRACE_SECONDS = 60.0
"""Past recordsWaitSeconds after the workers ended, what a server's last round and its exit may still take before
it is stopped like a server that hangs."""


@dataclasses.dataclass(frozen=True)
class Records:
    """What a trial's step knows of its ranks' records."""

    waiting: unpublished.Waiting | None = None
    """waiting is the reporting pod's last line saying its rank trained and waits for MLflow to take its records."""
    wait_seconds: float = 900.0
    """wait_seconds is the trial's `tracking.recordsWaitSeconds`: how long its ranks hold their pods for MLflow."""


@dataclasses.dataclass(frozen=True)
class Hold:
    """A trial whose workers all succeeded but whose servers still run: not Succeeded yet."""

    status: TrialStatus
    """status is the trial's, unchanged while the servers may simply be ending, else RecordsPending."""
    due: datetime.datetime
    """due is when to look again without news: the end of the settling time, else of the wait."""


def _published(pods: Iterable[pods_.Pod]) -> str:
    """"1 of 3 ranks' records published": the ranks whose pods ended cleanly published all theirs."""
    pods = list(pods)
    done = sum(1 for p in pods if pods_.phase(p) == "Succeeded")
    return f"{done} of {len(pods)} ranks' records published"


def _waiting_on(waiting: unpublished.Waiting | None, running: list[pods_.Pod]) -> unpublished.Waiting | None:
    """The waiting line, if the rank that printed it still runs (a line read before its pod ended is stale)."""
    return waiting if waiting is not None and any(waiting.rank in pods_.ranks(p) for p in running) else None


def waiting_message(trial_pods: list[pods_.Pod], waiting: unpublished.Waiting | None) -> str | None:
    """RecordsPending's message for a trial whose pods all started and whose reporting rank waits for MLflow;
    None when no rank still running says it waits."""
    running = [p for p in trial_pods if pods_.phase(p) == "Running"]
    found = _waiting_on(waiting, running)
    if found is None:
        return None
    return f"{_published(trial_pods)}; waiting for MLflow at {found.uri}: {found.describe()}"


def servers_hold(trial: TrialStatus, trial_pods: list[pods_.Pod], records: Records,
                 now: datetime.datetime) -> Hold | None:
    """Whether a trial whose workers all succeeded waits for a server still running: quietly for SETTLE_SECONDS
    (its last publish, its exit), then as RecordsPending while its log says it waits for MLflow, at most
    recordsWaitSeconds and a grace after the workers ended. None: succeed, and stop a server that hangs."""
    servers = [p for p in trial_pods if pods_.role(p) != constants.ROLE_WORKER and pods_.phase(p) == "Running"]
    if not servers:
        return None
    ended = max((pods_.ended_at(p) for p in trial_pods if pods_.role(p) == constants.ROLE_WORKER), default=0.0)
    ended = min(ended, now.timestamp())  # a worker that says no time: counted from now
    found = _waiting_on(records.waiting, servers)
    if found is None:
        settled = ended + SETTLE_SECONDS
        return Hold(trial, _at(settled)) if now.timestamp() < settled else None
    bound = ended + records.wait_seconds + GRACE_SECONDS
    if now.timestamp() >= bound:
        return None
    message = f"all workers succeeded; {_published(trial_pods)}; waiting for MLflow at {found.uri}: {found.describe()}"
    return Hold(trial.model_copy(update={"reason": reasons.RECORDS_PENDING, "message": message}), _at(bound))


def _at(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc)


def incomplete_message(failed: Iterable[pods_.Pod]) -> str:
    """RecordsIncomplete's message: how much of what was recorded MLflow holds, which pods hold the rest in their
    logs, and how to publish it."""
    held = sorted(((p, found) for p in failed if (found := _incomplete(p)) is not None), key=lambda f: f[1].rank)
    published = sum(found.published for _, found in held)
    recorded = sum(found.recorded for _, found in held)
    names = " ".join(pods_.name(p) for p, _ in held)
    namespace = next((p["metadata"].get("namespace") for p, _ in held), None) or "NAMESPACE"
    ranks = f"{len(held)} rank{'s' * (len(held) != 1)}"
    return (f"records incomplete: {published} of {recorded} iterations of {ranks} published: MLflow did not take the "
            "rest within tracking.recordsWaitSeconds after training; the pods hold them in their logs and are kept: "
            f"for pod in {names}; do kubectl logs -n {namespace} $pod | ringleader publish --from-log - "
            "--tracking-uri <MLflow's address from here>; done")


def _incomplete(pod: pods_.Pod) -> unpublished.Incomplete | None:
    failure = pods_.failure_of(pod)
    return unpublished.incomplete_of(failure.message if failure else None)
