"""How far a running trial is, and at what pace, from one worker's progress lines (ringleader.contract.progress);
used by `reconciler`.

One log per trial, whatever its number of workers: the lowest-ranked worker's, the one that also leaves the
trial's summary. Under BSP (every ring and peer-to-peer trial, and parameter-server trials unless they say
otherwise) all workers finish an iteration together, so it is the trial's; under ASP, SSP and DSSP a worker
may run ahead of its peers, so the iteration shown is that worker's. Reading every worker's log would
instead cost one call per worker per poll: 8,000 calls per poll for 1,000 trials of 8 workers.
"""

from __future__ import annotations

from typing import Iterable

from ringleader.api import constants
from ringleader.contract import progress as progress_line
from ringleader.controller import pods as pods_

# Enough of the tail to hold the last progress line among other log lines, small enough to be cheap.
TAIL_LINES = 50
LIMIT_BYTES = 16 * 1024


def reporter(trial_pods: Iterable[pods_.Pod]) -> pods_.Pod | None:
    """The pod whose log tells the trial's progress: its lowest-ranked worker, once running or finished."""
    workers = [p for p in trial_pods if pods_.role(p) == constants.ROLE_WORKER and not pods_.is_terminating(p)]
    first = min(workers, key=pods_.rank, default=None)
    return first if first is not None and pods_.phase(first) in ("Running", "Succeeded", "Failed") else None


def container(pod: pods_.Pod) -> str | None:
    """The container whose log holds the progress lines: the pod's first (the trainer)."""
    return ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name")


def lines(log_text: str) -> tuple[progress_line.Line, ...]:
    """The progress lines in a log's tail, oldest first; () before the first one."""
    return tuple(progress_line.lines(log_text))
