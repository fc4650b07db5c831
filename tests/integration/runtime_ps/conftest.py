"""Fixtures of the parameter-server and peer-to-peer runtime tests: straggler trials, each run once per session.

`straggler_run(architecture, paradigm, servers=1)` returns the finished TrialRun of
ps_trials.straggler_spec; several tests read the same run (loss, bounds, wall time), so each
combination trains once per test session.
"""

from __future__ import annotations

import pytest

import ps_trials

_finished: dict[tuple, object] = {}


@pytest.fixture
def straggler_run(make_trial, run_trial, tmp_path_factory):
    def run(architecture: str, paradigm: str, servers: int = 1):
        key = (architecture, paradigm, servers)
        if key not in _finished:
            trial = make_trial(ps_trials.straggler_spec(architecture, paradigm, servers),
                               name=f"straggler-{paradigm.lower()}-0")
            directory = tmp_path_factory.mktemp(f"{architecture}-{servers}-{paradigm}")
            _finished[key] = run_trial(trial, directory, timeout=ps_trials.TRIAL_TIMEOUT_SECONDS)
        result = _finished[key]
        assert result.ok, result.explain()
        return result

    return run
