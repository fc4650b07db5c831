"""runtime/linkprobe.py's choices by hand: which sizes are probed on which link, how long its trains are, and which two
ranks ping-pong."""

from __future__ import annotations

from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.runtime import linkprobe

MIB = 1024 * 1024


def test_sizes_run_down_from_the_trials_largest_message_by_fours():
    assert linkprobe.sizes(None) == [64 * 1024, 256 * 1024, MIB, 4 * MIB, 16 * MIB]  # the bound
    assert linkprobe.sizes(None, 25 * MIB) == linkprobe.sizes(None)  # the default 25 MiB bucket: bounded
    assert linkprobe.sizes(None, 2 * MIB)[-1] == 2 * MIB  # a smaller bucket is the largest message
    assert linkprobe.sizes(None, 128 * 1024)[-1] == MIB  # but not below a MiB: a loopback's latency alone
    # A network capped at 200 Mbit/s carries 2.5 MB in 100 ms: the largest, then quarters (multiples of 4), the
    # smaller three inside a 625 KB burst, the larger two beyond it.
    assert linkprobe.sizes(200e6) == [9764, 39060, 156248, 625000, 2500000]
    assert linkprobe.sizes(1e12) == linkprobe.sizes(None)  # a cap faster than the largest message takes: no change


def test_a_train_of_the_largest_size_lasts_a_quota_period_and_the_smaller_ones_a_few_milliseconds():
    probed = linkprobe.sizes(None)
    assert linkprobe.train_length(0.030, probed[-1], probed) == 4  # 4 x 30 ms >= 100 ms
    assert linkprobe.train_length(0.5, probed[-1], probed) == 1  # a message longer than a period: one
    assert linkprobe.train_length(50e-6, probed[0], probed) == 100  # 5 ms of 50 us messages
    assert linkprobe.train_length(0.0, probed[0], probed) == 1  # not timed yet


def a_trial(architecture: str, workers: int) -> trial_.Trial:
    spec = spec_.ExperimentSpec.model_validate({"architecture": architecture, "workers": {"replicas": workers}})
    return trial_.Trial(experiment="e", name="e-0", index=0, spec=spec)


def test_the_first_worker_pings_the_lowest_other_rank():
    assert linkprobe.pair(a_trial("ParameterServer", 2)) == (1, 0)  # its server, rank 0
    assert linkprobe.pair(a_trial("RingAllReduce", 3)) == (0, 1)
    assert linkprobe.pair(a_trial("PeerToPeer", 1)) is None  # one rank: nothing to time
