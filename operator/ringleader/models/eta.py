"""Predicted time to finish, for `ringleader run`'s progress line (launch/display.py) and the experiment's status
(controller/estimates.py): pure functions of the progress seen and of the trials that finished.

A trial that has not run yet takes its iterations x a predicted iteration time, plus start-up. The
iteration time is the one earlier trials of the same combination measured (repetitions), else the one an
earlier trial's calibrated models predicted for this trial's architecture (the summary's prediction,
models/prediction.py), when the two trials differ in architecture alone. Start-up is the mean time the
finished trials spent beyond their iterations (ranks starting, records written). With nothing known there
is no estimate yet. Once a trial runs, its remaining iterations take the mean iteration time of its recent
progress (about the last WINDOW_FRACTION of its iterations, so warm-up drops out as it goes); the trials
still to run follow the running ones, each in the place of the first to end. Under `model.target` with
onReached Stop a trial may end sooner: the estimate is then an upper bound.

Times are seconds on one clock the caller chooses: epoch seconds in the operator, monotonic in the launcher.
A running trial is estimated to its last iteration's end; a trial not running yet to its end, since
start-up counts all a finished trial spent beyond its iterations, at both ends.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import statistics
from typing import Any, Mapping, Sequence

from ringleader.api import variants
from ringleader.api.spec import ExperimentSpec, OnReached, SweepMatrix
from ringleader.api import trial as trial_
from ringleader.contract import keys

Sample = tuple[float, int]
"""(clock seconds, iterations done), as a trial's progress was seen."""

WINDOW_FRACTION = 0.1
"""The trial's pace is its mean iteration time over about this fraction of its iterations, the latest:
about the interval of the progress lines the worker prints every ~10 % (runtime/worker.py; more often in long
trials)."""
UNKNOWN = "ETA unknown until the first iterations"

_ARCHITECTURE = SweepMatrix.wire_name("architecture")
_SERVERS = SweepMatrix.wire_name("parameter_servers")


@dataclasses.dataclass(frozen=True)
class Finished:
    """A trial that ended with a summary: the trials after it are estimated from it."""

    parameters: Mapping[str, str]
    """parameters are its swept values (api.trial.Trial.parameters)."""
    iterations: int
    """iterations it ran (fewer than planned when model.target stopped it)."""
    iteration_seconds: float | None
    """iteration_seconds it measured (the median)."""
    seconds: float | None
    """seconds from its start to its end."""
    predicted: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """predicted iteration seconds by architecture label (variants.label), from its calibrated models."""

    @property
    def startup_seconds(self) -> float | None:
        """The time it spent beyond its iterations."""
        if self.seconds is None or not self.iteration_seconds:
            return None
        return max(0.0, self.seconds - self.iterations * self.iteration_seconds)


@dataclasses.dataclass(frozen=True)
class UnfinishedTrial:
    """A trial not finished yet: pending, starting or running."""

    name: str
    parameters: Mapping[str, str]
    label: str
    """label of its architecture (variants.label)."""
    iterations: int
    started: float | None = None
    """started is when its current attempt started; None while it waits to start."""
    samples: Sequence[Sample] = ()
    """samples of its progress, oldest first."""
    iteration_seconds: float | None = None
    """iteration_seconds of its last progress line's own iteration: its pace while one sample is all there is."""

    @property
    def begun(self) -> bool:
        return self.started is not None or bool(self.samples)


def planned(trial: trial_.Trial) -> UnfinishedTrial:
    """The trial before it starts; its progress is added with dataclasses.replace."""
    spec = trial.spec
    label = variants.label(spec.architecture, spec.parameter_servers.replicas)
    return UnfinishedTrial(trial.name, dict(trial.parameters), label, spec.model.iterations)


def upper_bound(spec: ExperimentSpec) -> bool:
    """Whether trials of `spec` may end before their iterations: model.target with onReached Stop."""
    target = spec.model.target
    return target is not None and target.on_reached == OnReached.STOP


def iterations_run(iterations: int, stops_at_target: bool, target_iterations: int | None) -> int:
    """The iterations a finished trial ran: fewer than the `iterations` planned when the target stopped it."""
    return target_iterations if stops_at_target and target_iterations else iterations


