"""The report's figures that every sweep can have: where iteration time goes per trial, per rank, and repetitions.

Each figure function returns a Figure (a PNG written into the report's directory) or None when its data
does not exist: a figure is never drawn from numbers that were not measured. scaling.py and
convergence.py hold the figures of sweeps over workers, bandwidth and paradigms. matplotlib's Agg
backend: no display is needed, in a pod or over ssh.
"""

from __future__ import annotations

import dataclasses
import pathlib
import statistics
import textwrap
from typing import Any, Iterable, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # before pyplot: files only, never a window
import matplotlib.pyplot as pyplot  # noqa: E402

from ringleader.models import combinations  # noqa: E402
from ringleader.models import results  # noqa: E402
from ringleader.api import constants  # noqa: E402
from ringleader.contract import keys  # noqa: E402

DPI = 110
SHARES = (  # where a worker iteration's time goes, bottom to top
    (keys.COMPUTE_SECONDS, "compute", "#2171b5"),
    (keys.COMM_SECONDS, "communication", "#fd8d3c"),
    (keys.WAIT_SECONDS, "waiting", "#bdbdbd"),
    (keys.CODEC_SECONDS, "encoding & decoding", "#9e9ac8"),
    (keys.OTHER_SECONDS, "evaluation & other", "#a1d99b"),
)
# Phases of a rank's breakdown plot, bottom to top.
BREAKDOWN_PHASES = (
    (keys.TIME_DATA, "data", "#9ecae1"),
    (keys.TIME_FORWARD, "forward", "#4292c6"),
    (keys.TIME_BACKWARD, "backward", "#08519c"),
    (keys.TIME_UPDATE, "update", "#6baed6"),
    (keys.TIME_COMM, "communication", "#fd8d3c"),
    (keys.TIME_WAIT, "waiting", "#bdbdbd"),
    (keys.TIME_CODEC, "encoding & decoding", "#9e9ac8"),
    (keys.TIME_EVAL, "evaluation", "#a1d99b"),
    (keys.TIME_OTHER, "other", "#f0f0f0"),
)
PALETTE = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666")


@dataclasses.dataclass(frozen=True)
class Figure:
    """One PNG of the report: its id (the file's stem and the HTML anchor), title, alt text and caption."""

    id: str
    title: str
    alt: str
    """alt says in words what the figure shows: the HTML's alt text, read by screen readers and tests."""
    caption: str
    """caption says how to read the figure and what it assumes."""
    path: pathlib.Path


def colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def suptitle(figure: Any, text: str, fontsize: float = 10) -> None:
    """A figure's title wrapped to its width (a long one is not clipped on both sides); call tight_layout after."""
    width_chars = max(20, int(figure.get_figwidth() * 72 / (0.6 * fontsize)))  # an average glyph: 0.6 em
    figure.suptitle("\n".join(textwrap.fill(line, width_chars) for line in text.splitlines()), fontsize=fontsize)


def save(figure: Any, directory: pathlib.Path, figure_id: str) -> pathlib.Path:
    """Write a matplotlib figure as <directory>/<figure_id>.png and close it."""
    path = directory / f"{figure_id}.png"
    try:
        figure.tight_layout()
        figure.savefig(path, dpi=DPI)
    finally:
        pyplot.close(figure)
    return path


def trial_label(result: results.TrialResult) -> str:
    spec = result.spec
    return f"{result.trial.name}\n{spec.architecture.value}\n{spec.sync.paradigm.value}, {spec.workers.replicas}w"


def mean_iteration_seconds(trial: results.TrialResult) -> float | None:
    """A finished trial's mean worker iteration after warm-up: its ranks' means weighted by their iterations."""
    if combinations.number(trial, keys.THROUGHPUT) is None:
        return None
    ranks = [r for r in ((trial.summary.per_rank if trial.summary else None) or {}).values()
             if isinstance(r, dict) and r.get(keys.ITERATIONS) and r.get(keys.ITERATION_SECONDS) is not None]
    counted = sum(r[keys.ITERATIONS] for r in ranks)
    return sum(r[keys.ITERATIONS] * r[keys.ITERATION_SECONDS] for r in ranks) / counted if counted else None


