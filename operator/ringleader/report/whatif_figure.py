"""`ringleader whatif -o FILE.png`: scaling factor against bandwidth, a line per compression ratio (or measured method),
a panel per N.

matplotlib's Agg backend (files only, no display); imported by commands/whatif.py only when a plot is asked for.
"""

from __future__ import annotations

import pathlib
from typing import Sequence

import matplotlib

matplotlib.use("Agg")  # before pyplot: files only, never a window
import matplotlib.pyplot as pyplot  # noqa: E402

from ringleader.models import whatif  # noqa: E402
from ringleader.report import figures


def plot(results: Sequence[whatif.WhatIf], path: pathlib.Path, title: str = "") -> pathlib.Path:
    """One panel per worker count; x: bandwidth (Gbit/s, log scale), y: SF, a line per compression ratio."""
    workers = sorted({r.workers for r in results})
    figure, axes = pyplot.subplots(1, len(workers), figsize=(4.2 * len(workers) + 1, 3.6), squeeze=False,
                                   sharey=True)
    for panel, n in zip(axes[0], workers):
        flat = whatif.plateau([r for r in results if r.workers == n])
        if flat is not None:  # a floor, not the link, bounds the iteration from there: said where it is seen
            panel.axvspan(flat / 1e9, max(r.bandwidth_bits_per_second for r in results) / 1e9, color="#f0f0f0",
                          zorder=0)
            panel.text(flat / 1e9, 1.02, f" from {flat / 1e9:g} Gbit/s:\n faster links\n change nothing",
                       fontsize=7, va="top", ha="left", color="#525252")
        compressions = sorted({(r.compression, r.label) for r in results if r.workers == n})
        for index, (compression, label) in enumerate(compressions):
            line = sorted((r.bandwidth_bits_per_second / 1e9, r.scaling_factor) for r in results
                          if r.workers == n and (r.compression, r.label) == (compression, label))
            panel.plot([x for x, _ in line], [y for _, y in line], marker="o", color=figures.colour(index),
                       label=f"compression {compression:.4g}" + (f" ({label}, measured)" if label else ""))
        panel.set_xscale("log")
        panel.set_xlabel("bandwidth (Gbit/s)")
        panel.set_title(f"N = {n}")
        panel.set_ylim(0, 1.05)
        panel.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("scaling factor")
    axes[0][-1].legend(loc="lower right", fontsize="small")
    if title:
        figures.suptitle(figure, title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=figures.DPI)
    pyplot.close(figure)
    return path
