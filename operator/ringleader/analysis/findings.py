"""The report's findings: a few sentences of numbers that answer which setup was fastest, by how much, and why.

Used by report.py (the top of report.html and of the sweep run's MLflow description). Every sentence
states measured numbers, with a 95 % confidence interval where the sweep has repetitions.
"""

from __future__ import annotations

from ringleader.analysis import combinations, convergence, scaling, statistics
from ringleader.analysis import results as results_
from ringleader.contract import keys

MAX_COMPARISONS = 12
"""MAX_COMPARISONS bounds the "A: 1.6x the throughput of B" sentences: a big sweep's full list is in the table."""


def interval(estimate: statistics.Estimate, digits: int = 2) -> str:
    """" (95 % CI 1.41-1.86)", or "" without an interval."""
    if estimate.low is None or estimate.high is None:
        return ""
    return f" (95 % CI {estimate.low:.{digits}f}-{estimate.high:.{digits}f})"


def _name(combination: combinations.Combination) -> str:
    """The combination's label, or its one trial's name when the sweep varies nothing."""
    if len(combination.trials) == 1:
        trial = combination.trials[0].trial
        return f"{trial.name} ({combination.label})" if combination.parameters else trial.name
    return combination.label


def fastest(groups: list[combinations.Combination]) -> list[str]:
    measured = [(group.estimate(keys.THROUGHPUT), group) for group in groups if group.values(keys.THROUGHPUT)]
    if not measured:
        return []
    throughput, best = max(measured, key=lambda item: item[0].mean)
    p50 = best.estimate(keys.P50)
    spread = ""
    if throughput.low is not None:
        spread = f" (95 % CI {throughput.low:.1f}-{throughput.high:.1f}, {throughput.count} repetitions)"
    text = f"Fastest: {_name(best)}: {throughput.mean:.1f} samples/s{spread}"
    if p50 is not None:
        text += f", iteration p50 {1000 * p50.mean:.1f} ms"
    return [text + "."]


def comparisons(result: results_.SweepResult) -> list[str]:
    """Per varied axis and setting of the other axes: the best value's throughput over each other value's."""
    axes = combinations.varied_axes(result)
    sentences = []
    for axis in axes:
        others = [other for other in axes if other != axis]
        for context in combinations.group(result, others):
            values = [(c, c.values(keys.THROUGHPUT))
                      for c in combinations.group(results_.SweepResult(result.experiment, context.trials), [axis])]
            values = [(c, v) for c, v in values if v]
            if len(values) < 2:
                continue
            best, best_values = max(values, key=lambda item: sum(item[1]) / len(item[1]))
            where = f" at {context.label}" if context.parameters else ""
            for other, other_values in values:
                if other is best:
                    continue
                ratio = statistics.ratio(best_values, other_values)
                sentences.append(f"{best.label}: {ratio.mean:.2f}x the throughput of {other.label}{where}"
                                 f"{interval(ratio)}.")
    if len(sentences) > MAX_COMPARISONS:
        rest = len(sentences) - MAX_COMPARISONS
        sentences = sentences[:MAX_COMPARISONS] + [f"({rest} more comparisons: see the table.)"]
    return sentences


def communication(groups: list[combinations.Combination]) -> list[str]:
    """The largest and smallest share of iteration time in communication, with waiting beside it."""
    shares = [(group.estimate(keys.COMM_FRACTION), group) for group in groups if group.values(keys.COMM_FRACTION)]
    if not shares:
        return []

    def said(item) -> str:
        share, group = item
        wait = group.estimate(keys.WAIT_FRACTION)
        waiting = f", waiting {100 * wait.mean:.0f} %" if wait is not None else ""
        return f"{100 * share.mean:.0f} % of iteration time for {_name(group)}{waiting}"

    high = max(shares, key=lambda item: item[0].mean)
    low = min(shares, key=lambda item: item[0].mean)
    if high is low:
        return [f"Communication is {said(high)}."]
    return [f"Communication is {said(high)}; {said(low)}."]


