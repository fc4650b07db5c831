"""spec.network.bandwidth on parameter-server and peer-to-peer trials: every byte exchanged costs at least 8/bandwidth
seconds."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timing]

BITS_PER_SECOND = 100_000_000


def test_a_capped_link_makes_each_exchange_last_at_least_its_bytes_over_the_bandwidth(make_trial, run_trial, tmp_path):
    trial = make_trial({"architecture": "ParameterServer", "workers": {"replicas": 1}, "sync": {"paradigm": "ASP"},
                        "network": {"bandwidth": "100Mbit"},
                        "model": {"iterations": 5, "warmupIterations": 1}})
    result = run_trial(trial, tmp_path, timeout=90)
    assert result.ok, result.explain()
    worker = trial.worker_slots()[0].rank
    for record in result.iterations(worker):
        exchanged = record["bytes/sent"] + record["bytes/received"]  # ~0.93 MB: about 74 ms at 100 Mbit/s
        emulated = 8 * exchanged / BITS_PER_SECOND
        assert record["time/comm"] + record["time/wait"] >= 0.95 * emulated, (record, emulated)
    assert result.iterations(worker)[-1]["time/comm"] > 0.05


def test_a_capped_link_gives_two_peers_no_less_than_the_peer_to_peer_model(make_trial, run_trial, tmp_path):
    # Two peers: a push of M/2 bytes crosses one way, the owner's reply M/2 back, each at the link's rate, so no
    # step can take less than the model's 2(N-1)/N * M/B. A receiving side that delivered a message before its
    # sender's S/B had passed (a wrong clock, a turn started too early) would let a step take about half that.
    from ringleader.models import cost_models
    from ringleader.runtime import models

    trial = make_trial({"architecture": "PeerToPeer", "workers": {"replicas": 2}, "sync": {"paradigm": "BSP"},
                        "network": {"bandwidth": "100Mbit"},
                        "model": {"iterations": 6, "warmupIterations": 1}})
    result = run_trial(trial, tmp_path, timeout=90)
    assert result.ok, result.explain()
    model_bytes = models.parameter_bytes(models.build(trial.spec.model, trial.spec.data.synthetic))
    least = cost_models.peer_to_peer_comm_seconds(2, model_bytes, cost_models.Nic(BITS_PER_SECOND))
    assert least > 0.03  # the default mlp, ~0.47 MB: ~37 ms at 100 Mbit/s
    for slot in trial.worker_slots():
        for record in result.iterations(slot.rank):
            assert record["time/comm"] + record["time/wait"] >= 0.95 * least, (slot.rank, record, least)
