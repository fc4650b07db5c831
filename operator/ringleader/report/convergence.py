"""Paradigm figures: loss against wall-clock time, time to a target loss, staleness, DSSP's thresholds; used by
report.py and findings.py.

The target loss defaults to the worst final loss of the sweep (the highest last point of any trial's
smoothed loss curve): every trial that ran to its end reaches it, so the comparison is how soon.
"""

from __future__ import annotations

import dataclasses
import pathlib

import matplotlib.pyplot as pyplot

from ringleader.models import combinations, curves, results, statistics
from ringleader.report import figures, tables
from ringleader.contract import keys

PARADIGM = "paradigm"


@dataclasses.dataclass(frozen=True)
class LossTarget:
    """The loss every trial is timed to, and which trial set it."""

    loss: float
    trial: str
    seconds: dict[str, float | None]
    """seconds maps each trial with a loss curve to its time to the target; None if it never got there."""


def target(result: results.SweepResult) -> LossTarget | None:
    """The worst final smoothed loss of the finished trials, and every trial's time to it; None without losses."""
    loss_curves = {t.trial.name: curves.loss_curve(t) for t in result.trials}
    finals = [(curve[-1][1], name) for name, curve in loss_curves.items() if curve
              and next(t for t in result.trials if t.trial.name == name).status == combinations.FINISHED]
    if not finals:
        return None
    loss, worst = max(finals)
    return LossTarget(loss, worst, {name: curves.time_to(curve, loss) for name, curve in loss_curves.items() if curve})


def _paradigm_colours(result: results.SweepResult) -> dict[str, str]:
    paradigms = dict.fromkeys(t.spec.sync.paradigm.value for t in result.trials)
    return {paradigm: figures.colour(index) for index, paradigm in enumerate(paradigms)}


def loss(result: results.SweepResult, directory: pathlib.Path) -> figures.Figure | None:
    """Smoothed loss against seconds since each trial's start, coloured by paradigm; the target dashed."""
    if PARADIGM not in result.axes:
        return None
    goal = target(result)
    if goal is None:
        return None
    colours = _paradigm_colours(result)
    figure, axes = pyplot.subplots(figsize=(7.5, 4.6))
    labelled = set()
    for trial in result.trials:
        curve = curves.loss_curve(trial)
        if not curve:
            continue
        paradigm = trial.spec.sync.paradigm.value
        axes.plot([s for s, _ in curve], [v for _, v in curve], color=colours[paradigm], linewidth=1.2,
                  label=None if paradigm in labelled else paradigm)
        labelled.add(paradigm)
    axes.axhline(goal.loss, color="k", linestyle="--", linewidth=1,
                 label=f"target {goal.loss:.3g} (final loss of {goal.trial})")
    axes.set_xlabel("seconds since the trial's first iteration")
    axes.set_ylabel(f"loss (mean of the last {curves.SMOOTHING} worker losses)")
    axes.set_title("Loss against wall-clock time, per paradigm", fontsize=10)
    axes.legend(fontsize=7)
    path = figures.save(figure, directory, "loss")
    return figures.Figure("loss", "Loss against wall-clock time",
                          "line chart: smoothed training loss against seconds since each trial's start, one line per "
                          "trial, coloured by paradigm",
                          f"Each line is one trial's training loss, the mean of its workers' last {curves.SMOOTHING} "
                          "minibatch losses, against wall-clock seconds. Stale paradigms run more iterations per "
                          "second but each may help less; what counts is how soon a line gets low. Dashed: the "
                          f"target loss {goal.loss:.4g}, the worst final loss of the sweep (trial {goal.trial}).", path)


def file_target(result: results.SweepResult):
    """The sweep's own `model.target` (api.spec.Target), None when its trials set none; findings use it too."""
    return next((t.spec.model.target for t in result.trials if t.spec.model.target), None)


def _trial_colours(result: results.SweepResult) -> dict[str, str]:
    """By paradigm in a paradigm sweep, else one colour per combination (its repetitions alike)."""
    if PARADIGM in result.axes:
        by_paradigm = _paradigm_colours(result)
        return {t.trial.name: by_paradigm[t.spec.sync.paradigm.value] for t in result.trials}
    return {t.trial.name: figures.colour(index) for index, group in enumerate(combinations.group(result))
            for t in group.trials}


