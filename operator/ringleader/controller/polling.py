"""When each running trial's progress is read next, and what was read last; kept by `reconciler` per experiment.

A trial's log is read once per poll interval. A log that cannot be read (no node serves it, the
kubelet is away) is tried again after the interval doubled per failure in a row, up to a cap, so a
cluster that never serves logs is not asked every interval; the first failure of a streak is the one
worth telling users (an Event), and so is the first read after it. Pure bookkeeping: monotonic
seconds are passed in.
"""

from __future__ import annotations

import dataclasses
from typing import Hashable, Iterable

from ringleader.contract import progress as progress_line

# A pass woken a little before the interval is up still reads: the work queue's timers are not exact.
EARLY = 0.05


@dataclasses.dataclass
class _Trial:
    lines: tuple[progress_line.Line, ...] | None = None
    next_read: float = 0.0
    failures: int = 0


class Schedule:
    """Per experiment and trial: the progress lines last read, when to read again, failures in a row."""

    def __init__(self, interval: float, max_interval: float) -> None:
        self.interval, self.max_interval = interval, max(interval, max_interval)
        self._experiments: dict[Hashable, dict[str, _Trial]] = {}

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
        return now >= self._trial(key, name).next_read - EARLY * self.interval

    def read(self, key: Hashable, name: str, now: float, lines: Iterable[progress_line.Line]) -> bool:
        """A read that succeeded, with the progress lines it found; True when it ends a streak of failures."""
        trial = self._trial(key, name)
        recovered = trial.failures > 0
        trial.lines, trial.failures, trial.next_read = tuple(lines), 0, now + self.interval
        return recovered

    def skipped(self, key: Hashable, name: str, now: float) -> None:
        """Nothing to read yet (no worker runs): look again after the interval, no failure counted."""
        self._trial(key, name).next_read = now + self.interval

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

    def next_in(self, key: Hashable, now: float) -> float | None:
        """Seconds until a trial of `key` is next due to be read; None when none is tracked."""
        trials = self._experiments.get(key, {})
        return max(0.0, min(t.next_read for t in trials.values()) - now) if trials else None