def time_to_loss(result: results_.SweepResult) -> list[str]:
    if convergence.PARADIGM not in result.axes:
        return []
    goal = convergence.target(result)
    if goal is None:
        return []
    parts = []
    for group in combinations.group(result):
        times = [goal.seconds.get(t.trial.name) for t in group.trials if t.trial.name in goal.seconds]
        if times:
            parts.append(_seconds_to_goal(group.label, times)[0])
    return [f"Time to loss {goal.loss:.4g} (the final loss of {goal.trial}): " + "; ".join(parts) + "."]


def _seconds_to_goal(name: str, times: list) -> tuple[str, float | None]:
    """A combination's seconds to a goal over its repetitions (None: never reached) in words, and their mean."""
    reached = [float(t) for t in times if t is not None]
    if not reached:
        return f"{name} never", None
    estimate = statistics.estimate(reached)
    missed = f" ({len(times) - len(reached)} of {len(times)} never)" if len(reached) < len(times) else ""
    return f"{name} {estimate.mean:.1f} s{interval(estimate, 1)}{missed}", estimate.mean


def _goal(result: results_.SweepResult) -> str | None:
    """What `model.target` the sweep's trials are timed to, in words; None when they set none."""
    target = next((t.trial.spec.model.target for t in result.trials if t.trial.spec.model.target), None)
    if target is None:
        return None
    if target.accuracy_percent is not None:
        return f"{target.accuracy_percent:g} % held-out accuracy"
    return f"held-out loss {target.loss:g}"


def time_to_target(result: results_.SweepResult) -> list[str]:
    """Seconds to `model.target` per combination (targetSeconds of the summaries), and which got there first:
    the answer a time-to-accuracy comparison (BSP against stale paradigms) is run for."""
    goal = _goal(result)
    if goal is None:
        return []
    parts, reached_by = [], []
    for group in combinations.group(result):
        name = group.label or _name(group)
        times = [(t.summary or {}).get(keys.TARGET_SECONDS) for t in group.trials if t.summary]
        if not times:
            continue
        part, mean = _seconds_to_goal(name, times)
        parts.append(part)
        if mean is not None:
            reached_by.append((mean, name))
    if not parts:
        return []
    first = f" First: {min(reached_by)[1]}." if len(reached_by) > 1 else ""
    return [f"Time to {goal}: " + "; ".join(parts) + "." + first]


def network(result: results_.SweepResult) -> list[str]:
    if scaling.BANDWIDTH not in result.axes:
        return []
    sentences = []
    for name, points in scaling.bandwidth_series(result).items():
        (slow, at_slow), (fast, at_fast) = points[0], points[-1]
        curve = scaling.whatif_curve(result, [slow, fast])
        model = ""
        if isinstance(curve, scaling.WhatIfCurve):
            model = f"; the what-if model says {curve.points[0][1]:.2f} and {curve.points[1][1]:.2f}"
        label = "" if name == "all trials" else f"{name}: "
        sentences.append(f"{label}scaling factor {at_slow.mean:.2f} at {slow / 1e9:g} Gbit/s and {at_fast.mean:.2f} "
                         f"at {fast / 1e9:g} Gbit/s (measured){model}.")
    return sentences


def failures(result: results_.SweepResult) -> list[str]:
    return [f"{t.trial.name} {t.status}" + (f": {t.message}" if t.message else "") + "."
            for t in result.trials if t.status != combinations.FINISHED]


def findings(result: results_.SweepResult) -> list[str]:
    """Every finding, most telling first; one sentence says so when no trial finished."""
    groups = combinations.group(result)
    found = fastest(groups)
    if not found:
        return [f"No finished trial has a summary (summary.json): nothing to compare ({len(result.trials)} trials)."] \
            + failures(result)
    return (found + comparisons(result) + communication(groups) + time_to_target(result) + time_to_loss(result)
            + network(result) + failures(result))