def held_out(result: results.SweepResult, directory: pathlib.Path) -> figures.Figure | None:
    """Held-out accuracy (or loss, for a loss target) against seconds, one line per trial; the file's target dashed."""
    goal = file_target(result)
    if goal is None:
        return None
    key, scale, unit = ((keys.EVAL_ACCURACY, 100.0, "held-out accuracy (%)") if goal.accuracy_percent is not None
                        else (keys.EVAL_LOSS, 1.0, "held-out loss"))
    lines = [(t, curves.evaluation_curve(t, key)) for t in result.trials]
    lines = [(t, curve) for t, curve in lines if curve]
    if not lines:
        return None
    colours = _trial_colours(result)
    figure, axes = pyplot.subplots(figsize=(7.5, 4.6))
    for trial, curve in lines:
        axes.plot([s for s, _ in curve], [scale * v for _, v in curve], marker=".", color=colours[trial.trial.name],
                  linewidth=1.2, label=figures.trial_label(trial).replace("\n", " "))
    level = goal.accuracy_percent if goal.accuracy_percent is not None else goal.loss
    words = tables.goal_words(goal)
    axes.axhline(level, color="k", linestyle="--", linewidth=1, label=f"target: {words}")
    axes.set_xlabel("seconds since the trial's first iteration")
    axes.set_ylabel(unit)
    axes.set_title(f"{unit[0].upper() + unit[1:]} against wall-clock time", fontsize=10)
    axes.legend(fontsize=7)
    path = figures.save(figure, directory, "held-out")
    return figures.Figure("held-out", "Held-out quality against wall-clock time",
                          f"line chart: {unit} at each evaluation against seconds since each trial's start, one line "
                          "per trial, the target dashed",
                          f"Each point is one evaluation of the global parameters on the held-out split "
                          f"(model.evaluation), against wall-clock seconds since the trial's first iteration. "
                          f"Dashed: the experiment's own target, {words}; what counts is how soon a line crosses it.",
                          path)


def time_to_target(result: results.SweepResult, directory: pathlib.Path) -> figures.Figure | None:
    """Bars of each combination's seconds to the file's own target (mean and 95 % interval over repetitions)."""
    goal = file_target(result)
    if goal is None:
        return None
    words = tables.goal_words(goal)
    groups = [(c, e) for c in combinations.group(result) if (e := c.estimate(keys.TARGET_SECONDS)) is not None]
    never = [c.label for c in combinations.group(result) if not c.values(keys.TARGET_SECONDS)]
    if not groups:
        return None
    colours = _trial_colours(result)
    figure = _seconds_bars(groups, [colours[c.trials[0].trial.name] for c, _ in groups], f"seconds to {words}",
                           f"Time to {words}" + (f" (never: {', '.join(never)})" if never else ""))
    path = figures.save(figure, directory, "time-to-target")
    return figures.Figure("time-to-target", "Time to the experiment's target",
                          f"bar chart: seconds until {words} was first reached, per combination",
                          f"Seconds from a trial's first iteration until an evaluation first reached {words} "
                          "(model.target; the summary's targetSeconds); combinations that never reached it have no "
                          "bar. Error bars: 95 % confidence interval over repetitions, where repeated.", path)


def _seconds_bars(groups: list[tuple[combinations.Combination, statistics.MeanInterval]], colours: list[str],
                  ylabel: str, title: str):
    """A bar per combination of its mean seconds to a goal, the 95 % interval over repetitions as error bars."""
    figure, axes = pyplot.subplots(figsize=(max(6.0, 1.2 * len(groups) + 3.0), 4.4))
    positions = list(range(len(groups)))
    below = [e.mean - e.low if e.low is not None else 0.0 for _, e in groups]
    above = [e.high - e.mean if e.high is not None else 0.0 for _, e in groups]
    axes.bar(positions, [e.mean for _, e in groups], yerr=[below, above], capsize=4, color=colours)
    for position, (_, estimate) in zip(positions, groups):
        axes.text(position, estimate.mean, f"{estimate.mean:.1f} s", ha="center", va="bottom", fontsize=8)
    axes.set_xticks(positions)
    axes.set_xticklabels([c.label.replace(", ", "\n") for c, _ in groups], fontsize=7)
    axes.set_ylabel(f"{ylabel}, mean over repetitions")
    axes.set_title(title, fontsize=10)
    return figure


