"""The bands `ringleader predict` states hold on the validation bench's recorded runs: the models predict the recorded
trials again as they are now (tests/fixtures/predict_validation.json.gz, recorded by bench/bench_predict_validation.py
--record; docs/predict-validation.md says which runs, under what load). Recorded timings are the input; nothing here
is timed."""

from __future__ import annotations

import pathlib

import pytest

from ringleader.models import prediction_validation, validation
from ringleader.models.prediction_serving import Cores

RECORDED = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "predict_validation.json.gz"


@pytest.fixture(scope="module")
def pairs() -> list[prediction_validation.Pair]:
    return prediction_validation.recorded_pairs(prediction_validation.read(RECORDED))


def test_the_published_bands_are_what_the_recorded_runs_fit(pairs):
    assert prediction_validation.bands(pairs) == validation.BANDS


def test_a_band_holds_nine_in_ten_recorded_pairs_it_was_not_fitted_on(pairs):
    assert len(pairs) >= 18
    for group in prediction_validation.groups(pairs):  # one architecture, on one machine (alone, busy cores beside)
        for held_out in (prediction_validation.held_out, prediction_validation.held_out_trials):
            covered, total = held_out(group)
            assert covered >= validation.COVERAGE * total, (
                f"{group[0].architecture} beside {group[0].busy_cores} busy cores, {held_out.__name__}: "
                f"{covered} of {total} pairs inside their band")


def test_a_trial_takes_the_band_of_its_machines_load_and_every_run_of_the_bench_its_own(pairs):
    runs = prediction_validation.read(RECORDED)
    assert {run["burners"] for run in runs} == {0, 2}  # the bench at two loads
    for pair in pairs:
        band, _ = validation.band(pair.kind, pair.architecture, pair.workers, "BSP",
                                  Cores(threads_per_cpu=pair.threads_per_cpu, load_per_cpu=pair.load_per_cpu))
        assert band is not None and band.busy_cores == pair.busy_cores, (pair.source, pair.load_per_cpu)


def test_peer_to_peer_at_3_workers_predicted_from_the_ring_and_the_parameter_server_keeps_to_its_band(pairs):
    """The case the serving-work pricing was built for: alone or beside 2 busy cores, 9 in 10 such pairs inside the
    band of their machine, none beyond its worst, none over-predicted."""
    chosen = [p for p in pairs if p.architecture == "p2p" and p.workers == 3 and not p.own]
    assert {p.busy_cores for p in chosen} == {0, 2}
    inside = 0
    for pair in chosen:
        band, _ = validation.band(pair.kind, "p2p", 3, "BSP", Cores(load_per_cpu=pair.load_per_cpu))
        assert band is not None and -band.worst <= pair.error <= 0, f"{pair.source}: {pair.error:+.2%}"
        inside += abs(pair.error) <= band.within
    assert inside >= validation.COVERAGE * len(chosen), f"{inside} of {len(chosen)} inside"


def test_a_recorded_trial_keeps_only_what_the_models_read(pairs):
    runs = prediction_validation.read(RECORDED)
    for run in runs:
        assert run["load"] is not None and run["command"]  # which run, under what load: docs/predict-validation.md
        for trial in run["trials"]:
            fields = {field for records in trial["records"].values() for record in records for field in record}
            assert fields <= set(prediction_validation.KEPT_FIELDS)


def on(machine: str, errors: list[float]) -> list[prediction_validation.Pair]:
    return [prediction_validation.Pair(source=f"{machine}/{i}", target=f"{machine}/{i}", architecture="ring", workers=2,
                                       predicted_seconds=1.0 + error, measured_seconds=1.0, kind="emulated",
                                       threads_per_cpu=1.0, load_per_cpu=0.5, machine=machine)
            for i, error in enumerate(errors)]


def test_a_band_is_no_narrower_than_any_machines_own_and_says_how_it_held_on_the_machine_it_was_not_fitted_on():
    quiet = on("quiet", [0.001 * i - 0.0002 for i in range(1, 13)])  # its own band: the 12th of 12, 1.2 %
    noisy = on("noisy", [0.003 * i - 0.0002 for i in range(1, 13)])  # 3.6 %
    [band] = prediction_validation.bands(quiet + noisy, labels=("ring",))["emulated", "ring"]
    assert band.within == 0.036 and band.machines == 2  # both together fit 3.3 %: narrower than the noisy machine's
    # The quiet machine's 12 pairs all inside the noisy one's band; of the noisy one's, only 4 inside the quiet one's.
    assert band.held_out == (16, 24)
    assert prediction_validation.held_out_machines(quiet + noisy) == {"noisy": (4, 12), "quiet": (12, 12)}
    assert band.said() == "±3.6% in 9 of 10 (median 1.0%; 16 of 24 held out by machine)"


def test_a_band_of_one_machine_states_no_held_out_by_machine():
    [band] = prediction_validation.bands(on("only", [0.001 * i for i in range(1, 13)]), labels=("ring",))[
        "emulated", "ring"]
    assert band.machines == 1 and band.held_out is None and "held out" not in band.said()
