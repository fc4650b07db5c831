"""The report's prediction figure: predictions drawn with their bands; a trial without one says why, and is not
drawn."""

from __future__ import annotations

from ringleader.report import prediction_figure
from ringleader.models import results as results_
from ringleader.models.summary import TrialSummary
from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.contract import keys

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def a_result(index: int, prediction: dict | None) -> results_.TrialResult:
    spec = spec_.ExperimentSpec.model_validate({"architecture": "PeerToPeer", "workers": {"replicas": 2}})
    trial = trial_.Trial(experiment="e", name=f"e-{index}", index=index, spec=spec)
    summary = None if prediction is None else TrialSummary.from_document({keys.PREDICTION: prediction})
    return results_.TrialResult(trial, "FINISHED", summary=summary)


PREDICTED = {keys.PREDICTED_ARCHITECTURE: "p2p", keys.ITERATION_SECONDS: 0.140, keys.MEASURED_ITERATION_SECONDS: 0.145,
             keys.ERROR_FRACTION: 0.034,
             keys.ARCHITECTURES: {"p2p": {keys.ITERATION_SECONDS: 0.140, keys.BAND_FRACTION: 0.05},
                                  "4ps": {keys.ITERATION_SECONDS: 0.280, keys.BAND_FRACTION: None}}}


def test_predictions_are_drawn_and_trials_without_one_say_why(tmp_path):
    failed = {keys.PREDICTION_UNAVAILABLE: "the trial recorded no link probe"}
    loopback = {**PREDICTED, keys.CANNOT_PREDICT: "cannot predict on an uncapped loopback: shared cores"}
    result = results_.SweepResult("e", [a_result(0, PREDICTED), a_result(1, failed), a_result(2, loopback),
                                        a_result(3, None), a_result(4, loopback)])
    figure = prediction_figure.predicted_vs_measured(result, tmp_path)
    assert figure.id == "prediction" and figure.path.read_bytes().startswith(PNG_MAGIC)
    assert "validated error band" in figure.alt
    assert "No prediction for e-1: the trial recorded no link probe." in figure.caption
    assert "No prediction for e-2, e-4: cannot predict on an uncapped loopback: shared cores." in figure.caption
    assert "e-0" not in figure.caption.split("No prediction for")[1]


def test_no_figure_without_a_prediction(tmp_path):
    assert prediction_figure.predicted_vs_measured(results_.SweepResult("e", [a_result(0, None)]), tmp_path) is None


def test_the_caption_says_for_each_trial_whether_the_host_or_the_wire_bounds_its_exchange(tmp_path):
    host_bound = {**PREDICTED, keys.ARCHITECTURES: {"p2p": {keys.ITERATION_SECONDS: 0.140, keys.HOST_SECONDS: 0.064,
                                                            keys.WIRE_SECONDS: 0.043, keys.BOUND: "host",
                                                            keys.NIC_UTILIZATION: 0.31}}}
    older = {**PREDICTED, keys.ARCHITECTURES: {"p2p": {keys.ITERATION_SECONDS: 0.140, keys.HOST_SECONDS: None,
                                                       keys.WIRE_SECONDS: 0.043, keys.BOUND: "wire"}}}
    result = results_.SweepResult("e", [a_result(0, host_bound), a_result(1, older), a_result(2, PREDICTED)])
    caption = prediction_figure.predicted_vs_measured(result, tmp_path).caption
    assert "e-0 p2p: host 64.0 ms, wire 43.0 ms, host-bound, NIC 31% of its cap" in caption
    assert "e-1 p2p: host not priced, wire 43.0 ms, wire-bound" in caption
    assert "e-2" not in caption.split("Host or wire")[1]  # a summary from before the terms: nothing said
