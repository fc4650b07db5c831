"""How far a running trial is, from its workers' progress lines (ringleader.contract.progress); used by `reconciler`."""

from __future__ import annotations

from typing import Iterable

from ringleader.api import constants
from ringleader.controller import pods as pods_

# Enough of the tail to hold the last progress line among other log lines, small enough to be cheap.
TAIL_LINES = 50
LIMIT_BYTES = 16 * 1024


def slowest(iterations: Iterable[int | None]) -> int:
    """The trial's iteration: its slowest worker's, a worker that printed nothing yet counting as 0."""
    values = [value or 0 for value in iterations]
    return min(values) if values else 0


def readable_workers(trial_pods: Iterable[pods_.Pod]) -> list[pods_.Pod]:
    """Worker pods whose log is worth reading: running or finished, not going away."""
    return [
        p for p in trial_pods
        if pods_.role(p) == constants.ROLE_WORKER and not pods_.is_terminating(p)
        and pods_.phase(p) in ("Running", "Succeeded", "Failed")
    ]
