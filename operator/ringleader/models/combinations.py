"""A sweep's trials grouped by combination (the swept values but the repetition), with means and 95 % intervals.

Used by the report's figures, findings and tables: repetitions of one combination are samples of the
same measurement, so their numbers become an estimate (statistics.MeanInterval) instead of separate rows.
Only FINISHED trials count: a failed or killed trial's summary, if any, covers part of a run.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from ringleader.models import results, statistics
from ringleader.api.trial import REPETITION

FINISHED = "FINISHED"
BARE_AXES = ("architecture", "paradigm")
"""Axes whose values name themselves in a label ("RingAllReduce"); others read "workers=4"."""


def number(result: results.TrialResult, key: str) -> float | None:
    """A finished trial's summary value `key` as a float; None when it has none or did not finish."""
    if result.status != FINISHED or not result.summary:
        return None
    return result.summary.number(key)


def label(parameters: dict[str, str]) -> str:
    """"RingAllReduce, workers=4": the values that tell a combination apart; "all trials" when none does."""
    parts = [value if axis in BARE_AXES else f"{axis}={value}" for axis, value in parameters.items()]
    return ", ".join(parts) or "all trials"


@dataclasses.dataclass(frozen=True)
class Combination:
    """The repetitions of one combination of swept values."""

    parameters: dict[str, str]
    """parameters are the values of the varied axes (repetition excluded), in the sweep's axis order."""
    trials: list[results.TrialResult]

    @property
    def label(self) -> str:
        return label(self.parameters)

    def values(self, key: str | Callable[[results.TrialResult], float | None]) -> list[float]:
        """The summary value `key` (or what the function returns) of every finished trial that has it."""
        pick = key if callable(key) else (lambda result: number(result, key))
        return [value for value in map(pick, self.trials) if value is not None]

    def estimate(self, key: str | Callable[[results.TrialResult], float | None]) -> statistics.MeanInterval | None:
        values = self.values(key)
        return statistics.estimate(values) if values else None


def varied_axes(result: results.SweepResult) -> list[str]:
    """The axes that tell combinations apart: every varied axis but the repetition."""
    return [axis for axis in result.axes if axis != REPETITION]


def group(result: results.SweepResult, axes: Sequence[str] | None = None) -> list[Combination]:
    """Combinations in first-seen order; `axes` (default: every varied axis) are the values that separate them."""
    axes = varied_axes(result) if axes is None else list(axes)
    groups: dict[tuple[str, ...], list[results.TrialResult]] = {}
    for trial in result.trials:
        key = tuple(trial.trial.parameters.get(axis, "") for axis in axes)
        groups.setdefault(key, []).append(trial)
    return [Combination(dict(zip(axes, key)), trials) for key, trials in groups.items()]


def wire(estimate: statistics.MeanInterval | None) -> dict[str, Any] | None:
    return None if estimate is None else estimate.wire()
