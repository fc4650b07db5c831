"""A sweep's report: report.html, one PNG per figure, report.csv and report.json, and its markdown for MLflow.

    report = build(sweep_result, directory)   # models.results.SweepResult, from tracking/reading.py
    report.html                                # <directory>/report.html
    report.note(8000, "report/report.html")    # findings, then tables, within MLflow's tag limit

Called by `ringleader report`, by the launcher's session end (tracking/sessions.py) and by the operator.
Figures are chosen by what the sweep varies (SweepResult.axes) and drawn only from data that exists.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import pathlib
from typing import Any, Callable

from ringleader.models import combinations, results
from ringleader.report import (comparison_figure, convergence, figures, findings, overlap_figure, page,
                               prediction_figure, scaling, tables)
from ringleader.report.figures import Figure
from ringleader.contract import keys

HTML_FILE = "report.html"
CSV_FILE = "report.csv"
JSON_FILE = "report.json"

FigureMaker = Callable[[results.SweepResult, pathlib.Path], "figures.Figure | None"]
FIGURES: tuple[FigureMaker, ...] = (
    comparison_figure.comparison,  # every sweep of two trials or more: first, the sweep run's description shows it
    figures.time_breakdown,      # every sweep
    scaling.scaling,             # sweeps over workers
    scaling.communication,
    convergence.held_out,        # trials with model.target: held-out quality against time
    convergence.time_to_target,
    convergence.loss,            # sweeps over paradigms
    convergence.time_to_loss,    # ... to a loss the sweep picks, when the file names no target
    convergence.staleness,
    convergence.thresholds,      # whenever a DSSP server recorded its thresholds
    scaling.network,             # sweeps over bandwidth
    figures.repetitions,         # sweeps with repetitions
    prediction_figure.predicted_vs_measured,  # whenever a trial's summary holds a prediction
    overlap_figure.overlap,      # ring trials that recorded their bucket allreduces
)

COMBINATION_COLUMNS = ("combination", "finished", "throughput (samples/s)", "iteration p50 (ms)", "comm", "wait",
                       "time to target loss (s)")


@dataclasses.dataclass(frozen=True)
class Report:
    """What build() wrote, and the text that describes the sweep in MLflow."""

    directory: pathlib.Path
    files: list[pathlib.Path]
    """files are every file written: report.html, report.csv, report.json and the figures' PNGs."""
    findings: list[str]
    figures: list[figures.Figure]
    sections: list[tuple[str, tables.Table]]
    """sections are the tables, with their headings: combinations (with repetitions) and trials."""

    @property
    def html(self) -> pathlib.Path:
        return self.directory / HTML_FILE

    @property
    def comparison(self) -> Figure | None:
        """The trials side by side (comparison_figure), where the sweep has it."""
        return next((figure for figure in self.figures if figure.id == comparison_figure.ID), None)

    @property
    def markdown(self) -> str:
        """Findings and every table, in markdown."""
        return self.note()

    def note(self, limit: int | None = None, where: str | None = None, image: str | None = None) -> str:
        """The markdown within `limit` characters: table rows are dropped from the end (trials first) and
        counted in a line that says where the rest is; `where` names the full report; `image`, the address of the
        comparison figure, shows it after the findings."""
        shown = [len(table.rows) for _, table in self.sections]
        while True:
            text = self._markdown(shown, where, image)
            if limit is None or len(text) <= limit:
                return text
            longest = max(range(len(shown)), key=lambda i: (shown[i] > 0, i), default=None)
            if longest is None or shown[longest] == 0:
                return text[: max(0, limit - 1)] + "…"
            shown[longest] -= 1

    def _markdown(self, shown: list[int], where: str | None, image: str | None = None) -> str:
        # The findings open it, no heading above them: MLflow shows a description's first lines until asked for more.
        lines = [f"- {tables.markdown_text(finding)}" for finding in self.findings]
        if image:
            lines += ["", f"![The trials side by side]({image})"]
        for (heading, table), rows in zip(self.sections, shown):
            lines += ["", f"**{heading}**", "", table.markdown(rows).rstrip("\n")]
            if rows < len(table.rows):
                lines.append(f"\n({len(table.rows) - rows} more rows in {CSV_FILE} and {HTML_FILE})")
        if where:
            lines += ["", f"Full report with figures: {where}"]
        return "\n".join(lines) + "\n"


def _estimate_cell(estimate, scale: float = 1.0, digits: int = 1) -> str:
    if estimate is None:
        return "-"
    text = f"{scale * estimate.mean:.{digits}f}"
    if estimate.low is not None:
        text += f" ({scale * estimate.low:.{digits}f}-{scale * estimate.high:.{digits}f})"
    return text


