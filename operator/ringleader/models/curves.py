"""Time series of a trial from its records: loss over wall-clock time, staleness, DSSP's granted thresholds.

Used by the report's paradigm figures and findings. Times are seconds since the trial's first
iteration began (its first record's timestamp minus that iteration's duration), so trials that ran at
different hours share an axis.
"""

from __future__ import annotations

import collections
from typing import Iterable

from ringleader.contract import records as records_
from ringleader.models import recorded, results, targets
from ringleader.api import constants
from ringleader.contract import keys

SMOOTHING = 10
"""Loss values in the trailing mean of a loss curve: one minibatch's loss is noisy; ten, across workers, less so."""

Curve = list[tuple[float, float]]


def _worker_records(result: results.TrialResult) -> Iterable[dict]:
    for records in result.records.values():
        yield from (r for r in records if records_.is_worker_record(r))


def start_time(result: results.TrialResult) -> float | None:
    """When the trial's first iteration began, in seconds since the epoch; None without timed records."""
    return targets.start_time(r for records in result.records.values() for r in records)


def loss_curve(result: results.TrialResult) -> Curve:
    """(seconds since start, trailing mean of the last SMOOTHING losses of all workers) in time order."""
    start = start_time(result)
    points = sorted((float(r[keys.TIMESTAMP]), float(r[keys.LOSS])) for r in _worker_records(result)
                    if r.get(keys.LOSS) is not None and r.get(keys.TIMESTAMP) is not None)
    if start is None or not points:
        return []
    window: collections.deque[float] = collections.deque(maxlen=SMOOTHING)
    curve = []
    for timestamp, loss in points:
        window.append(loss)
        curve.append((timestamp - start, sum(window) / len(window)))
    return curve


def evaluation_curve(result: results.TrialResult, key: str) -> Curve:
    """(seconds since start, `key`) of every evaluation the trial recorded (eval/accuracy or eval/loss), in time
    order."""
    start = start_time(result)
    if start is None:
        return []
    return sorted((float(r[keys.TIMESTAMP]) - start, float(r[key])) for r in _worker_records(result)
                  if isinstance(r.get(key), (int, float)) and isinstance(r.get(keys.TIMESTAMP), (int, float)))


def time_to(curve: Curve, target: float) -> float | None:
    """Seconds until the curve first reaches `target` or below; None if it never does."""
    return next((seconds for seconds, loss in curve if loss <= target), None)


def staleness(result: results.TrialResult) -> list[float]:
    """The staleness of every worker iteration after warm-up (iterations; only asynchronous exchanges record it)."""
    values = []
    for records in result.records.values():
        values += [float(r[keys.STALENESS]) for r in recorded.measured(records, constants.ROLE_WORKER)
                   if records_.is_worker_record(r) and r.get(keys.STALENESS) is not None]
    return values


def thresholds(result: results.TrialResult) -> dict[int, Curve]:
    """Per rank that granted them (DSSP's servers), (seconds since start, threshold granted) in time order."""
    start = start_time(result)
    if start is None:  # no record has a timestamp
        return {}
    series = {}
    for rank, records in sorted(result.records.items()):
        points = sorted((float(r[keys.TIMESTAMP]) - start, float(r[keys.SERVER_THRESHOLD])) for r in records
                        if r.get(keys.SERVER_THRESHOLD) is not None and r.get(keys.TIMESTAMP) is not None)
        if points:
            series[rank] = points
    return series
