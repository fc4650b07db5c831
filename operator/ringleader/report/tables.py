"""The comparison table of a sweep's trials, one row per trial: as text, CSV and markdown.

Called by the launcher (the table printed at the end of `ringleader run`), by report.py (report.csv and
the table of the MLflow description) and by the operator (the parent run's comparison).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import re
from typing import Any, Mapping, Sequence

from ringleader.models import placement_notes
from ringleader.models.summary import TrialSummary
from ringleader.api.trial import Trial


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
    compute_seconds: float | None = None
    """compute_seconds, comm_seconds and wait_seconds are means per worker iteration after warm-up."""
    comm_seconds: float | None = None
    wait_seconds: float | None = None
    bytes_per_iteration: float | None = None
    """bytes_per_iteration is the mean of bytes sent per worker iteration."""
    loss_last: float | None = None
    """loss_last is the mean over workers of their last recorded loss."""
    parameters: Mapping[str, str] = dataclasses.field(default_factory=dict)
    message: str | None = None
    """message says why a trial failed."""
    target: str | None = None
    """target is `model.target` in words ("90 % held-out accuracy"), None when the trial sets none."""
    target_seconds: float | None = None
    """target_seconds and target_iterations: when the target was reached; None when it was not (or no target)."""
    target_iterations: float | None = None
    placement: str = "Any"
    """placement asked for (spec.scheduling.placement's label)."""
    node_count: float | None = None
    """node_count and cross_node_byte_share: where the ranks ran, as they recorded (models/cross_node.py)."""
    cross_node_byte_share: float | None = None
    ranks_per_pod: int = 1
    """ranks_per_pod is `workers.ranksPerPod` as the trial ran it (Workers.pod_ranks)."""
    bytes_by_level: tuple[float | None, float | None, float | None] = (None, None, None)
    """bytes_by_level: of bytes_per_iteration, what went inside the pod, to other pods of the node and across nodes
    (the summary's means; None where the ranks did not record it)."""

    def placement_cell(self) -> str:
        """"Spread: 3 nodes, 100% across"; the placement asked for alone when none was recorded."""
        got = placement_notes.describe(self.node_count, self.cross_node_byte_share)
        return f"{self.placement}: {got}" if got else self.placement

    def placed(self) -> bool:
        """Whether placement is worth a column: asked for, or the ranks ran on more than one node."""
        return self.placement != "Any" or (self.node_count or 1) > 1

    def levelled(self) -> bool:
        """Whether its bytes by level say something: recorded, and some ranks shared a pod or the nodes were several."""
        return self.bytes_by_level[0] is not None and (self.ranks_per_pod > 1 or (self.node_count or 1) > 1)

    def level_cells(self) -> list[str]:
        """MB per iteration inside the pod, across pods (on the node and beyond) and across nodes."""
        inside, node, network = self.bytes_by_level
        across = None if node is None or network is None else node + network
        return ["-" if value is None else f"{value / 1e6:.2f}" for value in (inside, across, network)]


def goal_words(target: Any) -> str | None:
    """`model.target` (api.spec.Target) in words; None for no target."""
    if target is None:
        return None
    if target.accuracy_percent is not None:
        return f"{target.accuracy_percent:g} % held-out accuracy"
    return f"held-out loss {target.loss:g}"


def row_for(trial: Trial, summary: TrialSummary | None, status: str,
            message: str | None = None) -> ComparisonRow:
    """A row from a trial and its summary (None if it has none)."""
    spec = trial.spec
    row = ComparisonRow(
        trial=trial.name, architecture=spec.architecture.value, paradigm=spec.sync.paradigm.value,
        workers=spec.workers.replicas, status=status, parameters=dict(trial.parameters), message=message,
        target=goal_words(spec.model.target), placement=spec.scheduling.placement.label(),
        ranks_per_pod=spec.workers.pod_ranks)
    if summary is None:
        return row
    timing, evaluation, placement, parts = summary.timing, summary.evaluation, summary.placement, summary.parts
    return dataclasses.replace(
        row, throughput=_number(timing.throughput), p50_seconds=_number(timing.iteration_time_p50_seconds),
        p95_seconds=_number(timing.iteration_time_p95_seconds), compute_fraction=_number(timing.compute_fraction),
        comm_fraction=_number(timing.comm_fraction), wait_fraction=_number(timing.wait_fraction),
        compute_seconds=_number(timing.compute_seconds), comm_seconds=_number(timing.comm_seconds),
        wait_seconds=_number(timing.wait_seconds), bytes_per_iteration=_number(summary.traffic.bytes_per_iteration),
        loss_last=_number(summary.learning.loss_last), target_seconds=_number(evaluation.target_seconds),
        target_iterations=_number(evaluation.target_iterations), node_count=_number(placement.node_count),
        cross_node_byte_share=_number(placement.cross_node_byte_share),
        bytes_by_level=(_number(parts.bytes_inside_pod), _number(parts.bytes_inside_node),
                        _number(parts.bytes_across_nodes)))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


COLUMNS = ("trial", "architecture", "paradigm", "workers", "throughput (samples/s)", "iteration p50 (ms)",
           "iteration p95 (ms)", "compute", "comm", "wait", "status")
LEADING = 4
"""The columns that say which trial a row is; a target's columns come right after them, first of the numbers."""
LEVEL_COLUMNS = ("MB/iter in pod", "MB/iter across pods", "MB/iter across nodes")
"""Where each worker's bytes of an iteration went (ComparisonRow.level_cells), after the shares, where they say
something: a trial of several ranks to a pod, or of several nodes."""


def _target(rows: Sequence[ComparisonRow]) -> str | None:
    return next((row.target for row in rows if row.target), None)


def columns(rows: Sequence[ComparisonRow]) -> tuple[str, ...]:
    """COLUMNS, led by time and iterations to the target when the trials set one: the answer they were run for;
    with "placement" before the status where a trial asked for one or ran on several nodes."""
    goal = _target(rows)
    found = (COLUMNS if goal is None
             else COLUMNS[:LEADING] + (f"time to {goal} (s)", "iterations to it") + COLUMNS[LEADING:])
    extra = (LEVEL_COLUMNS if _levelled(rows) else ()) + (("placement",) if _placed(rows) else ())
    return found[:-1] + extra + found[-1:]


def _placed(rows: Sequence[ComparisonRow]) -> bool:
    return any(row.placed() for row in rows)


def _levelled(rows: Sequence[ComparisonRow]) -> bool:
    return any(row.levelled() for row in rows)


def _numeric(rows: Sequence[ComparisonRow]) -> frozenset[int]:
    levels = len(LEVEL_COLUMNS) if _levelled(rows) else 0
    shift = len(columns(rows)) - len(COLUMNS) - _placed(rows) - levels
    after = len(COLUMNS) - 1 + shift  # the level columns follow the shares
    return frozenset(range(LEADING, LEADING + shift)) | {i + shift for i in NUMERIC_COLUMNS} | \
        frozenset(range(after, after + levels))


def _cells(row: ComparisonRow, with_target: bool = False, with_placement: bool = False,
           with_levels: bool = False) -> list[str]:
    def fixed(value: float | None, scale: float = 1.0, digits: int = 1) -> str:
        return "-" if value is None else f"{value * scale:.{digits}f}"

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value * 100:.0f}%"

    target = []
    if with_target:
        never = row.status == "FINISHED" and row.target_seconds is None  # finished without reaching it
        target = ["never" if never else fixed(row.target_seconds),
                  "never" if never else fixed(row.target_iterations, digits=0)]
    return [row.trial, row.architecture, row.paradigm, str(row.workers), *target, fixed(row.throughput),
            fixed(row.p50_seconds, 1000.0), fixed(row.p95_seconds, 1000.0), share(row.compute_fraction),
            share(row.comm_fraction), share(row.wait_fraction), *(row.level_cells() if with_levels else []),
            *([row.placement_cell()] if with_placement else []), row.status]