def time_breakdown(result: results.SweepResult, directory: pathlib.Path) -> Figure | None:
    """Stacked bars per trial of the mean milliseconds a worker iteration spends computing, communicating and
    waiting, all trials on one axis; the mean iteration time (like with like) and throughput above each bar."""
    if not any(combinations.number(trial, keys.COMPUTE_SECONDS) is not None for trial in result.trials):
        return None
    trials = result.trials
    figure, axes = pyplot.subplots(figsize=(max(5.5, 1.1 * len(trials) + 2.5), 4.8))
    positions = range(len(trials))
    bottoms = [0.0] * len(trials)
    for key, name, shade in SHARES:
        heights = [1000 * (combinations.number(trial, key) or 0.0) for trial in trials]
        if not any(height > 0 for height in heights):
            continue  # a share no trial spent time in (no codec without compression): no empty legend entry
        axes.bar(positions, heights, bottom=bottoms, label=name, color=shade)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    top = max(bottoms) or 1.0
    for position, trial in zip(positions, trials):
        mean, throughput = mean_iteration_seconds(trial), combinations.number(trial, keys.THROUGHPUT)
        text = trial.status if mean is None else f"mean {1000 * mean:.1f} ms"
        if mean is not None and throughput is not None:
            text += f"\n{throughput:.0f} samples/s"
        axes.text(position, bottoms[position] + 0.02 * top, text, ha="center", va="bottom", fontsize=7)
    axes.set_xticks(list(positions))
    axes.set_xticklabels([trial_label(trial) for trial in trials], fontsize=7)
    axes.set_ylim(0, top * 1.3)
    axes.set_ylabel("mean time per worker iteration (ms)")
    axes.set_title("Where iteration time goes, per trial: means after warm-up", fontsize=10)
    axes.legend(loc="upper right", fontsize=8, ncols=3)
    path = save(figure, directory, "time")
    return Figure("time", "Where iteration time goes (means)",
                  "stacked bars per trial: compute, communication, waiting and evaluation-and-other milliseconds per "
                  "worker iteration",
                  "Mean milliseconds of a worker iteration after warm-up spent computing (data, forward, backward, "
                  "update), communicating, waiting for other workers or the server, and evaluating or in the loop's "
                  "own work (recording, printing); all trials share the axis. Means, because they add up: the "
                  "phases' means stack to the mean iteration (medians would not). Above each bar: the mean iteration "
                  "time, the same statistic as the bars, and the throughput of all workers together.", path)


def repetitions(result: results.SweepResult, directory: pathlib.Path) -> Figure | None:
    """Mean over repetitions and its 95 % interval of throughput and median (p50) iteration time per combination."""
    if combinations.REPETITION not in result.axes:
        return None
    groups = [c for c in combinations.group(result) if c.values(keys.THROUGHPUT)]
    if not groups:
        return None
    figure, panels = pyplot.subplots(1, 2, figsize=(max(8.0, 1.4 * len(groups) + 4.0), 4.4))
    positions = list(range(len(groups)))
    for panel, key, scale, unit in ((panels[0], keys.THROUGHPUT, 1.0, "throughput (samples/s)"),
                                    (panels[1], keys.P50, 1000.0, "median iteration time, p50 (ms)")):
        estimates = [group.estimate(key) for group in groups]
        means = [scale * e.mean if e else 0.0 for e in estimates]
        below = [scale * (e.mean - e.low) if e and e.low is not None else 0.0 for e in estimates]
        above = [scale * (e.high - e.mean) if e and e.high is not None else 0.0 for e in estimates]
        panel.bar(positions, means, yerr=[below, above], capsize=4, color=[colour(i) for i in positions])
        for position, group in zip(positions, groups):  # each repetition as a dot over its bar
            values = group.values(key)
            panel.plot([position] * len(values), [scale * v for v in values], "k.", markersize=4)
        panel.set_xticks(positions)
        panel.set_xticklabels([group.label.replace(", ", "\n") for group in groups], fontsize=7)
        panel.set_ylabel(unit)
    count = max(len(group.trials) for group in groups)
    suptitle(figure, f"Mean over {count} repetitions and its 95 % confidence interval (Student t) of each trial's "
                     "throughput and median iteration time")
    path = save(figure, directory, "repetitions")
    return Figure("repetitions", "Repetitions",
                  "bars with error bars: mean and 95 % confidence interval of throughput and median (p50) iteration "
                  "time per combination",
                  "Bars are the mean over the repetitions of each combination of each trial's throughput and of its "
                  "median iteration time (p50), error bars the mean's 95 % confidence "
                  "interval (Student t, n - 1 degrees of freedom), dots the repetitions themselves. Overlapping "
                  "intervals mean the sweep cannot tell those combinations apart: run more repetitions.", path)


