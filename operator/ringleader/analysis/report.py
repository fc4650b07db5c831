"""Comparison reports of a sweep's trials (text, CSV, markdown) and plots of where iteration time goes.

Called by the launcher (the table printed at the end of `ringleader run`), by tracking/ (the
comparison and breakdown artifacts in MLflow) and by the operator (the parent run's report).
Plots use matplotlib's Agg backend: no display is needed, in a pod or over ssh.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import pathlib
import statistics
from typing import Any, Iterable, Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # before pyplot: files only, never a window
import matplotlib.pyplot as pyplot  # noqa: E402

from ringleader.api import trial as trial_  # noqa: E402
from ringleader.contract import keys  # noqa: E402

# Phases of a rank's breakdown plot, bottom to top, with the colours of the comparison plot's shares.
BREAKDOWN_PHASES = (
    (keys.TIME_DATA, "data", "#9ecae1"),
    (keys.TIME_FORWARD, "forward", "#4292c6"),
    (keys.TIME_BACKWARD, "backward", "#08519c"),
    (keys.TIME_UPDATE, "update", "#6baed6"),
    (keys.TIME_COMM, "communication", "#fd8d3c"),
    (keys.TIME_WAIT, "waiting", "#bdbdbd"),
)
SHARE_COLOURS = {"compute": "#2171b5", "communication": "#fd8d3c", "waiting": "#bdbdbd"}


@dataclasses.dataclass(frozen=True)
class ComparisonRow:
    """One trial in the comparison: what it was, how fast, where the time went, how it ended."""

    trial: str
    architecture: str
    paradigm: str
    workers: int
    status: str
    throughput: float | None = None
    """throughput in samples per second, all workers together."""
    p50_seconds: float | None = None
    p95_seconds: float | None = None
    compute_fraction: float | None = None
    comm_fraction: float | None = None
    wait_fraction: float | None = None
    parameters: Mapping[str, str] = dataclasses.field(default_factory=dict)
    message: str | None = None
    """message says why a trial failed."""


def row_for(trial: trial_.Trial, summary: Mapping[str, Any] | None, status: str,
            message: str | None = None) -> ComparisonRow:
    """A row from a trial and its summary (a summary.json document or `Summary.wire()`; None if it has none)."""
    summary = summary or {}

    def number(key: str) -> float | None:
        value = summary.get(key)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    spec = trial.spec
    return ComparisonRow(
        trial=trial.name, architecture=spec.architecture.value, paradigm=spec.sync.paradigm.value,
        workers=spec.workers.replicas, status=status, throughput=number(keys.THROUGHPUT),
        p50_seconds=number(keys.P50), p95_seconds=number(keys.P95), compute_fraction=number(keys.COMPUTE_FRACTION),
        comm_fraction=number(keys.COMM_FRACTION), wait_fraction=number(keys.WAIT_FRACTION),
        parameters=dict(trial.parameters),
        message=message,
    )


# -- tables -----------------------------------------------------------------------------------

COLUMNS = ("trial", "architecture", "paradigm", "workers", "throughput (samples/s)", "iteration p50 (ms)",
           "iteration p95 (ms)", "compute", "comm", "wait", "status")


def _cells(row: ComparisonRow) -> list[str]:
    def fixed(value: float | None, scale: float = 1.0, digits: int = 1) -> str:
        return "-" if value is None else f"{value * scale:.{digits}f}"

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value * 100:.0f}%"

    return [row.trial, row.architecture, row.paradigm, str(row.workers), fixed(row.throughput),
            fixed(row.p50_seconds, 1000.0), fixed(row.p95_seconds, 1000.0), share(row.compute_fraction),
            share(row.comm_fraction), share(row.wait_fraction), row.status]


def format_table(rows: Sequence[ComparisonRow]) -> str:
    """An aligned text table for a terminal, numbers right-aligned; failed trials' reasons listed below it."""
    table = [list(COLUMNS)] + [_cells(row) for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    numeric = {3, 4, 5, 6, 7, 8, 9}
    lines = []
    for number, line in enumerate(table):
        cells = [cell.rjust(widths[i]) if i in numeric and number else cell.ljust(widths[i])
                 for i, cell in enumerate(line)]
        lines.append("  ".join(cells).rstrip())
        if number == 0:
            lines.append("  ".join("-" * width for width in widths))
    for row in rows:
        if row.message:
            lines.append(f"{row.trial}: {row.message}")
    return "\n".join(lines) + "\n"


def to_markdown(rows: Sequence[ComparisonRow]) -> str:
    def escape(cell: str) -> str:
        return cell.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(COLUMNS) + " |",
             "|" + "|".join("---:" if i in (3, 4, 5, 6, 7, 8, 9) else "---" for i in range(len(COLUMNS))) + "|"]
    lines += ["| " + " | ".join(escape(cell) for cell in _cells(row)) + " |" for row in rows]
    return "\n".join(lines) + "\n"


