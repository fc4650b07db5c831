"""The sweep's trials side by side: one panel per measure, every trial on the panel's one axis.

MLflow draws each logged value as a chart of its own, with its own scale, so the sweep run's metrics cannot be
compared by eye there; this figure, the report's first, is what the sweep run's description shows instead.
"""

from __future__ import annotations

import pathlib

from ringleader.models import combinations, results
from ringleader.report import figures
from ringleader.contract import keys

ID = "comparison"
SHARE_BANDS = ((keys.COMPUTE_FRACTION, "compute", "#2171b5"), (keys.COMM_FRACTION, "communication", "#fd8d3c"),
               (keys.WAIT_FRACTION, "waiting", "#bdbdbd"))


def label(trial: results.TrialResult) -> str:
    spec = trial.spec
    return f"{trial.trial.name}: {spec.architecture.value}, {spec.sync.paradigm.value}, {spec.workers.replicas}w"


def comparison(result: results.SweepResult, directory: pathlib.Path) -> figures.Figure | None:
    """Throughput, median iteration time (p95 marked) and the shares of iteration time, a bar per trial in sweep
    order on one axis per panel; None when no trial finished with a throughput."""
    trials = result.trials
    if len(trials) < 2 or not any(combinations.number(t, keys.THROUGHPUT) is not None for t in trials):
        return None
    figure, (speed, time, shares) = figures.pyplot.subplots(
        1, 3, sharey=True, figsize=(9.6, 1.4 + 0.5 * len(trials)), gridspec_kw={"width_ratios": (1, 1, 1.2)})
    rows = list(range(len(trials)))[::-1]  # the first trial on top
    colours = [figures.colour(i) for i in range(len(trials))]
    throughput = [combinations.number(t, keys.THROUGHPUT) or 0.0 for t in trials]
    speed.barh(rows, throughput, color=colours)
    for row, value, trial in zip(rows, throughput, trials):
        speed.text(value, row, f" {value:.0f}" if value else f" {trial.status}", va="center", fontsize=8)
    speed.set_xlim(0, 1.2 * max(throughput) or 1.0)
    speed.set_title("throughput (samples/s)", fontsize=9)
    p50 = [1000 * (combinations.number(t, keys.P50) or 0.0) for t in trials]
    p95 = [1000 * (combinations.number(t, keys.P95) or 0.0) for t in trials]
    time.barh(rows, p50, color=colours)
    time.plot(p95, rows, "k|", markersize=12, label="p95")
    for row, value, mark in zip(rows, p50, p95):
        if value:
            time.text(max(value, mark), row, f"  {value:.1f}", va="center", fontsize=8)
    time.set_xlim(0, 1.3 * max(p95 + p50) or 1.0)
    time.set_title("iteration time p50 (ms), | p95", fontsize=9)
    left = [0.0] * len(trials)
    for key, name, shade in SHARE_BANDS:
        widths = [100 * (combinations.number(t, key) or 0.0) for t in trials]
        shares.barh(rows, widths, left=left, color=shade, label=name)
        left = [a + b for a, b in zip(left, widths)]
    shares.set_xlim(0, 100)
    shares.set_title("share of iteration time (%)", fontsize=9, pad=18)
    shares.legend(loc="lower left", bbox_to_anchor=(0.0, 0.99), ncols=3, fontsize=7, frameon=False, handlelength=1,
                  columnspacing=0.8, borderaxespad=0)
    speed.set_yticks(rows)
    speed.set_yticklabels([label(t) for t in trials], fontsize=8)
    figure.suptitle("The trials side by side, one axis per measure", fontsize=10)
    path = figures.save(figure, directory, ID)
    return figures.Figure(
        ID, "The trials side by side",
        "horizontal bars per trial on shared axes: throughput, median iteration time with its 95th percentile, and "
        "the shares of iteration time computing, communicating and waiting",
        "One bar per trial, in sweep order, each panel one axis for every trial: throughput of all workers together "
        "(higher is faster), the median (p50) worker iteration after warm-up with its 95th percentile marked, and "
        "how each iteration's time splits between computing, communicating and waiting. A trial that did not finish "
        "shows its status and no bar.", path)