@dataclasses.dataclass(frozen=True)
class Table:
    """Cells as they are shown, for markdown here and HTML in page.py."""

    columns: Sequence[str]
    rows: Sequence[Sequence[str]]
    numeric: frozenset[int] = frozenset()
    """numeric are the indexes of right-aligned columns."""

    def markdown(self, rows: int | None = None) -> str:
        """The table in GitHub markdown, its first `rows` rows only when given."""
        lines = ["| " + " | ".join(map(markdown_text, self.columns)) + " |",
                 "|" + "|".join("---:" if i in self.numeric else "---" for i in range(len(self.columns))) + "|"]
        lines += ["| " + " | ".join(markdown_text(cell) for cell in row) + " |" for row in self.rows[:rows]]
        return "\n".join(lines) + "\n"


_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()#+!|~])")


def markdown_text(text: str) -> str:
    """`text` shown as itself in markdown (MLflow renders a run's description): names come from experiment
    files and MLflow tags, so no tag (`<img src=x>`), link, emphasis or table cell break can come from one."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")
    return _MARKDOWN_PUNCTUATION.sub(r"\\\1", text)


NUMERIC_COLUMNS = frozenset({3, 4, 5, 6, 7, 8, 9})


def comparison(rows: Sequence[ComparisonRow]) -> Table:
    with_target = _target(rows) is not None
    return Table(columns(rows), [_cells(row, with_target, _placed(rows), _levelled(rows)) for row in rows],
                 _numeric(rows))


def format_table(rows: Sequence[ComparisonRow]) -> str:
    """An aligned text table for a terminal, numbers right-aligned; failed trials' reasons listed below it."""
    table = comparison(rows)
    grid = [list(table.columns)] + [list(cells) for cells in table.rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(table.columns))]
    lines = []
    for number, line in enumerate(grid):
        cells = [cell.rjust(widths[i]) if i in table.numeric and number else cell.ljust(widths[i])
                 for i, cell in enumerate(line)]
        lines.append("  ".join(cells).rstrip())
        if number == 0:
            lines.append("  ".join("-" * width for width in widths))
    for row in rows:
        if row.message:
            lines.append(f"{row.trial}: {row.message}")
    return "\n".join(lines) + "\n"


