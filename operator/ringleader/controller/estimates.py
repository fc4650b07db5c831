"""The experiment's estimated end (status.estimate, models/eta.py) from its trials' statuses and the progress lines
read; used by `plan`.

Pure, as `plan` is, and free of the clock: a running trial's pace comes from the kubelet's timestamps on its
progress lines and a starting trial's from its startTime, so passes that read nothing new compute the same
estimate and write nothing. The estimate changes when a progress line or a trial's end does.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Mapping, Sequence

from ringleader.models import eta
from ringleader.api.status import Estimate, EstimateBound, Phase, Summary, TrialStatus
from ringleader.api.trial import Expansion
from ringleader.contract import progress as progress_line
from ringleader.controller.trials import ACTIVE_PHASES, TERMINAL_PHASES



@dataclasses.dataclass(frozen=True)
class PlannedSweep:
    """What an estimate needs of the experiment's spec, small enough to keep between passes."""

    trials: dict[str, eta.UnfinishedTrial]
    """trials by name, before they start."""
    upper_bound: bool
    """upper_bound: model.target may stop trials before their iterations."""

    @classmethod
    def of(cls, expansion: Expansion) -> PlannedSweep:
        return cls(trials={t.name: eta.planned(t) for t in expansion.trials},
                   upper_bound=any(eta.upper_bound(t.spec) for t in expansion.trials))


def _seconds(at: datetime.datetime | None) -> float | None:
    return None if at is None else at.timestamp()


def _finished(sweep: PlannedSweep, trial: TrialStatus, summary: Summary) -> eta.Finished:
    start, end = _seconds(trial.start_time), _seconds(trial.completion_time)
    return eta.Finished(
        parameters=trial.parameters,
        iterations=eta.iterations_run(sweep.trials[trial.name].iterations, sweep.upper_bound,
                                      summary.target_iterations),
        iteration_seconds=summary.iteration_time_p50_seconds,
        seconds=None if start is None or end is None else end - start,
        predicted=summary.predicted_iteration_seconds or {})


def _unfinished(sweep: PlannedSweep, trial: TrialStatus,
                lines: Sequence[progress_line.Line]) -> eta.UnfinishedTrial:
    started = _seconds(trial.start_time) if trial.phase in ACTIVE_PHASES else None
    return dataclasses.replace(
        sweep.trials[trial.name], started=started,
        samples=tuple((line.at.timestamp(), line.iteration) for line in lines if line.at is not None),
        iteration_seconds=lines[-1].iteration_seconds if lines else None)


def _time(seconds: float | None) -> datetime.datetime | None:
    """A time in whole seconds; None past what a datetime holds (progress lines far apart, millions of iterations)."""
    try:
        return None if seconds is None else datetime.datetime.fromtimestamp(round(seconds), datetime.timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def estimate(sweep: PlannedSweep, trials: Sequence[TrialStatus],
             lines: Mapping[str, Sequence[progress_line.Line]]) -> Estimate | None:
    """The estimate, or None once every trial ended."""
    finished = [_finished(sweep, t, t.summary) for t in trials if t.phase == Phase.SUCCEEDED and t.summary is not None]
    unfinished = [t for t in trials if t.phase not in TERMINAL_PHASES]
    if not unfinished:
        return None
    planned = [_unfinished(sweep, t, lines.get(t.name, ())) for t in unfinished]
    end, why = eta.sweep_end(planned, finished)
    running = [p for p, t in sorted(zip(planned, unfinished), key=lambda pair: pair[1].index)
               if t.phase == Phase.RUNNING]
    completion = _time(end)
    bound = EstimateBound.AT_MOST if sweep.upper_bound else EstimateBound.EXPECTED
    return Estimate(
        completion_time=completion,
        trial_completion_time=_time(eta.trial_end(running[-1], finished)) if running else None,
        bound=bound,
        text=None if completion is None else _text(completion, sweep.upper_bound),
        message=why or _basis(planned, finished, sweep.upper_bound))


def _text(at: datetime.datetime, upper_bound: bool) -> str:
    return ("at most " if upper_bound else "") + at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _basis(planned: Sequence[eta.UnfinishedTrial], finished: Sequence[eta.Finished], upper_bound: bool) -> str:
    """What a known estimate rests on, in words."""
    paced = sum(1 for t in planned if t.samples)
    priced = len(planned) - paced
    said = []
    if paced:
        said.append(f"{paced} running trial{'s' * (paced != 1)}: the remaining iterations at the recent pace")
    if priced:
        said.append(f"{priced} trial{'s' * (priced != 1)} starting or to run: iterations x predicted iteration "
                    f"time + {eta.startup_seconds(finished):.0f} s start-up")
    if upper_bound:
        said.append("at most: model.target may stop trials sooner")
    return "; ".join(said)
