"""runtime/linkprobe.py's choices by hand: which sizes are probed on which link, and which two ranks ping-pong."""

from __future__ import annotations

from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.runtime import linkprobe

MIB = 1024 * 1024


def test_sizes_run_down_from_the_largest_by_fours():
    assert linkprobe.sizes(None) == [16 * 1024, 64 * 1024, 256 * 1024, MIB, 4 * MIB]
    # A network capped at 200 Mbit/s carries 625 000 bytes in 25 ms: the largest, then quarters (multiples of 4).
    assert linkprobe.sizes(200e6) == [2440, 9764, 39060, 156248, 625000]
    assert linkprobe.sizes(1e12) == linkprobe.sizes(None)  # a cap faster than the largest message takes: no change


def a_trial(architecture: str, workers: int) -> trial_.Trial:
    spec = spec_.ExperimentSpec.model_validate({"architecture": architecture, "workers": {"replicas": workers}})
    return trial_.Trial(experiment="e", name="e-0", index=0, spec=spec)


def test_the_first_worker_pings_the_lowest_other_rank():
    assert linkprobe.pair(a_trial("ParameterServer", 2)) == (1, 0)  # its server, rank 0
    assert linkprobe.pair(a_trial("RingAllReduce", 3)) == (0, 1)
    assert linkprobe.pair(a_trial("PeerToPeer", 1)) is None  # one rank: nothing to time