def to_markdown(rows: Sequence[ComparisonRow]) -> str:
    return comparison(rows).markdown()


CSV_FIELDS = ("trial", "architecture", "paradigm", "workers", "target", "target_seconds", "target_iterations",
              "throughput", "iteration_time_p50_seconds",
              "iteration_time_p95_seconds", "compute_fraction", "comm_fraction", "wait_fraction",
              "compute_seconds", "comm_seconds", "wait_seconds", "bytes_per_iteration", "loss_last", "status",
              "parameters", "message", "placement", "node_count", "cross_node_byte_share", "ranks_per_pod",
              "bytes_inside_pod_per_iteration", "bytes_inside_node_per_iteration", "bytes_across_nodes_per_iteration")
NUMBERS = ("target_seconds", "target_iterations", "throughput", "p50_seconds", "p95_seconds", "compute_fraction",
           "comm_fraction", "wait_fraction", "compute_seconds", "comm_seconds", "wait_seconds", "bytes_per_iteration",
           "loss_last")
PLACEMENT_NUMBERS = ("node_count", "cross_node_byte_share")
"""The ComparisonRow attributes behind CSV_FIELDS' numeric columns, in the same order."""


def to_csv(rows: Sequence[ComparisonRow]) -> str:
    """Unrounded numbers in SI units (seconds, fractions), for pandas or a spreadsheet."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_FIELDS)
    for row in rows:
        writer.writerow([
            row.trial, row.architecture, row.paradigm, row.workers, row.target or "",
            *("" if getattr(row, name) is None else repr(getattr(row, name)) for name in NUMBERS),
            row.status, ";".join(f"{k}={v}" for k, v in row.parameters.items()), row.message or "", row.placement,
            *("" if getattr(row, name) is None else repr(getattr(row, name)) for name in PLACEMENT_NUMBERS),
            row.ranks_per_pod, *("" if value is None else repr(value) for value in row.bytes_by_level),
        ])
    return buffer.getvalue()
