"""analysis/whatif.py against hand-computed cases: fusion, the FIFO allreduce channel, overhead and SF."""

import json

import pytest
import torch

from ringleader.analysis import whatif
from ringleader.contract import keys, records
from ringleader.runtime import timing

MIB = 1024 * 1024


def gradient(name, size, ready):
    return whatif.Gradient(name, float(size), float(ready))


def test_allreduce_cost_by_hand():
    # 2*(8*S*(N-1)/N)/(bw*c) = 2*(8e6*3/4)/1e9 = 12 ms
    assert whatif.allreduce_seconds(1e6, 4, 1e9) == pytest.approx(0.012)
    assert whatif.allreduce_seconds(1e6, 4, 1e9, compression=2) == pytest.approx(0.006)
    # plus (N-1)*add(S/N) = 3 * 1e-9 * 250_000 = 0.75 ms
    assert whatif.allreduce_seconds(1e6, 4, 1e9, add=whatif.linear_add(1e-9)) == pytest.approx(0.01275)
    assert whatif.allreduce_seconds(1e6, 1, 1e9) == 0.0


def test_fuse_closes_a_bucket_after_the_window():
    ready = [0.0, 0.25, 0.75, 1.5, 2.25, 2.5]
    buckets = whatif.fuse([gradient(f"g{i}", 1, t) for i, t in enumerate(ready)], window_seconds=1.0)
    # {0, .25, .75} (1.5 is 1.5 after 0); {1.5, 2.25} (2.5 is exactly 1.0 after 1.5); {2.5}
    assert [(b.gradients, b.ready_seconds, b.size_bytes) for b in buckets] == [(3, 0.75, 3), (2, 2.25, 2), (1, 2.5, 1)]


def test_fuse_never_grows_a_bucket_past_the_cap_but_a_big_gradient_goes_alone():
    buckets = whatif.fuse([gradient("a", 40 * MIB, 0), gradient("b", 30 * MIB, 0), gradient("c", 10 * MIB, 0),
                           gradient("d", 100 * MIB, 0)])
    assert [b.size_bytes / MIB for b in buckets] == [40, 40, 100]
    assert [b.gradients for b in buckets] == [1, 2, 1]


def test_fuse_orders_by_ready_time():
    buckets = whatif.fuse([gradient("late", 2, 1.0), gradient("early", 1, 0.0)], window_seconds=0.5)
    assert [b.size_bytes for b in buckets] == [1, 2]


# A backward of 20 ms: A (1 MB) at 0 ms, B (1 MB) at 10 ms, C (2 MB) at 12 ms; with a 5 ms window the buckets
# are [A] ready at 0 and [B, C] (3 MB) ready at 12 ms. N = 2: a bucket of S bytes costs 8*S/bw.
PROFILE = whatif.BackwardProfile((gradient("A", 1e6, 0.0), gradient("B", 1e6, 0.010), gradient("C", 2e6, 0.012)),
                                 backward_seconds=0.020)


def test_simulate_bucket_waits_for_its_gradients():
    # 1 Gbit/s: [A] 0..8 ms; [B, C] starts at max(8, 12) = 12 ms, lasts 24 ms, ends at 36 ms.
    result = whatif.simulate(PROFILE, 2, 1e9, batch_seconds=0.048)
    assert [b.size_bytes for b in result.buckets] == [1e6, 3e6]
    assert result.allreduce_starts == pytest.approx((0.0, 0.012))
    assert result.allreduce_ends == pytest.approx((0.008, 0.036))
    assert result.overhead_seconds == pytest.approx(0.016)
    assert result.scaling_factor == pytest.approx(0.048 / 0.064)


def test_simulate_bucket_waits_for_the_channel():
    # 100 Mbit/s: [A] 0..80 ms; [B, C] starts at max(80, 12) = 80 ms, lasts 240 ms: overhead 320 - 20 ms.
    result = whatif.simulate(PROFILE, 2, 1e8)
    assert result.allreduce_starts == pytest.approx((0.0, 0.080))
    assert result.overhead_seconds == pytest.approx(0.300)
    assert result.scaling_factor is None


def test_simulate_fully_hidden_communication_has_no_overhead():
    result = whatif.simulate(PROFILE, 2, 1e11, batch_seconds=0.048)
    assert result.allreduce_ends[-1] < PROFILE.backward_seconds
    assert result.overhead_seconds == 0.0 and result.scaling_factor == 1.0


