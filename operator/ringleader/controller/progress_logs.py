"""How far a running trial is, and at what pace, from one worker's progress lines (ringleader.contract.progress),
read from its log when `polling` says so; used by `reconciler`.

One log per trial, whatever its number of workers: the lowest-ranked worker's, the one that also leaves the
trial's summary. Under BSP (every ring and peer-to-peer trial, and parameter-server trials unless they say
otherwise) all workers finish an iteration together, so it is the trial's; under ASP, SSP and DSSP a worker
may run ahead of its peers, so the iteration shown is that worker's. Reading every worker's log would
instead cost one call per worker per poll: 8,000 calls per poll for 1,000 trials of 8 workers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Iterable

import kopf

from ringleader.api import constants
from ringleader.api.status import ExperimentStatus, Phase
from ringleader.contract import progress as progress_line
from ringleader.contract import unpublished
from ringleader.controller import kube, polling, reasons
from ringleader.controller import pods

logger = logging.getLogger(__name__)

# Enough of the tail to hold the last progress line among other log lines, small enough to be cheap.
TAIL_LINES = 50
LIMIT_BYTES = 16 * 1024


def reporter(trial_pods: Iterable[pods.Pod]) -> pods.Pod | None:
    """The pod whose log tells the trial's progress: its lowest-ranked worker still running, else its lowest-ranked
    pod still running (a server publishing its last records), else its lowest-ranked worker once finished. A
    rank that ended has nothing more to say, while one still running may be waiting for MLflow (its waiting line).
    A pod whose node stopped answering is never asked: its log read would wait on a kubelet that is gone, holding
    up the very pass that reports the lost node."""
    live = [p for p in trial_pods if not pods.is_terminating(p) and not pods.on_lost_node(p)]
    workers = [p for p in live if pods.role(p) == constants.ROLE_WORKER]
    first = min(workers, key=pods.rank, default=None)
    if first is None or pods.phase(first) not in ("Running", "Succeeded", "Failed"):
        return None
    running = [p for p in live if pods.phase(p) == "Running"]
    return min([p for p in running if p in workers] or running, key=pods.rank, default=first)


def container(pod: pods.Pod) -> str | None:
    """The container whose log holds the progress lines: the pod's first (the trainer)."""
    return ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name")


def lines(log_text: str) -> tuple[progress_line.Line, ...]:
    """The progress lines in a log's tail, oldest first; () before the first one."""
    return tuple(progress_line.lines(log_text))


async def read(kube_: kube.Kube, polls: polling.PollSchedule, body: dict[str, Any], old: ExperimentStatus,
               reporters: dict[str, dict[str, Any] | None]) -> dict[str, tuple[progress_line.Line, ...]]:
    """Each running trial's progress lines: its reporting pod's log, read when due (`polls`), else the last read."""
    key = (body["metadata"]["namespace"], body["metadata"]["name"])
    running = [t.name for t in old.trials if t.phase == Phase.RUNNING]
    polls.keep(key, running)
    clock = time.monotonic()
    due_now = [name for name in running if polls.due(key, name, clock)]
    await asyncio.gather(*(_read_trial(kube_, polls, body, name, reporters.get(name), clock) for name in due_now))
    return polls.known(key)


async def _read_trial(kube_: kube.Kube, polls: polling.PollSchedule, body: dict[str, Any], trial: str,
                      pod: dict[str, Any] | None, clock: float) -> None:
    key = (body["metadata"]["namespace"], body["metadata"]["name"])
    if pod is None:
        polls.skipped(key, trial, clock)
        return
    try:
        text = await kube_.read_log(key[0], pods.name(pod), container(pod), tail_lines=TAIL_LINES,
                                    limit_bytes=LIMIT_BYTES)
    except kube.LogUnavailable as error:
        streak, retry_in = polls.unreadable(key, trial, clock)
        logger.debug("progress of %s/%s unreadable (%d in a row): %s", key[1], trial, streak, error)
        if streak == 1:  # once per streak: users learn why progress stands still, not every interval
            kopf.warn(body, reason=reasons.PROGRESS_UNREADABLE, message=(
                f"trial {trial}: the log of pod {pods.name(pod)} cannot be read ({error}), so its progress "
                f"is not updated; trying again in {retry_in:g} s, then less often (at most every "
                f"{polls.max_interval:g} s)"))
        return
    if polls.read(key, trial, clock, lines(text), unpublished.last_waiting(text)):
        kopf.info(body, reason=reasons.PROGRESS_READABLE,
                  message=f"trial {trial}: the log of pod {pods.name(pod)} can be read again")