def _share_cell(estimate) -> str:
    return "-" if estimate is None else f"{100 * estimate.mean:.0f}%"


def combination_table(groups: list[combinations.Combination], goal: convergence.LossTarget | None) -> tables.Table:
    """Mean (95 % CI) per combination of the numbers that repetitions make uncertain."""
    rows = []
    for group in groups:
        seconds = group.estimate(lambda t: goal.seconds.get(t.trial.name)) if goal else None
        finished = sum(1 for t in group.trials if t.status == combinations.FINISHED)
        rows.append([group.label, f"{finished}/{len(group.trials)}", _estimate_cell(group.estimate(keys.THROUGHPUT)),
                     _estimate_cell(group.estimate(keys.P50), 1000.0), _share_cell(group.estimate(keys.COMM_FRACTION)),
                     _share_cell(group.estimate(keys.WAIT_FRACTION)), _estimate_cell(seconds)])
    return tables.Table(COMBINATION_COLUMNS, rows, frozenset({1, 2, 3, 4, 5, 6}))


def _document(result: results.SweepResult, found: list[findings.Finding], groups: list[combinations.Combination],
              goal: convergence.LossTarget | None, made: list[figures.Figure]) -> dict[str, Any]:
    def seconds(trial: results.TrialResult) -> float | None:
        return goal.seconds.get(trial.trial.name) if goal else None

    return {
        "experiment": result.experiment, "provenance": result.provenance,
        "axes": result.axes,
        "findings": [finding.text for finding in found],
        "findingRecords": [finding.wire() for finding in found],
        "targetLoss": None if goal is None else {"loss": goal.loss, "trial": goal.trial},
        "trials": [{"name": t.trial.name, "index": t.trial.index, "repetition": t.trial.repetition,
                    "parameters": dict(t.trial.parameters), "architecture": t.spec.architecture.value,
                    "paradigm": t.spec.sync.paradigm.value, "workers": t.spec.workers.replicas,
                    "status": t.status, "message": t.message, "summary": t.summary.to_document() if t.summary else None,
                    "timeToTargetLossSeconds": seconds(t)} for t in result.trials],
        "combinations": [{"label": g.label, "parameters": g.parameters, "trials": [t.trial.name for t in g.trials],
                          "throughput": combinations.wire(g.estimate(keys.THROUGHPUT)),
                          "iterationTimeP50Seconds": combinations.wire(g.estimate(keys.P50)),
                          "commFraction": combinations.wire(g.estimate(keys.COMM_FRACTION)),
                          "waitFraction": combinations.wire(g.estimate(keys.WAIT_FRACTION)),
                          "timeToTargetLossSeconds": combinations.wire(g.estimate(seconds))} for g in groups],
        "figures": [{"id": f.id, "title": f.title, "file": f.path.name, "alt": f.alt, "caption": f.caption}
                    for f in made],
    }


def build(result: results.SweepResult, directory: str | pathlib.Path) -> Report:
    """Write the report of `result` into `directory` (created if absent; files of the same names are replaced)."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    made = [figure for maker in FIGURES if (figure := maker(result, directory)) is not None]
    records = findings.findings(result)
    found = [finding.text for finding in records]
    groups = combinations.group(result)
    goal = convergence.target(result) if convergence.PARADIGM in result.axes else None
    rows = [tables.row_for(t.trial, t.summary, t.status, t.message if t.status != combinations.FINISHED else None)
            for t in result.trials]
    sections = [("Trials", tables.comparison(rows))]
    if combinations.REPETITION in result.axes:
        sections.insert(0, ("Combinations: mean (95 % CI)", combination_table(groups, goal)))

    csv_path, json_path, html_path = directory / CSV_FILE, directory / JSON_FILE, directory / HTML_FILE
    csv_path.write_text(tables.to_csv(rows))
    json_path.write_text(json.dumps(_document(result, records, groups, goal, made), indent=1, default=float))
    stamp = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    html_path.write_text(page.render(f"{result.experiment}: {len(result.trials)} trials", found, sections, made,
                                     f"ringleader report, {stamp}. Numbers: {CSV_FILE} (per trial, SI units) and "
                                     f"{JSON_FILE} (summaries, combinations, findings).", result.provenance,
                                     result.mlflow_pages))
    files = [html_path, csv_path, json_path] + [figure.path for figure in made]
    return Report(directory, files, found, made, sections)
