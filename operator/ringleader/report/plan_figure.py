"""The plan's figure: each architecture's throughput and scaling efficiency against the worker count.

matplotlib's Agg backend (files only, no display); imported by commands/plan.py only when the plan is written.
"""

from __future__ import annotations

import pathlib
from typing import Sequence

import matplotlib

matplotlib.use("Agg")  # before pyplot: files only, never a window
import matplotlib.pyplot as pyplot  # noqa: E402

from ringleader.report import figures  # noqa: E402
from ringleader.planning import at_scale  # noqa: E402

FIGURE_ID = "plan"
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def plot(plans: Sequence[at_scale.Planned], directory: pathlib.Path, title: str) -> pathlib.Path:
    """<directory>/plan.png. Left: throughput (log-log, one worker's alone times N dotted); right: efficiency. A line
    each."""
    figure, (speed, efficiency) = pyplot.subplots(1, 2, figsize=(11.5, 4.0))
    workers = sorted({p.workers for p in plans})
    for index, label in enumerate(at_scale.labels(plans)):
        line = sorted((p for p in plans if p.label == label), key=lambda p: p.workers)
        style = dict(color=figures.colour(index), marker=MARKERS[index % len(MARKERS)], label=label,
                     linestyle=("-", "--", ":", "-.")[index % 4], markerfacecolor="none")
        speed.plot([p.workers for p in line], [p.throughput for p in line], **style)
        efficiency.plot([p.workers for p in line], [100 * p.efficiency for p in line], **style)
    if plans:
        alone = plans[0].throughput / plans[0].workers / plans[0].efficiency  # one worker, nothing to communicate
        speed.plot(workers, [alone * n for n in workers], color="#969696", linestyle=":", label="linear")
    unit = "samples/s" if plans and plans[0].batch_size else "worker iterations/s"
    for panel, ylabel in ((speed, f"throughput ({unit})"), (efficiency, "scaling efficiency (%)")):
        panel.set_xscale("log", base=2)
        panel.set_xticks(workers, [str(n) for n in workers])
        panel.set_xlabel("workers")
        panel.set_ylabel(ylabel)
        panel.grid(True, alpha=0.3)
    speed.set_yscale("log")
    efficiency.set_ylim(0, 105)
    # Outside the panels, so that no line hides under it; the speed panel's handles include the linear one's.
    efficiency.legend(*speed.get_legend_handles_labels(), loc="upper left", bbox_to_anchor=(1.02, 1.0),
                      fontsize="small")
    figures.suptitle(figure, title)
    return figures.save(figure, directory, FIGURE_ID)
