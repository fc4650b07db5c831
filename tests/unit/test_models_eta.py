"""The ETA: a trial's pace from the progress seen, trials not run yet from the finished ones, a sweep's end."""

import pytest

from ringleader import api
from ringleader.models import eta
from ringleader.api import constants
from ringleader.contract import keys


def progress(iterations, seconds_each, every=10, start=0.0, first=0):
    """Samples as a progress reader sees them: one every `every` iterations, each iteration `seconds_each`
    (a function of the iteration, from 0)."""
    samples, clock = [], start
    for done in range(first, iterations):
        clock += seconds_each(done)
        if (done + 1) % every == 0:
            samples.append((clock, done + 1))
    return samples


def trial(name="q-0", architecture="ParameterServer", iterations=200, **progress_):
    label = {"ParameterServer": "1ps", "PeerToPeer": "p2p", "RingAllReduce": "ring"}[architecture]
    return eta.UnfinishedTrial(name, {"architecture": architecture}, label, iterations, **progress_)


def finished(architecture="ParameterServer", iteration_seconds=0.05, seconds=30.0, iterations=200, predicted=None,
             **parameters):
    return eta.Finished({"architecture": architecture, **parameters}, iterations, iteration_seconds, seconds,
                        predicted or {})


def test_the_pace_is_the_mean_over_the_last_tenth_of_the_iterations_so_warm_up_drops_out():
    # 20 slow warm-up iterations (0.2 s), then 0.05 s each: 120 iterations seen of 200.
    seen = progress(120, lambda i: 0.2 if i < 20 else 0.05)[:12]
    assert eta.seconds_per_iteration(seen, 200) == pytest.approx(0.05)
    assert [done for _, done in eta.recent(seen, 200)] == [100, 110, 120]
    # Early on, all there is: the mean since the first sample, warm-up included.
    assert eta.seconds_per_iteration(seen[:2], 200) == pytest.approx(0.2)
    assert eta.seconds_per_iteration(seen[:1], 200) is None
    assert eta.seconds_per_iteration([(1.0, 10), (2.0, 10)], 200) is None  # no iteration between them


def test_a_running_trial_ends_after_its_remaining_iterations_at_its_recent_pace():
    seen = progress(200, lambda i: 0.05)[:10]  # 100 of 200 done at t=5
    assert eta.trial_end(trial(started=-20.0, samples=seen), []) == pytest.approx(5.0 + 100 * 0.05)
    # One progress line so far: its own iteration time paces the rest.
    assert eta.trial_end(trial(started=0.0, samples=[(3.0, 20)], iteration_seconds=0.1), []) == pytest.approx(21.0)
    # Not even that: nothing tells, until something finished predicts it.
    assert eta.trial_end(trial(started=0.0, samples=[(3.0, 20)]), []) is None
    assert eta.trial_end(trial(started=0.0, samples=[(3.0, 20)]),
                         [finished("PeerToPeer", predicted={"1ps": 0.2})]) == pytest.approx(3.0 + 180 * 0.2)


def test_a_trial_not_run_yet_is_priced_by_its_repetitions_else_by_a_prediction_for_its_architecture():
    repeated = eta.UnfinishedTrial("q-2", {"architecture": "ParameterServer", "repetition": "2"}, "1ps", 200)
    done = [eta.Finished({"architecture": "ParameterServer", "repetition": "0"}, 200, 0.04, 20.0, {"1ps": 0.9}),
            eta.Finished({"architecture": "ParameterServer", "repetition": "1"}, 200, 0.06, 20.0, {})]
    assert eta.predicted_seconds(repeated, done) == pytest.approx(0.05)  # measured beats predicted
    ring = trial("q-1", "RingAllReduce")
    by_ps = finished("ParameterServer", predicted={"1ps": 0.05, "4ps": 0.03, "p2p": 0.06, "ring": 0.02})
    assert eta.predicted_seconds(ring, [by_ps]) == 0.02
    # A prediction is for the same workers, paradigm and model: a trial differing in more is not priced by it.
    other_workers = finished("ParameterServer", predicted={"ring": 0.02}, workers="4")
    assert eta.predicted_seconds(eta.UnfinishedTrial("q-1", {"architecture": "RingAllReduce", "workers": "2"}, "ring",
                                                     200),
                                 [other_workers]) is None
    assert eta.predicted_seconds(ring, [finished("ParameterServer")]) is None  # it made no prediction


def test_start_up_is_what_finished_trials_spent_beyond_their_iterations():
    assert finished(iteration_seconds=0.05, seconds=30.0, iterations=200).startup_seconds == pytest.approx(20.0)
    assert finished(iteration_seconds=0.05, seconds=5.0, iterations=200).startup_seconds == 0.0  # never below 0
    assert eta.startup_seconds([finished(seconds=30.0), finished(seconds=40.0), finished(seconds=None)]) == 25.0
    assert eta.startup_seconds([]) is None