def predictions(document: Any) -> dict[str, float]:
    """The iteration seconds a trial summary's prediction (`document`) gives each architecture label; {} without one
    (or with one of another shape: a termination message is read as found)."""
    found = document.get(keys.ARCHITECTURES) if isinstance(document, Mapping) else None
    if not isinstance(found, Mapping):
        return {}
    seconds = {str(label): entry.get(keys.ITERATION_SECONDS) for label, entry in found.items()
               if isinstance(entry, Mapping)}
    return {label: float(value) for label, value in seconds.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf}


def _window(iterations: int) -> int:
    return max(1, round(WINDOW_FRACTION * iterations))


def recent(samples: Sequence[Sample], iterations: int) -> Sequence[Sample]:
    """The samples the pace is measured over: the last one and those back to WINDOW_FRACTION of `iterations`
    before it (or the oldest); a caller may keep only these."""
    if len(samples) < 2:
        return samples
    last = samples[-1][1]
    start = next((i for i in range(len(samples) - 2, -1, -1) if last - samples[i][1] >= _window(iterations)), 0)
    return samples[start:]


def seconds_per_iteration(samples: Sequence[Sample], iterations: int) -> float | None:
    """The mean iteration time over the recent samples; None with fewer than two iterations apart."""
    kept = recent(samples, iterations)
    if len(kept) < 2 or kept[-1][1] <= kept[0][1]:
        return None
    return (kept[-1][0] - kept[0][0]) / (kept[-1][1] - kept[0][1])


def _without(parameters: Mapping[str, str], *names: str) -> dict[str, str]:
    return {k: v for k, v in parameters.items() if k not in names}


def predicted_seconds(trial: UnfinishedTrial, finished: Sequence[Finished]) -> float | None:
    """The trial's iteration time before it runs: measured by its repetitions, else predicted by a trial that
    differs in architecture alone; None when neither finished."""
    same = [f.iteration_seconds for f in finished if f.iteration_seconds
            and _without(f.parameters, trial_.REPETITION) == _without(trial.parameters, trial_.REPETITION)]
    if same:
        return statistics.fmean(same)
    others = (trial_.REPETITION, _ARCHITECTURE, _SERVERS)
    return next((f.predicted[trial.label] for f in reversed(finished) if trial.label in f.predicted
                 and _without(f.parameters, *others) == _without(trial.parameters, *others)), None)


def startup_seconds(finished: Sequence[Finished]) -> float | None:
    """The mean time finished trials spent beyond their iterations; None when none says."""
    known = [f.startup_seconds for f in finished if f.startup_seconds is not None]
    return statistics.fmean(known) if known else None


def _duration(trial: UnfinishedTrial, finished: Sequence[Finished]) -> float | None:
    """Seconds a trial not running yet takes from its start: start-up, then its iterations as predicted."""
    each, startup = predicted_seconds(trial, finished), startup_seconds(finished)
    return None if each is None or startup is None else startup + trial.iterations * each


def trial_end(trial: UnfinishedTrial, finished: Sequence[Finished]) -> float | None:
    """When a started trial's last iteration is expected to end; None when nothing tells."""
    if trial.samples:
        at, done = trial.samples[-1]
        each = (seconds_per_iteration(trial.samples, trial.iterations) or trial.iteration_seconds
                or predicted_seconds(trial, finished))
        return None if each is None else at + max(0, trial.iterations - done) * each
    duration = _duration(trial, finished)
    return None if trial.started is None or duration is None else trial.started + duration


def sweep_end(trials: Sequence[UnfinishedTrial], finished: Sequence[Finished]) -> tuple[float | None, str | None]:
    """(when the last of `trials` is expected to end, None) or (None, why not). The started trials hold one
    place each (as many as run at once); the others, in order, take the place that frees first."""
    begun = [t for t in trials if t.begun]
    if not begun:
        return None, "ETA unknown until a trial starts"
    places = []
    for trial in begun:
        end = trial_end(trial, finished)
        if end is None:
            return None, UNKNOWN
        places.append(end)
    heapq.heapify(places)
    for trial in (t for t in trials if not t.begun):
        duration = _duration(trial, finished)
        if duration is None:
            return None, f"ETA unknown until trial {trial.name} runs"  # nothing finished measured or predicted it
        heapq.heappush(places, heapq.heappop(places) + duration)
    return max(places), None


def duration_text(seconds: float) -> str:
    """45s, 1m20s, 2h05m."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def describe(seconds_left: float, upper_bound: bool) -> str:
    """"ETA 1m20s", or "ETA at most 1m20s" when a target may stop trials sooner."""
    return f"ETA {'at most ' if upper_bound else ''}{duration_text(seconds_left)}"
