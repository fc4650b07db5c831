"""Which `ringleader run` directory a command takes when given the folder holding several: the newest by the start
each recorded, whatever the names."""

from __future__ import annotations

import os

from ringleader.api import experiment
from ringleader.contract import layout
from ringleader.tracking import reading


def session(output_dir, directory_name: str, experiment_name: str, *, started: float | None,
            resumed: float | None = None):
    directory = output_dir / directory_name
    directory.mkdir(parents=True)
    spec = experiment.parse({"apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment",
                             "metadata": {"name": experiment_name}, "spec": {}})
    starts = [t for t in (started, resumed) if t is not None]
    layout.Session(directory, spec, "sqlite:///mlflow.db", [f"{experiment_name}-0"], None, starts).save()
    if started is not None:
        layout.write_outcome(directory, layout.Outcome("FINISHED", started, started + 60))
    return directory


def test_the_second_of_two_experiments_run_one_after_the_other_is_taken_though_its_name_sorts_first(tmp_path):
    session(tmp_path, "zeta-20260101-120000", "zeta", started=1_700_000_000.0)
    second = session(tmp_path, "alpha-20260101-120500", "alpha", started=1_700_000_300.0)

    taken, said = reading.session_directory(tmp_path)

    assert taken == second
    assert said == f"{tmp_path} holds 2 runs; taking the newest, {second.name}"


def test_a_resumed_run_is_as_new_as_its_resumption(tmp_path):
    resumed = session(tmp_path, "b-20260101-100000", "b", started=1_700_000_000.0, resumed=1_700_000_900.0)
    session(tmp_path, "a-20260101-110000", "a", started=1_700_000_500.0)

    assert layout.find_sessions(tmp_path)[-1] == resumed


def test_a_session_that_recorded_no_start_is_placed_by_when_its_session_file_was_written(tmp_path):
    old = session(tmp_path, "z", "z", started=None)
    os.utime(old / layout.SESSION_FILE, (1_600_000_000, 1_600_000_000))
    new = session(tmp_path, "a", "a", started=1_700_000_000.0)

    assert layout.find_sessions(tmp_path) == [old, new]