def test_a_sweep_ends_after_the_running_trial_and_each_trial_still_to_run_in_turn():
    # q-0 (PS) finished: 0.05 s x 200 in 30 s, so 20 s of start-up; it predicted the ring and P2P.
    done = [finished("ParameterServer", 0.05, 30.0, predicted={"p2p": 0.08, "ring": 0.04})]
    running = trial("q-1", "PeerToPeer", started=100.0, samples=progress(200, lambda i: 0.1, start=110.0)[:5])
    waiting = trial("q-2", "RingAllReduce")
    running_end = 110.0 + 50 * 0.1 + 150 * 0.1
    assert eta.trial_end(running, done) == pytest.approx(running_end)
    assert eta.sweep_end([running, waiting], done) == (pytest.approx(running_end + 20.0 + 200 * 0.04), None)
    # Starting, with no progress yet: start time + start-up + iterations x predicted.
    starting = trial("q-2", "RingAllReduce", started=500.0)
    assert eta.sweep_end([starting], done) == (pytest.approx(500.0 + 20.0 + 8.0), None)


def test_trials_run_side_by_side_take_the_place_that_frees_first():
    done = [finished("ParameterServer", 0.05, 30.0, predicted={"p2p": 0.1, "ring": 0.1})]  # 20 s start-up
    fast = trial("q-1", "PeerToPeer", samples=[(0.0, 0), (10.0, 100)])  # ends at 20
    slow = trial("q-2", "RingAllReduce", samples=[(0.0, 0), (50.0, 100)])  # ends at 100
    queued = [trial("q-3", "PeerToPeer"), trial("q-4", "RingAllReduce")]  # 20 + 200 x 0.1 = 40 s each
    # q-3 follows q-1 (ends at 60), q-4 follows q-3 (100), not q-2 (140).
    assert eta.sweep_end([fast, slow, *queued], done) == (pytest.approx(100.0), None)


def test_what_is_unknown_is_said():
    assert eta.sweep_end([trial()], []) == (None, "ETA unknown until a trial starts")
    assert eta.sweep_end([trial(started=0.0)], []) == (None, eta.UNKNOWN)
    running, ring = trial(started=0.0, samples=[(1.0, 10), (2.0, 20)]), trial("q-1", "RingAllReduce")
    assert eta.sweep_end([running, ring], []) == (None, "ETA unknown until trial q-1 runs")


def test_the_eta_reads_as_a_duration_and_says_when_it_is_an_upper_bound():
    assert [eta.duration_text(s) for s in (-3, 0, 45.4, 80, 3599, 7500)] == ["0s", "0s", "45s", "1m20s", "59m59s",
                                                                           "2h05m"]
    assert eta.describe(80, upper_bound=False) == "ETA 1m20s"
    assert eta.describe(80, upper_bound=True) == "ETA at most 1m20s"


def test_the_predictions_come_from_the_summarys_prediction_document_and_anything_else_is_ignored():
    summary = {keys.PREDICTION: {keys.ARCHITECTURES: {"1ps": {keys.ITERATION_SECONDS: 0.05, keys.COMM_SECONDS: 0.01},
                                                      "ring": {keys.ITERATION_SECONDS: 0.02}}}}
    assert eta.predictions(summary[keys.PREDICTION]) == {"1ps": 0.05, "ring": 0.02}
    for odd in ({}, {keys.PREDICTION: None}, {keys.PREDICTION: []}, {keys.PREDICTION: {keys.ARCHITECTURES: [1]}},
                {keys.PREDICTION: {keys.ARCHITECTURES: {"ring": {keys.ITERATION_SECONDS: "fast"}}}},
                {keys.PREDICTION: {keys.ARCHITECTURES: {"ring": {keys.ITERATION_SECONDS: float("inf")}}}},
                {keys.PREDICTION: {keys.ARCHITECTURES: {"ring": {keys.ITERATION_SECONDS: True}}}}):
        assert eta.predictions(odd.get(keys.PREDICTION)) == {}


def test_a_trial_is_planned_with_its_parameters_architecture_label_and_iterations():
    dte = api.parse({"apiVersion": constants.API_VERSION, "kind": constants.KIND, "metadata": {"name": "q"},
                     "spec": {"data": {"format": "Digits"},
                              "model": {"iterations": 60, "evaluation": {"everyIterations": 10},
                                        "target": {"loss": 0.5, "onReached": "Stop"}},
                              "sweep": {"matrix": {"architecture": ["ParameterServer", "RingAllReduce"]}}}})
    first, second = api.expand(dte).trials
    assert eta.planned(second) == eta.UnfinishedTrial(second.name, {"architecture": "RingAllReduce"}, "ring", 60)
    assert eta.planned(first).label == "1ps"
    assert eta.upper_bound(first.spec) and not eta.upper_bound(api.expand(api.parse({
        "apiVersion": constants.API_VERSION, "kind": constants.KIND, "metadata": {"name": "q"},
        "spec": {}})).trials[0].spec)
    assert eta.iterations_run(60, True, 25) == 25 and eta.iterations_run(60, False, 25) == 60
