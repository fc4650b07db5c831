"""A dead or hung worker ends a parameter-server or peer-to-peer trial promptly, with the rank named."""

from __future__ import annotations

import os
import signal
import time

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timing]

heavy = pytest.mark.skipif(not os.environ.get("RINGLEADER_HEAVY_TESTS"),
                           reason="heavy: set RINGLEADER_HEAVY_TESTS=1")
PEER_TIMEOUT_SECONDS = 8.0


def endless(architecture: str) -> dict:
    """Two workers under BSP that would train far longer than any test waits."""
    return {"architecture": architecture, "workers": {"replicas": 2}, "sync": {"paradigm": "BSP"},
            "model": {"iterations": 100_000}}


def start_and_hit(make_trial, start_trial, tmp_path, architecture: str, victim_index: int, sig: int):
    trial = make_trial(endless(architecture))
    running = start_trial(trial, tmp_path, peer_timeout=PEER_TIMEOUT_SECONDS)
    victim = trial.worker_slots()[victim_index].rank
    running.wait_until(lambda: running.iterations_written(victim) >= 3, timeout=90,
                       what=f"rank {victim} training 3 iterations")
    running.kill(victim, sig)
    return trial, running, victim, time.monotonic()


def test_a_killed_worker_makes_the_parameter_server_exit_non_zero_naming_it(make_trial, start_trial, tmp_path):
    trial, running, victim, hit_at = start_and_hit(make_trial, start_trial, tmp_path, "ParameterServer", 1,
                                                  signal.SIGKILL)
    server = running.processes[0]
    server.wait(timeout=PEER_TIMEOUT_SECONDS)  # a closed socket is noticed at once, well within the timeout
    noticed_after = time.monotonic() - hit_at
    result = running.wait(timeout=30)
    assert result.returncodes[0] != 0
    assert f"lost worker rank {victim}" in result.stderr(0), result.explain()
    survivor = trial.worker_slots()[0].rank
    assert result.returncodes[survivor] != 0, "the other worker must not be left waiting for its OK"
    assert noticed_after < PEER_TIMEOUT_SECONDS


@heavy
def test_a_hung_worker_makes_the_parameter_server_exit_after_the_timeout_naming_it(make_trial, start_trial,
                                                                                   tmp_path):
    trial, running, victim, hit_at = start_and_hit(make_trial, start_trial, tmp_path, "ParameterServer", 1,
                                                  signal.SIGSTOP)
    running.processes[0].wait(timeout=3 * PEER_TIMEOUT_SECONDS)
    noticed_after = time.monotonic() - hit_at
    running.kill(victim)  # a stopped process never exits by itself
    result = running.wait(timeout=3 * PEER_TIMEOUT_SECONDS)
    assert result.returncodes[0] != 0
    assert f"waiting on worker rank(s) {victim}," in result.stderr(0), result.explain()
    assert PEER_TIMEOUT_SECONDS <= noticed_after < 2 * PEER_TIMEOUT_SECONDS


@heavy
def test_a_killed_peer_makes_every_other_peer_exit_non_zero_naming_it(make_trial, start_trial, tmp_path):
    trial, running, victim, hit_at = start_and_hit(make_trial, start_trial, tmp_path, "PeerToPeer", 1,
                                                  signal.SIGKILL)
    survivor = trial.worker_slots()[0].rank
    running.processes[survivor].wait(timeout=PEER_TIMEOUT_SECONDS)
    result = running.wait(timeout=30)
    assert result.returncodes[survivor] != 0
    assert f"rank {victim}" in result.stderr(survivor), result.explain()
