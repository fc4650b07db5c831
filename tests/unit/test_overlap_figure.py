"""The report's overlap figure: a ring worker's recorded timeline by hand, and the DAG's replay the trial's own
prediction carried in its summary, agreeing with `predict`."""

from __future__ import annotations

import pytest

from ringleader.models import prediction
from ringleader.report import overlap_figure
from ringleader.models import results as results_
from ringleader.models.summary import TrialSummary
from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.contract import keys

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def layers_document() -> dict:
    # Two traced iterations with two buckets each ("b" then "a", in launch order), one without collectives.
    # From backward's start: backward 10 and 12 ms (median 11); bucket 1 (4, 8) and (5, 9) ms, median (4.5, 8.5);
    # bucket 2 (9, 16) and (11, 20) ms, median (10, 18). Left after backward: 18 - 11 = 7 ms.
    return {
        "parameters": [{"name": "a.weight", "bytes": 800}, {"name": "a.bias", "bytes": 200},
                       {"name": "b.weight", "bytes": 2400}, {"name": "b.bias", "bytes": 600}],
        "iterations": [
            {"step": 5, "backwardStart": 0.010, "backwardEnd": 0.020,
             "ready": {"b.bias": 0.012, "b.weight": 0.013, "a.bias": 0.016, "a.weight": 0.017},
             "collectives": [{"bytes": 1000, "start": 0.019, "end": 0.026},
                             {"bytes": 3000, "start": 0.014, "end": 0.018}]},
            {"step": 6, "backwardStart": 0.110, "backwardEnd": 0.122,
             "ready": {"b.bias": 0.113, "b.weight": 0.115, "a.bias": 0.118, "a.weight": 0.119},
             "collectives": [{"bytes": 3000, "start": 0.115, "end": 0.119},
                             {"bytes": 1000, "start": 0.121, "end": 0.130}]},
            {"step": 7, "backwardStart": 0.210, "backwardEnd": 0.290, "ready": {"a.weight": 0.280}},
        ],
    }


def worker_record(step: int) -> dict:
    return {"step": step, "role": "worker", "warmup": False, keys.TIME_DATA: 0.0001, keys.TIME_FORWARD: 0.003,
            keys.TIME_BACKWARD: 0.011, keys.TIME_COMM: 0.007, keys.TIME_WAIT: 0.0, keys.TIME_UPDATE: 0.001,
            keys.TIME_ITERATION: 0.023}


# The link probed at the trial's start: one way 0.5 ms + 1 us per byte, an allreduce of 2 0.2 ms + 1 us per byte.
PROBE = {keys.PROBE_SHARED_HOST: True,
         keys.PROBE_POINT_TO_POINT: {keys.PROBE_RANKS: [0, 1], keys.PROBE_SAMPLES: [[1000, 0.0015], [4000, 0.0045]]},
         keys.PROBE_COLLECTIVE: {keys.WORKERS: 2, keys.PROBE_SAMPLES: [[1000, 0.0012], [4000, 0.0042]]}}


def a_result(architecture: str, layers: dict | None = None, *, predicted: bool = True) -> results_.TrialResult:
    """A finished trial of two workers whose summary carries its own prediction (as the rank writes it), or none."""
    spec = spec_.ExperimentSpec.model_validate({"architecture": architecture, "workers": {"replicas": 2}})
    trial = trial_.Trial(experiment="e", name=f"e-{architecture.lower()}", index=0, spec=spec)
    records = {rank: [worker_record(s) for s in (1, 2, 3)] for rank in (0, 1)}
    document: dict = {keys.LINK_PROBE: PROBE}
    if predicted and layers:
        rank = min(layers)
        document[keys.PREDICTION] = prediction.predict_trial(trial, records, layers[rank], rank, PROBE).to_document()
    return results_.TrialResult(trial, "FINISHED", summary=TrialSummary.from_document(document), records=records,
                                layers=layers or {})


def test_the_measured_timeline_is_the_median_traced_iteration_from_backwards_start():
    seen = overlap_figure.measured(layers_document())
    assert seen.backward_seconds == pytest.approx(0.011)
    assert [moment for bucket in seen.buckets for moment in bucket] == pytest.approx([0.0045, 0.0085, 0.010, 0.018])
    assert seen.exposed_seconds == pytest.approx(0.007)
    assert overlap_figure.measured({"iterations": [{"backwardStart": 0, "backwardEnd": 1, "ready": {}}]}) is None


def test_the_replay_is_the_dag_that_predict_reports_first_in_first_out_on_one_channel():
    result = a_result("RingAllReduce", {0: layers_document()})
    model = overlap_figure.predicted(result.summary.prediction)
    found = prediction.predict_trial(result.trial, result.records, layers_document(), 0, PROBE)
    assert model.exposed_seconds == pytest.approx(found.own.comm_seconds)  # predict's ring comm is t_c_no
    assert model.backward_seconds == pytest.approx(0.011)  # scaled to the records' median time/backward
    # The buckets the trial recorded, in launch order: b's 3000 bytes, ready at 4 ms of a 12 ms traced backward, and
    # a's 1000, at 9 ms; stretched to the records' 11 ms: 3.667 and 8.25 ms. At 0.2 ms + 1 us per byte: b 3.667 to
    # 6.867 ms, a 8.25 to 9.45 ms, all before backward ends.
    assert [moment for bucket in model.buckets for moment in bucket] == \
        pytest.approx([0.011 / 3, 0.011 / 3 + 0.0032, 0.00825, 0.00945])
    assert model.exposed_seconds == 0.0


def test_the_figure_is_drawn_for_ring_trials_only(tmp_path):
    ring = a_result("RingAllReduce", {0: layers_document()})
    server = a_result("ParameterServer", {1: layers_document()})
    figure = overlap_figure.overlap(results_.SweepResult("e", [server, ring]), tmp_path)
    assert figure.id == "overlap" and figure.path.read_bytes().startswith(PNG_MAGIC)
    assert overlap_figure.overlap(results_.SweepResult("e", [server]), tmp_path / "none") is None
    unrecorded = a_result("RingAllReduce", {0: {"iterations": [{"backwardStart": 0, "backwardEnd": 1, "ready": {}}]}},
                          predicted=False)
    assert overlap_figure.overlap(results_.SweepResult("e", [unrecorded]), tmp_path / "none") is None


def test_a_recording_whose_summary_carries_no_model_iteration_shows_the_measured_rows_alone(tmp_path):
    older = a_result("RingAllReduce", {0: layers_document()}, predicted=False)
    assert overlap_figure.predicted(older.summary.prediction) is None
    [(trial, seen, model)] = overlap_figure.timelines(results_.SweepResult("e", [older]))
    assert trial is older and seen.exposed_seconds == pytest.approx(0.007) and model is None
    figure = overlap_figure.overlap(results_.SweepResult("e", [older]), tmp_path)
    assert figure is not None and figure.path.read_bytes().startswith(PNG_MAGIC)


def test_only_a_bucketed_architectures_prediction_carries_a_timeline():
    ring, server = (a_result(name, {0: layers_document()}) for name in ("RingAllReduce", "PeerToPeer"))
    assert keys.TIMELINE in ring.summary.prediction and keys.TIMELINE not in server.summary.prediction
