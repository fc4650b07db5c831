"""What `ringleader predict` says of a trial it cannot predict: the real cause, once, with the command that fixes it."""

from __future__ import annotations

import argparse

import sweeps
from ringleader.commands import predict, sources


def predicted(monkeypatch, capsys, found: sources.Found) -> tuple[int, str]:
    monkeypatch.setattr(sources, "resolve", lambda *_, **__: found)
    parser = argparse.ArgumentParser()
    predict.add_arguments(parser)
    code = predict.run(parser.parse_args(["ringleader-runs/"]))
    return code, capsys.readouterr().err


def test_a_trial_killed_before_warm_up_is_said_to_be_with_the_command_that_resumes_it(monkeypatch, capsys, tmp_path):
    [trial] = sweeps.trials({"architecture": "RingAllReduce"})
    run = tmp_path / "quick-20261201-120000"
    code, err = predicted(monkeypatch, capsys,
                          sources.Found([sweeps.result_of(trial, status="KILLED")], str(run), False))
    assert code == 1
    assert err.splitlines() == [
        f"ringleader predict: trial rep-0: the trial is KILLED: it ended before any worker traced its backward (after "
        f"warm-up), so there is no profile to predict from; resume it: ringleader run --resume {run}",
        f"ringleader predict: {run}: no trial could be predicted"]


def test_a_finished_trial_without_a_profile_names_the_trial_once(monkeypatch, capsys, tmp_path):
    [trial] = sweeps.trials({"architecture": "RingAllReduce"})
    code, err = predicted(monkeypatch, capsys, sources.Found([sweeps.result_of(trial)], str(tmp_path), False))
    assert code == 1
    first = err.splitlines()[0]
    assert (first.startswith("ringleader predict: trial rep-0: no worker rank has a layers.json")
            and first.count("rep-0") == 1)
