"""What `ringleader run` prints while trials run: one line redrawn on a terminal, periodic plain lines otherwise.

Used by sweep.py. Progress is the slowest worker's iteration over the trial's iterations, with the trial's ETA
and, in a sweep, the sweep's (models/eta.py); messages (a trial started, ended, failed) are permanent lines
printed above the redrawn one.
"""

from __future__ import annotations

import sys
import time
from typing import Callable, Sequence, TextIO

from ringleader.models import eta
from ringleader.models import summary as summary_
from ringleader.api.trial import Trial
from ringleader.contract import layout
from ringleader.launch.settings import LaunchSettings
from ringleader.launch.trials import TrialRun

CLEAR_LINE = "\r\x1b[K"


class ProgressDisplay:
    def __init__(self, settings: LaunchSettings, out: TextIO = sys.stdout, total_trials: int = 1,
                 clock: Callable[[], float] = time.monotonic):
        self.settings = settings
        self._clock = clock  # a test's own, so that "every few seconds" needs no real wait
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

    def update(self, running: Sequence[tuple[int, TrialRun]], waiting: Sequence[Trial] = (),
               finished: Sequence[eta.Finished] = ()) -> None:
        """Show where the running trials are and when they and the sweep should end; `running` pairs each
        trial's position in the sweep (from 1) with it, `waiting` are the trials still to start, `finished`
        those that ended with a summary (`finished_for_eta`)."""
        now = self._clock()
        for _, trial in running:
            trial.progress()  # seen at every poll, shown less often: the ETA's pace needs the sightings
        if self.tty:
            if now - self._last_draw < self.settings.redraw_seconds or not running:
                return
            self._last_draw = now
            parts = [f"[{position}/{self.total_trials}] {trial.trial.name} {_where(trial, finished, now)}"
                     for position, trial in running]
            self.out.write(CLEAR_LINE + " | ".join(parts) + _sweep_eta(running, waiting, finished, now))
            self.out.flush()
            self._drawn = True
            return
        for position, trial in running:
            name = trial.trial.name
            last = self._last_line.setdefault(name, now)
            if now - last >= self.settings.progress_seconds:
                self._last_line[name] = now
                self.message(f"[{position}/{self.total_trials}] {name} {_where(trial, finished, now)}"
                             + _sweep_eta(running, waiting, finished, now))

    def close(self) -> None:
        if self._drawn:
            self.out.write(CLEAR_LINE)
            self.out.flush()
            self._drawn = False


def _where(trial: TrialRun, finished: Sequence[eta.Finished], now: float) -> str:
    done, total = trial.progress(), trial.total_iterations
    where = f"iteration {done}/{total}"
    if done >= total:  # the ranks still gather records and write summaries and traces
        return f"{where}, finishing ({trial.elapsed():.0f} s)"
    end = eta.trial_end(trial.for_eta(), finished)
    said = eta.UNKNOWN if end is None else eta.describe(end - now, eta.upper_bound(trial.trial.spec))
    return f"{where} {100 * done // total}% ({trial.elapsed():.0f} s), {said}"


def _sweep_eta(running: Sequence[tuple[int, TrialRun]], waiting: Sequence[Trial],
               finished: Sequence[eta.Finished], now: float) -> str:
    """"; sweep ETA ..." while trials wait to start, else nothing (the running trials' ETAs say it)."""
    if not waiting:
        return ""
    end, why = eta.sweep_end([run.for_eta() for _, run in running] + [eta.planned(t) for t in waiting], finished)
    if end is None:
        return f"; sweep {why}"
    bound = any(eta.upper_bound(t.spec) for t in [*waiting, *(run.trial for _, run in running)])
    return f"; sweep {eta.describe(end - now, bound)}"


def finished_for_eta(run: TrialRun, outcome: layout.Outcome) -> eta.Finished | None:
    """A trial that ended, as the ETA of the trials after it sees it; None unless it finished with a summary."""
    summary = summary_.read(layout.read_json(run.directory / layout.SUMMARY_FILE))
    p50 = summary.timing.iteration_time_p50_seconds if summary else None
    if summary is None or p50 is None or outcome.end_time is None:
        return None
    spec = run.trial.spec
    return eta.Finished(parameters=dict(run.trial.parameters),
                        iterations=eta.iterations_run(spec.model.iterations, eta.upper_bound(spec),
                                                      summary.evaluation.target_iterations),
                        iteration_seconds=p50, seconds=outcome.end_time - outcome.start_time,
                        predicted=eta.predictions(summary.prediction))