CSV_FIELDS = ("trial", "architecture", "paradigm", "workers", "throughput", "iteration_time_p50_seconds",
              "iteration_time_p95_seconds", "compute_fraction", "comm_fraction", "wait_fraction", "status",
              "parameters", "message")


def to_csv(rows: Sequence[ComparisonRow]) -> str:
    """Unrounded numbers in SI units (seconds, fractions), for pandas or a spreadsheet."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for row in rows:
        writer.writerow([
            row.trial, row.architecture, row.paradigm, row.workers,
            *("" if v is None else repr(v) for v in (row.throughput, row.p50_seconds, row.p95_seconds,
                                                    row.compute_fraction, row.comm_fraction, row.wait_fraction)),
            row.status, ";".join(f"{k}={v}" for k, v in row.parameters.items()), row.message or "",
        ])
    return buffer.getvalue()


# -- plots ------------------------------------------------------------------------------------

def plot_comparison(rows: Sequence[ComparisonRow], path: pathlib.Path) -> pathlib.Path:
    """Stacked bars per trial: the shares of iteration time in compute, communication and waiting,
    labelled with the trial's p50 iteration time and throughput. Trials without a summary get an empty bar."""
    figure, axes = pyplot.subplots(figsize=(max(5.0, 1.1 * len(rows) + 2.5), 4.5))
    try:
        positions = range(len(rows))
        bottoms = [0.0] * len(rows)
        for label, attribute in (("compute", "compute_fraction"), ("communication", "comm_fraction"),
                                 ("waiting", "wait_fraction")):
            heights = [getattr(row, attribute) or 0.0 for row in rows]
            axes.bar(positions, heights, bottom=bottoms, label=label, color=SHARE_COLOURS[label])
            bottoms = [b + h for b, h in zip(bottoms, heights)]
        for position, row in zip(positions, rows):
            if row.p50_seconds is None:
                text = row.status
            else:
                text = f"{row.p50_seconds * 1000:.1f} ms"
                if row.throughput is not None:
                    text += f"\n{row.throughput:.0f}/s"
            axes.text(position, max(bottoms[position], 0.0) + 0.02, text, ha="center", va="bottom", fontsize=8)
        axes.set_xticks(list(positions))
        axes.set_xticklabels([f"{row.trial}\n{row.architecture}\n{row.paradigm}, {row.workers}w" for row in rows],
                             fontsize=7)
        axes.set_ylim(0, 1.25)
        axes.set_ylabel("share of iteration time")
        axes.set_title("Where iteration time goes, per trial\n(above each bar: p50 iteration time, throughput)",
                       fontsize=10)
        axes.legend(loc="upper right", fontsize=8, ncols=3)
        figure.tight_layout()
        figure.savefig(path, dpi=110)
    finally:
        pyplot.close(figure)
    return path


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
    steady = [r for r in records if keys.TIME_ITERATION in r and not r.get("warmup")]
    if not steady:
        return None
    names = [key for key, _, _ in BREAKDOWN_PHASES] + [keys.TIME_ITERATION]
    phases = {key: statistics.fmean(float(r.get(key) or 0.0) for r in steady) for key in names}
    role = str(steady[0].get("role", "worker"))
    return RankBreakdown(rank=rank, role=role, iterations=len(steady), phases=phases)


def plot_rank_breakdown(breakdowns: Sequence[RankBreakdown], path: pathlib.Path, title: str = "") -> pathlib.Path:
    """Stacked bars per rank of mean milliseconds in data, forward, backward, update, communication,
    waiting and the unaccounted rest: a straggler or a rank that waits stands out."""
    figure, axes = pyplot.subplots(figsize=(max(6.0, 0.8 * len(breakdowns) + 4.0), 4.5))
    try:
        positions = range(len(breakdowns))
        bottoms = [0.0] * len(breakdowns)
        for key, label, colour in BREAKDOWN_PHASES:
            heights = [b.phases.get(key, 0.0) * 1000 for b in breakdowns]
            axes.bar(positions, heights, bottom=bottoms, label=label, color=colour)
            bottoms = [b + h for b, h in zip(bottoms, heights)]
        other = [b.unaccounted * 1000 for b in breakdowns]
        if any(value > 0 for value in other):
            axes.bar(positions, other, bottom=bottoms, label="other", color="#f0f0f0", edgecolor="#d9d9d9")
        axes.set_xticks(list(positions))
        axes.set_xticklabels([f"rank {b.rank}\n{b.role}" for b in breakdowns], fontsize=8)
        axes.set_ylabel("mean time per iteration (ms)")
        axes.set_title(title or "Where iteration time goes, per rank (after warm-up)", fontsize=9)
        axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
        figure.tight_layout()
        figure.savefig(path, dpi=110)
    finally:
        pyplot.close(figure)
    return path
