"""The operator's tracking Events follow what MLflow answered: one when it goes away, one when it is back."""

from ringleader.controller.experiment_runs import Availability

KEY = ("team-a", "sweep")


def test_the_first_failure_is_announced_and_repeated_failures_are_not():
    availability = Availability()
    assert availability.failed(KEY)
    assert not availability.failed(KEY)
    assert not availability.failed(KEY)


def test_an_answer_after_a_failure_is_announced_once():
    availability = Availability()
    availability.failed(KEY)
    assert availability.answered(KEY)
    assert not availability.answered(KEY)


def test_answers_without_an_outage_announce_nothing():
    assert not Availability().answered(KEY)


def test_experiments_are_told_apart():
    availability = Availability()
    assert availability.failed(KEY)
    assert availability.failed(("team-a", "other"))
    assert availability.answered(KEY)
    assert not availability.failed(("team-a", "other"))


def test_a_forgotten_experiment_starts_afresh():
    availability = Availability()
    availability.failed(KEY)
    availability.forget(KEY)
    assert not availability.answered(KEY)
    assert availability.failed(KEY)
