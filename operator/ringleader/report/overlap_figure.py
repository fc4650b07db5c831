"""The report's overlap figure: a ring trial's measured backward and bucket allreduces beside the DAG model's replay.

Called by report/assembly.py (FIGURES). Study 2 asks how much communication backward hides; this draws both
answers on one time axis from backward's start: what a worker recorded (layers.json: backward's end and each
bucket's allreduce, medians over the traced iterations) and what the DAG model predicted from the same rank's
profile and probed link, whose backward is the median too: like with like. The model's iteration is the one the
rank's own prediction replayed (the summary's `prediction.timeline`, models/prediction.py), not computed again here;
a recording made before the summary carried it shows the measured rows alone. No figure without a ring trial that
recorded collectives.
"""

from __future__ import annotations

import dataclasses
import pathlib
import statistics
from typing import Any, Mapping

from ringleader.models import profile, results
from ringleader.report import figures
from ringleader.api import variants
from ringleader.contract import keys

MAX_PANELS = 4
"""MAX_PANELS bounds the figure to the first ring trials: one row of panels stays readable."""


@dataclasses.dataclass(frozen=True)
class Timeline:
    """One iteration's backward and bucket allreduces, in seconds from backward's start."""

    backward_seconds: float
    buckets: tuple[tuple[float, float], ...]
    """buckets are (start, end) of each bucket's allreduce, in launch order."""

    @property
    def exposed_seconds(self) -> float:
        """The communication left when backward ends: study 2's t_c_no (0 when backward hid it all)."""
        return max(0.0, max((end for _, end in self.buckets), default=0.0) - self.backward_seconds)


def measured(document: Mapping[str, Any]) -> Timeline | None:
    """The median traced iteration of a ring worker's layers.json: backward's end and each bucket's start and
    end; None when no traced iteration recorded collectives."""
    traced = [i for i in document.get("iterations") or [] if i.get("collectives")]
    if not traced:
        return None
    count = min(len(i["collectives"]) for i in traced)
    starts: list[list[float]] = [[] for _ in range(count)]
    ends: list[list[float]] = [[] for _ in range(count)]
    for iteration in traced:
        origin = iteration["backwardStart"]
        for index, collective in enumerate(sorted(iteration["collectives"], key=lambda c: c["start"])[:count]):
            starts[index].append(collective["start"] - origin)
            ends[index].append(collective["end"] - origin)
    backward = statistics.median(i["backwardEnd"] - i["backwardStart"] for i in traced)
    return Timeline(backward, tuple((statistics.median(s), statistics.median(e)) for s, e in zip(starts, ends)))


def predicted(prediction: Mapping[str, Any] | None) -> Timeline | None:
    """The DAG model's iteration as the trial's own prediction replayed it (its `timeline`); None when the summary
    carries none (no prediction, or a recording from before it was carried)."""
    timeline = (prediction or {}).get(keys.TIMELINE)
    if not isinstance(timeline, Mapping):
        return None
    return Timeline(float(timeline[keys.TIMELINE_BACKWARD_SECONDS]),
                    tuple((float(start), float(end)) for start, end in timeline[keys.TIMELINE_BUCKETS]))


def timelines(result: results.SweepResult) -> list[tuple[results.TrialResult, Timeline, Timeline | None]]:
    """(trial, measured, predicted) for each ring trial that recorded collectives; predicted is None where its
    summary carries no model iteration."""
    found = []
    for trial in result.trials:
        if not variants.ARCHITECTURES[trial.spec.architecture].buckets or not trial.layers:
            continue
        try:
            rank = profile.worker_rank(trial)
        except LookupError:
            continue
        seen = measured(trial.layers[rank])
        if seen is None:
            continue
        found.append((trial, seen, predicted(trial.summary.prediction if trial.summary else None)))
    return found


def overlap(result: results.SweepResult, directory: pathlib.Path) -> figures.Figure | None:
    """Per ring trial: measured and predicted backward, and each bucket's allreduce, on one time axis."""
    found = timelines(result)[:MAX_PANELS]
    if not found:
        return None
    figure, panels = figures.pyplot.subplots(len(found), 1, figsize=(7.5, 2.2 * len(found) + 0.6), squeeze=False)
    for axes, (trial, seen, model) in zip(panels[:, 0], found):
        rows = [("DAG", model, "#2171b5"), ("measured", seen, "#636363")]
        drawn = [(row, name, timeline, colour) for row, (name, timeline, colour) in enumerate(rows)
                 if timeline is not None]
        for row, _, timeline, colour in drawn:
            y = 2 * row
            axes.broken_barh([(0, 1000 * timeline.backward_seconds)], (y + 1.05, 0.8), color="#fdae6b")
            axes.broken_barh([(1000 * start, 1000 * (end - start)) for start, end in timeline.buckets],
                             (y + 0.15, 0.8), facecolor=colour, edgecolor="white")
        axes.set_yticks([2 * row + offset for row, *_ in drawn for offset in (0.55, 1.45)])
        axes.set_yticklabels([f"{name}: {part}" for _, name, *_ in drawn for part in ("allreduce", "backward")],
                             fontsize=7)
        axes.set_xlabel("ms from the start of backward", fontsize=8)
        # A recording from before the summary carried the model's iteration: the measured rows alone.
        said = f"DAG model {1000 * model.exposed_seconds:.1f} ms" if model is not None else "DAG model not recorded"
        axes.set_title(f"{trial.trial.name}, median iteration: communication left after backward, measured "
                       f"{1000 * seen.exposed_seconds:.1f} ms, {said}", fontsize=8)
    path = figures.save(figure, directory, "overlap")
    return figures.Figure("overlap", "Overlap of communication with backward",
                          "per ring trial: backward and each bucket's allreduce against time, measured and as the "
                          "DAG model predicts",
                          "Orange: backward; bars: each gradient bucket's allreduce, from backward's start. Measured: "
                          "the medians of the traced iterations of the trial's lowest worker rank (layers.json); "
                          "DAG model: the same rank's backward, scaled to its median time/backward after warm-up, "
                          "replayed with each bucket allreduced first in first out once its gradients are ready, at "
                          "the link probed at the trial's start (docs/predict.md). Medians on both rows. What runs "
                          "past backward's end is communication backward did not hide.", path)
