"""spec.network.bandwidth on a parameter-server trial: every byte a worker exchanges costs at least 8/bandwidth seconds."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.integration

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