def time_to_loss(result: results.SweepResult, directory: pathlib.Path) -> figures.Figure | None:
    """Bars of each combination's seconds to the target loss (mean and 95 % interval over repetitions); not drawn
    when the experiment names its own target (time_to_target draws that)."""
    if PARADIGM not in result.axes or file_target(result) is not None:
        return None
    goal = target(result)
    if goal is None:
        return None
    groups = []
    for combination in combinations.group(result):
        estimate = combination.estimate(lambda t: goal.seconds.get(t.trial.name))
        if estimate is not None:
            groups.append((combination, estimate))
    if not groups:
        return None
    colours = _paradigm_colours(result)
    figure = _seconds_bars(groups, [colours[c.trials[0].trial.spec.sync.paradigm.value] for c, _ in groups],
                           "seconds to the target loss",
                           f"Time to loss {goal.loss:.3g} (the final loss of {goal.trial})")
    path = figures.save(figure, directory, "time-to-loss")
    return figures.Figure("time-to-loss", "Time to the target loss",
                          f"bar chart: seconds until the smoothed loss first reached {goal.loss:.4g}, per combination",
                          "Seconds from a trial's first iteration until its smoothed loss first reached the target "
                          "(the worst final loss of the sweep); combinations that never reached it have no bar. "
                          "Error bars: 95 % confidence interval over repetitions, where repeated.", path)


def staleness(result: results.SweepResult, directory: pathlib.Path) -> figures.Figure | None:
    """Histograms of the staleness of worker iterations, one per paradigm that recorded any."""
    if PARADIGM not in result.axes:
        return None
    pooled: dict[str, list[float]] = {}
    for trial in result.trials:
        values = curves.staleness(trial)
        if values:
            pooled.setdefault(trial.spec.sync.paradigm.value, []).extend(values)
    if not pooled:
        return None
    colours = _paradigm_colours(result)
    figure, panels = pyplot.subplots(1, len(pooled), figsize=(3.4 * len(pooled) + 1.0, 3.8), squeeze=False)
    for panel, (paradigm, values) in zip(panels[0], pooled.items()):
        top = int(max(values))
        panel.hist(values, bins=[b - 0.5 for b in range(top + 2)], color=colours[paradigm])
        panel.set_title(f"{paradigm}: mean {sum(values) / len(values):.2f}, max {top}", fontsize=9)
        panel.set_xlabel("staleness (iterations)")
    panels[0][0].set_ylabel("worker iterations")
    path = figures.save(figure, directory, "staleness")
    return figures.Figure("staleness", "Staleness",
                          "histograms of staleness in iterations, one per paradigm",
                          "How many iterations old the weights were that each worker iteration computed its gradient "
                          "on (after warm-up, all workers of all trials of the paradigm pooled). BSP keeps it at 0; "
                          "SSP bounds it by its staleness; ASP does not bound it.", path)


def thresholds(result: results.SweepResult, directory: pathlib.Path) -> figures.Figure | None:
    """DSSP's granted thresholds over time, per trial and server rank; only when a trial recorded them."""
    series = {trial.trial.name: curves.thresholds(trial) for trial in result.trials}
    series = {name: ranks for name, ranks in series.items() if ranks}
    if not series:
        return None
    figure, axes = pyplot.subplots(figsize=(7.5, 4.2))
    for index, (name, ranks) in enumerate(series.items()):
        for rank, points in ranks.items():
            axes.step([s for s, _ in points], [v for _, v in points], where="post", color=figures.colour(index),
                      label=f"{name}, rank {rank}")
    axes.set_xlabel("seconds since the trial's first iteration")
    axes.set_ylabel("threshold granted (iterations)")
    axes.set_title("DSSP: staleness threshold granted by the server over time", fontsize=10)
    axes.legend(fontsize=7)
    path = figures.save(figure, directory, "thresholds")
    return figures.Figure("thresholds", "DSSP thresholds",
                          "step chart: the staleness threshold DSSP's server granted over time",
                          "Each step is the threshold a DSSP server granted at an aggregation: staleness plus the "
                          "extra iterations it let a fast worker run ahead, at most maxStaleness.", path)
