"""What `ringleader run` prints while trials run: one line redrawn on a terminal, periodic plain lines otherwise.

Used by sweep.py. Progress is the slowest worker's iteration over the trial's iterations; messages
(a trial started, ended, failed) are permanent lines printed above the redrawn one.
"""

from __future__ import annotations

import sys
import time
from typing import Sequence, TextIO

from ringleader.launch import settings as settings_
from ringleader.launch import trials as trials_

CLEAR_LINE = "\r\x1b[K"


class ProgressDisplay:
    def __init__(self, settings: settings_.LaunchSettings, out: TextIO = sys.stdout, total_trials: int = 1):
        self.settings = settings
        self.out = out
        self.total_trials = total_trials
        self.tty = out.isatty()
        self._drawn = False
        self._last_draw = 0.0
        self._last_line: dict[str, float] = {}

    def message(self, text: str) -> None:
        """A permanent line (above the progress line on a terminal)."""
        if self._drawn:
            self.out.write(CLEAR_LINE)
            self._drawn = False
        self.out.write(text + "\n")
        self.out.flush()

    def update(self, running: Sequence[tuple[int, trials_.TrialRun]]) -> None:
        """Show where the running trials are; `running` pairs each trial's position in the sweep (from 1) with it."""
        now = time.monotonic()
        if self.tty:
            if now - self._last_draw < self.settings.redraw_seconds or not running:
                return
            self._last_draw = now
            parts = [f"[{position}/{self.total_trials}] {trial.trial.name} {_where(trial)}" for position, trial in running]
            self.out.write(CLEAR_LINE + " | ".join(parts))
            self.out.flush()
            self._drawn = True
            return
        for position, trial in running:
            name = trial.trial.name
            last = self._last_line.setdefault(name, now)
            if now - last >= self.settings.progress_seconds:
                self._last_line[name] = now
                self.message(f"[{position}/{self.total_trials}] {name} {_where(trial)}")

    def close(self) -> None:
        if self._drawn:
            self.out.write(CLEAR_LINE)
            self.out.flush()
            self._drawn = False


def _where(trial: trials_.TrialRun) -> str:
    done, total = trial.progress(), trial.total_iterations
    # After the last iteration the ranks still gather records and write summaries and traces.
    state = ", finishing" if done >= total else ""
    return f"iteration {done}/{total}{state} ({trial.elapsed():.0f} s)"
