"""The report's overlap figure: a ring trial's measured backward and bucket allreduces beside the DAG model's replay.

Called by report/assembly.py (FIGURES). Study 2 asks how much communication backward hides; this draws both
answers on one time axis from backward's start: what a worker recorded (layers.json: backward's end and each
bucket's allreduce, medians over the traced iterations) and what the DAG model predicts from the same rank's
profile and probed link (models/prediction.py), whose backward is the median too: like with like. No figure
without a ring trial that recorded collectives.
"""

from __future__ import annotations

import dataclasses
import pathlib
import statistics
from typing import Any, Mapping

from ringleader.models import architectures, prediction, profile, results
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


def predicted(trial: results.TrialResult, rank: int) -> Timeline:
    """The DAG model's iteration for this ring trial, as its own prediction replays it (models/prediction.py);
    ValueError when its records cannot calibrate the model."""
    found = prediction.predict_trial(trial.trial, trial.records, trial.layers[rank], rank,
                                     (trial.summary or {}).get(keys.LINK_PROBE))
    replayed = architectures.ARCHITECTURE_MODELS[trial.trial.spec.architecture].prediction.replay
    assert replayed is not None, "only a bucketed architecture's trials are drawn (timelines)"
    replay = replayed(found.inputs)
    return Timeline(replay.backward_seconds, tuple(zip(replay.starts, replay.ends)))


def timelines(result: results.SweepResult) -> list[tuple[results.TrialResult, Timeline, Timeline]]:
    """(trial, measured, predicted) for each ring trial that recorded collectives and can be calibrated."""
    found = []
    for trial in result.trials:
        if not variants.ARCHITECTURES[trial.trial.spec.architecture].buckets or not trial.layers:
            continue
        try:
            rank = profile.worker_rank(trial)
        except LookupError:
            continue
        seen = measured(trial.layers[rank])
        if seen is None:
            continue
        try:
            found.append((trial, seen, predicted(trial, rank)))
        except ValueError:
            continue  # the prediction figure and `ringleader predict` say why
    return found


def overlap(result: results.SweepResult, directory: pathlib.Path) -> figures.Figure | None:
    """Per ring trial: measured and predicted backward, and each bucket's allreduce, on one time axis."""
    found = timelines(result)[:MAX_PANELS]
    if not found:
        return None
    figure, panels = figures.pyplot.subplots(len(found), 1, figsize=(7.5, 2.2 * len(found) + 0.6), squeeze=False)
    for axes, (trial, seen, model) in zip(panels[:, 0], found):
        rows = [("DAG model", model, "#2171b5"), ("measured", seen, "#636363")]
        for row, (_, timeline, colour) in enumerate(rows):
            y = 2 * row
            axes.broken_barh([(0, 1000 * timeline.backward_seconds)], (y + 1.05, 0.8), color="#fdae6b")
            axes.broken_barh([(1000 * start, 1000 * (end - start)) for start, end in timeline.buckets],
                             (y + 0.15, 0.8), facecolor=colour, edgecolor="white")
        axes.set_yticks([0.55, 1.45, 2.55, 3.45])
        axes.set_yticklabels(["DAG: allreduce", "DAG: backward", "measured: allreduce", "measured: backward"],
                             fontsize=7)
        axes.set_xlabel("ms from the start of backward", fontsize=8)
        axes.set_title(f"{trial.trial.name}, median iteration: communication left after backward, measured "
                       f"{1000 * seen.exposed_seconds:.1f} ms, DAG model {1000 * model.exposed_seconds:.1f} ms",
                       fontsize=8)
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