# -- per rank (a trial's breakdown.png in MLflow) ---------------------------------------------

@dataclasses.dataclass(frozen=True)
class RankBreakdown:
    """Mean seconds per phase of one rank's iterations after warm-up."""

    rank: int
    role: str
    iterations: int
    phases: Mapping[str, float]
    """phases maps TIME_* keys to mean seconds; TIME_ITERATION is the mean iteration."""

    @property
    def unaccounted(self) -> float:
        """Iteration time in no phase (loop overhead, logging), never negative."""
        timed = sum(self.phases.get(key, 0.0) for key, _, _ in BREAKDOWN_PHASES)
        return max(0.0, self.phases.get(keys.TIME_ITERATION, 0.0) - timed)


def rank_breakdown(rank: int, records: Iterable[Mapping[str, Any]]) -> RankBreakdown | None:
    """Means over a worker rank's records that are not warm-up; None for a rank without worker records."""
    steady = [r for r in records if keys.TIME_ITERATION in r and not r.get(keys.WARMUP)]
    if not steady:
        return None
    names = [key for key, _, _ in BREAKDOWN_PHASES] + [keys.TIME_ITERATION]
    phases = {key: statistics.fmean(float(r.get(key) or 0.0) for r in steady) for key in names}
    role = str(steady[0].get(keys.ROLE, constants.ROLE_WORKER))
    return RankBreakdown(rank=rank, role=role, iterations=len(steady), phases=phases)


def plot_rank_breakdown(breakdowns: Sequence[RankBreakdown], path: pathlib.Path, title: str = "") -> pathlib.Path:
    """Stacked bars per rank of mean milliseconds in data, forward, backward, update, communication,
    waiting and the unaccounted rest: a straggler or a rank that waits stands out."""
    figure, axes = pyplot.subplots(figsize=(max(6.0, 0.8 * len(breakdowns) + 4.0), 4.5))
    try:
        positions = range(len(breakdowns))
        bottoms = [0.0] * len(breakdowns)
        for key, label, shade in BREAKDOWN_PHASES:
            heights = [b.phases.get(key, 0.0) * 1000 for b in breakdowns]
            if key == keys.TIME_OTHER:  # the loop's own work and what no phase timed: one band, one legend entry
                heights = [h + b.unaccounted * 1000 for h, b in zip(heights, breakdowns)]
            if not any(value > 0 for value in heights):
                continue  # a phase no rank spent time in: no empty band in the legend
            axes.bar(positions, heights, bottom=bottoms, label=label, color=shade,
                     edgecolor="#d9d9d9" if key == keys.TIME_OTHER else None)
            bottoms = [b + h for b, h in zip(bottoms, heights)]
        axes.set_xticks(list(positions))
        axes.set_xticklabels([f"rank {b.rank}\n{b.role}" for b in breakdowns], fontsize=8)
        axes.set_ylabel("mean time per iteration (ms)")
        axes.set_title(title or "Where iteration time goes, per rank (after warm-up)", fontsize=9)
        axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
        figure.tight_layout()
        figure.savefig(path, dpi=DPI)
    finally:
        pyplot.close(figure)
    return path