def test_compression_divides_the_transfer():
    # c = 4 at 100 Mbit/s: [A] 0..20 ms; [B, C] from 20 ms for 60 ms: overhead 80 - 20 = 60 ms.
    assert whatif.simulate(PROFILE, 2, 1e8, compression=4).overhead_seconds == pytest.approx(0.060)


def test_scaling_factor():
    assert whatif.scaling_factor(0.1, 0.0) == 1.0
    assert whatif.scaling_factor(0.1, 0.1) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        whatif.scaling_factor(0.0, 0.1)


def test_sweep_covers_every_bandwidth_and_compression_bandwidth_major():
    results = whatif.sweep(PROFILE, 8, batch_seconds=0.048)
    assert len(results) == len(whatif.BANDWIDTHS_GBIT) * len(whatif.COMPRESSIONS)
    assert [r.bandwidth_bits_per_second for r in results[:4]] == [1e9] * 4
    assert [r.compression for r in results[:4]] == list(whatif.COMPRESSIONS)
    uncompressed = [r.scaling_factor for r in results if r.compression == 1]
    assert uncompressed == sorted(uncompressed)  # a faster link never hurts


LAYERS = {
    "rank": 0,
    "clock": "seconds from the iteration's start, host clock when the gradient hook ran",
    "parameters": [{"name": "w1", "bytes": 400}, {"name": "w2", "bytes": 40}, {"name": "unused", "bytes": 4}],
    "iterations": [
        {"step": 5, "backwardStart": 0.1, "backwardEnd": 0.2, "ready": {"w2": 0.12, "w1": 0.18}},
        {"step": 6, "backwardStart": 1.0, "backwardEnd": 1.2, "ready": {"w2": 1.04, "w1": 1.10}},
    ],
}


def test_profile_from_layers_takes_median_offsets_from_backward_start():
    profile = whatif.profile_from_layers(LAYERS)
    assert [g.name for g in profile.gradients] == ["w2", "w1"]  # ready order; "unused" never had a gradient
    assert [g.ready_seconds for g in profile.gradients] == pytest.approx([0.03, 0.09])
    assert profile.backward_seconds == pytest.approx(0.15)
    assert profile.total_bytes == 440


def test_profile_from_layers_without_traced_iterations_says_why():
    with pytest.raises(ValueError, match="no traced iterations"):
        whatif.profile_from_layers({**LAYERS, "iterations": []})


def test_read_rank_from_the_recorders_files(tmp_path):
    recorder = records.RankRecorder(tmp_path, "t-0", 0, warmup_iterations=1)
    phases = {keys.TIME_DATA: 0.001, keys.TIME_FORWARD: 0.002, keys.TIME_BACKWARD: 0.004,
              keys.TIME_UPDATE: 0.001, keys.TIME_COMM: 0.5}
    recorder.log_iteration(0, {**phases, keys.TIME_FORWARD: 9.0})  # warm-up: left out
    recorder.log_iteration(1, phases)
    recorder.log_iteration(2, {**phases, keys.TIME_BACKWARD: 0.006})
    recorder.write_layers(LAYERS)
    recorder.close()
    profile, batch = whatif.read_rank(recorder.directory)
    assert len(profile.gradients) == 2
    assert batch == pytest.approx(0.009)  # mean of 0.008 and 0.010: communication is not compute


def test_profile_of_a_real_timer_lists_gradients_in_backward_order():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    timer = timing.IterationTimer(0, torch.device("cpu"), trace_steps=range(0, 2))
    timer.watch_layers(model)
    for step in range(2):
        timer.begin(step)
        loss = model(torch.randn(5, 4)).sum()
        with timer.phase(keys.TIME_BACKWARD):
            loss.backward()
        timer.finish()
    profile = whatif.profile_from_layers(json.loads(json.dumps(timer.layers())))
    assert profile.total_bytes == 4 * (4 * 3 + 3 + 3 * 2 + 2)
    assert {g.name for g in profile.gradients[:2]} == {"2.weight", "2.bias"}  # the last layer's come first
    assert all(0 <= g.ready_seconds <= profile.backward_seconds for g in profile.gradients)
