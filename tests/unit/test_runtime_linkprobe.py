"""runtime/linkprobe.py's choices by hand: which sizes are probed on which link, how long its trains are, and which two
ranks ping-pong."""

from __future__ import annotations

from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.contract import keys
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


def series(*milliseconds: float) -> dict:
    """A probed series of 4 KiB, 16 KiB, ... with these median times."""
    return {keys.PROBE_SAMPLES: [[4096.0 * 4 ** i, t / 1e3] for i, t in enumerate(milliseconds)],
            keys.PROBE_SUSTAINED_SECONDS: 0.3}


# An allreduce series a loaded CI machine recorded: its 64 KiB trains delayed, no line with a positive slope fits it.
NOISE = series(1.977, 1.344, 3.356, 1.493, 2.822)
GROWING = series(0.05, 0.06, 0.09, 0.2, 0.65)


def test_a_series_whose_time_does_not_grow_with_size_is_told_from_one_that_does():
    assert not linkprobe.grows(NOISE)
    assert linkprobe.grows(GROWING)


def test_a_series_lost_in_noise_is_taken_again_until_it_grows(capsys):
    taken = iter([NOISE, NOISE, GROWING])
    verdicts = []

    def agree(verdict: int) -> int:
        verdicts.append(verdict)
        return verdict

    assert linkprobe._retaken(lambda: next(taken), agree, "allreduce", deciding=True) is GROWING
    assert verdicts == [0, 0]  # the third and last attempt is kept whatever it holds: nothing more to agree on
    assert capsys.readouterr().out.count("taken again") == 2


def test_a_series_is_taken_at_most_attempts_times_and_the_last_is_kept():
    taken = []

    def take() -> dict:
        taken.append(dict(NOISE))
        return taken[-1]

    assert linkprobe._retaken(take, lambda verdict: verdict, "point-to-point", deciding=False) is taken[-1]
    assert len(taken) == linkprobe.ATTEMPTS


def test_a_series_that_grows_is_taken_once():
    taken = []
    linkprobe._retaken(lambda: taken.append(1) or GROWING, lambda verdict: verdict, "allreduce", deciding=True)
    assert taken == [1]
