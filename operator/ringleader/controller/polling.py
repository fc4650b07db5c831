"""When each running trial's progress is read next, and what was read last; kept by `reconciler` per experiment.

A trial's log is read once per poll interval; until its first progress line shows (its ranks import,
rendezvous and build the model first), for at most a start-up window, every start-up interval instead, so
that its status moves within seconds of its first iterations while a long run's steady cost stays one read
per interval. A log that cannot be read (no node serves it, the
kubelet is away) is tried again after the interval doubled per failure in a row, up to a cap, so a
cluster that never serves logs is not asked every interval; the first failure of a streak is the one
worth telling users (an Event), and so is the first read after it. Pure bookkeeping: monotonic
seconds are passed in.
"""

from __future__ import annotations

import dataclasses
from typing import Hashable, Iterable

from ringleader.contract import progress as progress_line
from ringleader.contract import unpublished

# A pass woken a little before the interval is up still reads: the work queue's timers are not exact.
EARLY = 0.05


@dataclasses.dataclass
class _Trial:
    lines: tuple[progress_line.Line, ...] | None = None
    waiting: unpublished.Waiting | None = None
    """waiting is the last line of the read log's rank waiting for MLflow to take its records, if it printed one."""
    next_read: float = 0.0
    failures: int = 0
    since: float | None = None
    """When the trial was first looked at (running): its start-up window counts from there."""


class PollSchedule:
    """Per experiment and trial: the progress lines last read, when to read again, failures in a row."""

    def __init__(self, interval: float, max_interval: float, start_interval: float | None = None,
                 start_window: float = 0.0) -> None:
        self.interval, self.max_interval = interval, max(interval, max_interval)
        self.start_interval, self.start_window = min(start_interval or interval, interval), start_window
        self._experiments: dict[Hashable, dict[str, _Trial]] = {}

    def _next(self, trial: _Trial, now: float) -> float:
        """The interval after a read or a look: the start-up one while no progress line showed, within the window."""
        starting = not trial.lines and trial.since is not None and now - trial.since < self.start_window
        return now + (self.start_interval if starting else self.interval)

    def keep(self, key: Hashable, running: Iterable[str]) -> None:
        """Forget the trials of `key` that no longer run."""
        running = set(running)
        trials = self._experiments.get(key, {})
        for name in [n for n in trials if n not in running]:
            del trials[name]
        if not trials:
            self._experiments.pop(key, None)

    def forget(self, key: Hashable) -> None:
        self._experiments.pop(key, None)

    def _trial(self, key: Hashable, name: str) -> _Trial:
        return self._experiments.setdefault(key, {}).setdefault(name, _Trial())

    def due(self, key: Hashable, name: str, now: float) -> bool:
        trial = self._trial(key, name)
        if trial.since is None:
            trial.since = now
        return now >= trial.next_read - EARLY * self.interval

    def read(self, key: Hashable, name: str, now: float, lines: Iterable[progress_line.Line],
             waiting: unpublished.Waiting | None = None) -> bool:
        """A read that succeeded, with the progress lines and the waiting line it found; True when it ends a
        streak of failures."""
        trial = self._trial(key, name)
        recovered = trial.failures > 0
        trial.lines, trial.waiting, trial.failures = tuple(lines), waiting, 0
        trial.next_read = self._next(trial, now)
        return recovered

    def skipped(self, key: Hashable, name: str, now: float) -> None:
        """Nothing to read yet (no worker runs): look again after the interval, no failure counted."""
        trial = self._trial(key, name)
        trial.next_read = self._next(trial, now)

    def unreadable(self, key: Hashable, name: str, now: float) -> tuple[int, float]:
        """A read that failed: (failures in a row, seconds until the next try)."""
        trial = self._trial(key, name)
        trial.failures += 1
        retry_in = min(self.interval * 2 ** (trial.failures - 1), self.max_interval)
        trial.next_read = now + retry_in
        return trial.failures, retry_in

    def known(self, key: Hashable) -> dict[str, tuple[progress_line.Line, ...]]:
        """The progress lines last read of each trial of `key` that was read at least once."""
        return {n: t.lines for n, t in self._experiments.get(key, {}).items() if t.lines is not None}

    def waiting(self, key: Hashable) -> dict[str, unpublished.Waiting]:
        """The waiting line last read of each trial of `key` whose reporting rank waits for MLflow."""
        return {n: t.waiting for n, t in self._experiments.get(key, {}).items() if t.waiting is not None}

    def next_in(self, key: Hashable, now: float) -> float | None:
        """Seconds until a trial of `key` is next due to be read; None when none is tracked."""
        trials = self._experiments.get(key, {})
        return max(0.0, min(t.next_read for t in trials.values()) - now) if trials else None
