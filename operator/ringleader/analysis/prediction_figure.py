"""The report's predicted-against-measured figure, from the prediction each trial's summary carries.

Called by analysis/report.py (FIGURES); the prediction itself is analysis/prediction.py's, written into
summary.json by the trial's lowest worker rank. No figure when no trial has one.
"""

from __future__ import annotations

import pathlib

from ringleader.analysis import figures
from ringleader.analysis import results as results_
from ringleader.contract import keys

MARKERS = {"1ps": "v", "4ps": "^", "p2p": "s", "ring": "o"}


def predicted_vs_measured(result: results_.SweepResult, directory: pathlib.Path) -> figures.Figure | None:
    """Per trial: its measured median iteration time beside its own predicted one (the error above), and the other
    architectures' predictions on its model, workers and link as markers; the models take medians too."""
    predicted = [(trial, (trial.summary or {}).get(keys.PREDICTION)) for trial in result.trials]
    predicted = [(trial, p) for trial, p in predicted if isinstance(p, dict) and p.get(keys.ITERATION_SECONDS)]
    if not predicted:
        return None
    figure, axes = figures.pyplot.subplots(figsize=(max(5.5, 1.4 * len(predicted) + 2.5), 4.8))
    width = 0.35
    seen: set[str] = set()
    top = 0.0
    for position, (trial, prediction) in enumerate(predicted):
        own = 1000 * prediction[keys.ITERATION_SECONDS]
        measured = 1000 * (prediction.get(keys.MEASURED_ITERATION_SECONDS) or 0.0)
        axes.bar(position - width / 2, measured, width, color="#bdbdbd",
                 label="measured (median)" if not position else None)
        axes.bar(position + width / 2, own, width, color="#2171b5",
                 label="predicted, this architecture" if not position else None)
        error = prediction.get(keys.ERROR_FRACTION)
        if error is not None:
            axes.text(position, max(own, measured) * 1.02, f"error {100 * error:.0f}%", ha="center", va="bottom",
                      fontsize=7)
        for label, estimate in sorted((prediction.get(keys.ARCHITECTURES) or {}).items()):
            value = 1000 * estimate[keys.ITERATION_SECONDS]
            axes.plot(position + width / 2, value, MARKERS.get(label, "x"), color="#d95f02", markersize=5,
                      label=label if label not in seen else None)
            seen.add(label)
            top = max(top, value)
        top = max(top, own, measured)
    axes.set_xticks(list(range(len(predicted))))
    axes.set_xticklabels([figures.trial_label(trial) for trial, _ in predicted], fontsize=7)
    axes.set_ylim(0, top * 1.2 or 1.0)
    axes.set_ylabel("median iteration time (ms)")
    axes.set_title("Predicted against measured median iteration time, per trial", fontsize=10)
    axes.legend(loc="upper left", fontsize=7, ncols=3)
    path = figures.save(figure, directory, "prediction")
    return figures.Figure("prediction", "Predicted against measured",
                          "bars per trial: measured and predicted median iteration time; markers: the other "
                          "architectures' predicted iteration times",
                          "Grey: the trial's median iteration time after warm-up (its p50); blue: what the models "
                          "predict for its architecture from the medians of its own records (study 1's cost models "
                          "for parameter servers and P2P, the DAG model for the ring); the error above. Medians on "
                          "both sides: a few iterations stalled by other load move neither. Orange markers: the other "
                          "architectures on the same model, workers and fitted link. docs/predict.md says what is "
                          "fitted from what.", path)
