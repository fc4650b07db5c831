"""The report's predicted-against-measured figure, from the prediction each trial's summary carries.

Called by report/assembly.py (FIGURES); the prediction itself is models/prediction.py's, written into
summary.json by the trial's lowest worker rank, with each estimate's validated error band
(models/validation.py). A trial whose models could not be calibrated, or whose link the models cannot
predict on (an uncapped loopback), has its measurement drawn and the reason said, never a prediction. No
figure when no trial has a prediction.
"""

from __future__ import annotations

import pathlib

from ringleader.models import combinations, results
from ringleader.report import figures
from ringleader.contract import keys

MARKERS = {"1ps": "v", "4ps": "^", "p2p": "s", "ring": "o"}
BAR_WIDTH = 0.35  # of a trial's slot: its measured bar left of centre, its predicted one right


ALT = ("bars per trial: measured and predicted median iteration time, the prediction with its validated error band; "
       "markers: the other architectures' predicted iteration times")
CAPTION = ("Grey: the trial's median iteration time after warm-up (its p50); blue: what the models predict for its "
           "architecture from the medians of its own records and the link it probed at its start, the error above. "
           "Medians on both sides: a few iterations stalled by other load move neither. Orange markers: the other "
           "architectures on the same model, workers and link. Whiskers: the |error| 9 in 10 held-out "
           "predictions of that kind stayed within in bench/bench_predict_validation.py's recorded runs, across "
           "nodes in those of Study 1 across nodes (docs/predict-validation.md); a hollow marker has no validated band "
           "(the kind was not validated, e.g. 4 servers, a paradigm other than BSP or a placement that keeps bytes "
           "inside a node, or the trial's ranks waited for cores longer than the bench's). "
           "docs/predict.md says what is measured and fitted from what.")


def predicted_vs_measured(result: results.SweepResult, directory: pathlib.Path) -> figures.Figure | None:
    """Per trial: its measured median iteration time beside its own predicted one with its validated band (the error
    above), and the other architectures' predictions on its model, workers and link as markers with theirs; the
    models take medians too."""
    found = [(trial, trial.summary.prediction if trial.summary else None) for trial in result.trials]
    predicted = [(trial, p) for trial, p in found
                 if isinstance(p, dict) and (p.get(keys.ITERATION_SECONDS) or p.get(keys.PREDICTION_UNAVAILABLE))]
    if not predicted:
        return None
    figure, axes = figures.pyplot.subplots(figsize=(max(5.5, 1.4 * len(predicted) + 2.5), 4.8))
    seen: set[str] = set()  # what the legend has already
    unavailable: dict[str, list[str]] = {}  # reason -> the trials it keeps from a prediction
    top = max(draw_trial(axes, position, trial, prediction, seen, unavailable)
              for position, (trial, prediction) in enumerate(predicted))
    axes.set_xticks(list(range(len(predicted))))
    axes.set_xticklabels([figures.trial_label(trial) for trial, _ in predicted], fontsize=7)
    axes.set_ylim(0, top * 1.2 or 1.0)
    axes.set_ylabel("median iteration time (ms)")
    axes.set_title("Predicted against measured median iteration time, per trial", fontsize=10)
    axes.legend(loc="upper left", fontsize=7, ncols=3)
    path = figures.save(figure, directory, "prediction")
    failed = "".join(f" No prediction for {', '.join(names)}: {why}." for why, names in unavailable.items())
    terms = "; ".join(filter(None, (host_or_wire(trial.trial.name, p) for trial, p in predicted)))
    priced = f" Host or wire, each trial's own architecture (docs/predict.md): {terms}." if terms else ""
    return figures.Figure("prediction", "Predicted against measured", ALT, CAPTION + failed + priced, path)


def host_or_wire(name: str, prediction: dict) -> str:
    """"e-0 1ps: host 640.0 ms, wire 512.0 ms, host-bound, NIC 31% of its cap": the two terms of a trial's own
    architecture apart; "host not priced" for records before cpu/comm; "" without them (an older summary)."""
    label = prediction.get(keys.PREDICTED_ARCHITECTURE)
    own = (prediction.get(keys.ARCHITECTURES) or {}).get(label) or {}
    wire = own.get(keys.WIRE_SECONDS)
    if wire is None:
        return ""
    host = own.get(keys.HOST_SECONDS)
    nic = own.get(keys.NIC_UTILIZATION)
    return (f"{name} {label}: host {'not priced' if host is None else f'{1000 * host:.1f} ms'}, wire "
            f"{1000 * wire:.1f} ms, {own.get(keys.BOUND)}-bound"
            + ("" if nic is None else f", NIC {100 * nic:.0f}% of its cap"))


def draw_trial(axes, position: int, trial: results.TrialResult, prediction: dict, seen: set[str],
               unavailable: dict[str, list[str]]) -> float:
    """The trial's measured bar and, where it has a prediction, its own and the other architectures'; else its
    name under the reason in `unavailable`. The highest point drawn (ms)."""
    width = BAR_WIDTH
    measured = 1000 * (prediction.get(keys.MEASURED_ITERATION_SECONDS) or combinations.number(trial, keys.P50)
                       or 0.0)
    axes.bar(position - width / 2, measured, width, color="#bdbdbd",
             label="measured (median)" if not position else None)
    why = prediction.get(keys.PREDICTION_UNAVAILABLE) or prediction.get(keys.CANNOT_PREDICT)
    if why:
        unavailable.setdefault(why, []).append(trial.trial.name)
        axes.text(position + width / 2, 0, "no prediction (caption)", rotation=90, ha="center", va="bottom",
                  fontsize=7, color="#a50f15")
        return measured
    estimates = prediction.get(keys.ARCHITECTURES) or {}
    own = 1000 * prediction[keys.ITERATION_SECONDS]
    band = (estimates.get(prediction.get(keys.PREDICTED_ARCHITECTURE)) or {}).get(keys.BAND_FRACTION)
    axes.bar(position + width / 2, own, width, color="#2171b5", yerr=own * band if band else None,
             capsize=3, ecolor="#08306b", label="predicted, this architecture" if "own" not in seen else None)
    seen.add("own")
    error = prediction.get(keys.ERROR_FRACTION)
    if error is not None:
        axes.text(position, max(own * (1 + (band or 0)), measured) * 1.02, f"error {100 * error:.0f}%",
                  ha="center", va="bottom", fontsize=7)
    top = max(measured, own * (1 + (band or 0)))
    for label, estimate in sorted(estimates.items()):
        value = 1000 * estimate[keys.ITERATION_SECONDS]
        validated = estimate.get(keys.BAND_FRACTION)
        axes.errorbar(position + width / 2, value, yerr=value * validated if validated else None,
                      fmt=MARKERS.get(label, "x"), color="#d95f02", markersize=5, capsize=2,
                      markerfacecolor="#d95f02" if validated else "none", label=label if label not in seen else None)
        seen.add(label)
        top = max(top, value * (1 + (validated or 0)))
    return top
