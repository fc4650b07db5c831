"""analysis/whatif.py against hand-computed cases: the FIFO allreduce channel, overhead and SF (the fusion rule
itself: test_analysis_overlap.py)."""

import json

import pytest
import torch

from ringleader.analysis import addcost, overlap, whatif
from ringleader.analysis import profile as profile_
from ringleader.contract import keys, records
from ringleader.runtime import timing

MIB = 1024 * 1024


def gradient(name, size, ready):
    return profile_.Gradient(name, float(size), float(ready))


def test_allreduce_cost_by_hand():
    # 2*(8*S*(N-1)/N)/(bw*c) = 2*(8e6*3/4)/1e9 = 12 ms
    assert whatif.allreduce_seconds(1e6, 4, 1e9) == pytest.approx(0.012)
    assert whatif.allreduce_seconds(1e6, 4, 1e9, compression=2) == pytest.approx(0.006)
    # plus (N-1)*add(S/N) = 3 * 1e-9 * 250_000 = 0.75 ms
    assert whatif.allreduce_seconds(1e6, 4, 1e9, add=whatif.linear_add(1e-9)) == pytest.approx(0.01275)
    assert whatif.allreduce_seconds(1e6, 1, 1e9) == 0.0


# A backward of 20 ms: A (1 MB) at 0 ms, B (1 MB) at 10 ms, C (2 MB) at 12 ms; with a 5 ms window the buckets
# are [A] ready at 0 and [B, C] (3 MB) ready at 12 ms. N = 2: a bucket of S bytes costs 8*S/bw.
PROFILE = profile_.Profile((gradient("A", 1e6, 0.0), gradient("B", 1e6, 0.010), gradient("C", 2e6, 0.012)),
                           backward_seconds=0.020)


def test_simulate_bucket_waits_for_its_gradients():
    # 1 Gbit/s: [A] 0..8 ms; [B, C] starts at max(8, 12) = 12 ms, lasts 24 ms, ends at 36 ms.
    result = whatif.simulate(PROFILE, 2, 1e9, batch_seconds=0.048)
    assert [b.size_bytes for b in result.buckets] == [1e6, 3e6]
    assert result.replay.starts == pytest.approx((0.0, 0.012))
    assert result.replay.ends == pytest.approx((0.008, 0.036))
    assert result.overhead_seconds == pytest.approx(0.016)
    assert result.scaling_factor == pytest.approx(0.048 / 0.064)


def test_simulate_bucket_waits_for_the_channel():
    # 100 Mbit/s: [A] 0..80 ms; [B, C] starts at max(80, 12) = 80 ms, lasts 240 ms: overhead 320 - 20 ms.
    result = whatif.simulate(PROFILE, 2, 1e8)
    assert result.replay.starts == pytest.approx((0.0, 0.080))
    assert result.overhead_seconds == pytest.approx(0.300)
    assert result.scaling_factor is None


def test_simulate_fully_hidden_communication_has_no_overhead():
    result = whatif.simulate(PROFILE, 2, 1e11, batch_seconds=0.048)
    assert result.replay.ends[-1] < PROFILE.backward_seconds
    assert result.overhead_seconds == 0.0 and result.scaling_factor == 1.0


def test_compression_divides_the_transfer():
    # c = 4 at 100 Mbit/s: [A] 0..20 ms; [B, C] from 20 ms for 60 ms: overhead 80 - 20 = 60 ms.
    assert whatif.simulate(PROFILE, 2, 1e8, compression=4).overhead_seconds == pytest.approx(0.060)


def test_a_codecs_cost_is_paid_only_when_compressing():
    # c = 4 at 100 Mbit/s: 60 ms of overhead (above), plus 5 ms of encoding and decoding; none at c = 1.
    compressed = whatif.simulate(PROFILE, 2, 1e8, compression=4, batch_seconds=0.048, codec_seconds=0.005)
    assert compressed.overhead_seconds == pytest.approx(0.065)
    assert compressed.scaling_factor == pytest.approx(0.048 / 0.113)
    assert whatif.simulate(PROFILE, 2, 1e8, codec_seconds=0.005).overhead_seconds == pytest.approx(0.300)
    assert [r.overhead_seconds for r in whatif.sweep(PROFILE, 2, 0.048, [1e8], [1, 4], codec_seconds=0.005)] == \
        pytest.approx([0.300, 0.065])


def test_the_measured_compression_is_bytes_uncompressed_over_sent_after_warmup():
    lines = [{"role": "worker", "warmup": True, keys.BYTES_SENT: 10.0, keys.BYTES_UNCOMPRESSED: 10.0,
              keys.TIME_CODEC: 1.0}] + [
        {"role": "worker", "warmup": False, keys.BYTES_SENT: 250.0, keys.BYTES_UNCOMPRESSED: 1000.0,
         keys.TIME_CODEC: codec} for codec in (0.002, 0.004)]
    measured = whatif.measured_compression(lines)
    assert measured.compression == pytest.approx(4.0) and measured.codec_seconds == pytest.approx(0.003)
    plain = [{**line, keys.BYTES_UNCOMPRESSED: line[keys.BYTES_SENT]} for line in lines]
    assert whatif.measured_compression(plain) is None
    assert whatif.measured_compression([{"role": "worker", keys.BYTES_SENT: 5.0}]) is None  # an older record


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


def test_read_rank_from_the_recorders_files(tmp_path):
    recorder = records.RankRecorder(tmp_path, "t-0", 0, warmup_iterations=1)
    phases = {keys.TIME_DATA: 0.001, keys.TIME_FORWARD: 0.002, keys.TIME_BACKWARD: 0.004,
              keys.TIME_UPDATE: 0.001, keys.TIME_COMM: 0.5, keys.TIME_WAIT: 0.1, keys.TIME_ITERATION: 0.609}
    recorder.log_iteration(0, {**phases, keys.TIME_ITERATION: 9.0})  # warm-up: left out
    recorder.log_iteration(1, phases)
    recorder.log_iteration(2, {**phases, keys.TIME_BACKWARD: 0.006, keys.TIME_ITERATION: 0.611})
    recorder.write_layers(LAYERS)
    recorder.close()
    profile, batch = whatif.read_rank(recorder.directory)
    assert [g.name for g in profile.gradients] == ["w1", "w2"]  # "unused" never had a gradient
    # Traced backward 150 ms (median), recorded 5 ms: ready times 90 and 30 ms shrink in proportion.
    assert profile.backward_seconds == pytest.approx(0.005)
    assert [g.ready_seconds for g in profile.gradients] == pytest.approx([0.003, 0.001])
    assert batch == pytest.approx(0.010)  # mean of 9 and 11 ms: communication and waiting are not compute


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
    profile = profile_.from_layers(json.loads(json.dumps(timer.layers())))
    assert profile.total_bytes == 4 * (4 * 3 + 3 + 3 * 2 + 2)
    assert {g.name for g in profile.in_ready_order()[:2]} == {"2.weight", "2.bias"}  # the last layer's come first
    assert all(0 <= g.ready_seconds <= profile.backward_seconds for g in profile.gradients)


# -- the bucketing rule -------------------------------------------------------------------------------------------

def test_simulate_and_sweep_pass_the_bucketing_rule_on():
    # One 5 ms cycle fuses A alone and B, C together; a 20 ms cycle fuses all three: one 4 MB bucket at 12 ms.
    assert len(whatif.simulate(PROFILE, 2, 1e9, bucketing=overlap.FusionWindow(0.020)).buckets) == 1
    [result] = whatif.sweep(PROFILE, 2, 0.048, [1e9], [1], bucketing=overlap.FusionWindow(0.020))
    assert result.replay.ends == pytest.approx((0.012 + 0.032,))
    # The runtime's buckets go by parameter order, reversed: C alone (its 2 MB pass the first bucket's 1 MiB), then
    # B and A: 2 MB ready at 12 ms for 16 ms, 2 MB ready at 12 ms (A's 0 ms waits for C) from 28 ms to 44 ms.
    runtime = whatif.simulate(PROFILE, 2, 1e9, bucketing=overlap.RuntimeBuckets())
    assert [b.size_bytes for b in runtime.buckets] == [2e6, 2e6]
    assert runtime.replay.ends == pytest.approx((0.028, 0.044))


# -- the add cost -----------------------------------------------------------------------------------------------

def test_fixed_plus_per_byte_add_prices_a_small_bucket_by_its_calls():
    # 1000 B, N = 4, 1 Gbit/s: transfer 2*(8*1000*3/4)/1e9 = 12 us; add 3 calls of 10 us + 1 ns * 250 B = 30.75 us.
    add = whatif.fixed_plus_per_byte(10e-6, 1e-9)
    assert whatif.allreduce_seconds(1000, 4, 1e9, add=add) == pytest.approx(12e-6 + 30.75e-6)
    # a per-byte rate alone sees 0.75 us of the 30.75
    assert whatif.allreduce_seconds(1000, 4, 1e9, add=whatif.linear_add(1e-9)) == pytest.approx(12.75e-6)
    with pytest.raises(ValueError, match="must be greater than or equal to 0"):
        whatif.fixed_plus_per_byte(-1, 0)


def test_an_add_table_interpolates_and_reads_back_its_document():
    table = addcost.AddTable((1000.0, 3000.0), (10e-6, 14e-6), "cpu")
    assert table(500) == 10e-6  # below the smallest size: the smallest's per-call cost
    assert table(2000) == pytest.approx(12e-6)  # halfway
    assert table(6000) == pytest.approx(28e-6)  # above: in proportion to size
    assert addcost.AddTable.from_document(json.loads(json.dumps(table.to_document()))) == table
    assert table.fit() == pytest.approx((8e-6, 2e-9))  # through both points: 8 us + 2 ns/B
    with pytest.raises(ValueError, match="not an add-cost table"):
        addcost.AddTable.from_document({"points": []})
    with pytest.raises(ValueError, match="increasing"):
        addcost.AddTable((2.0, 1.0), (1.0, 1.0))


# -- the compression search -------------------------------------------------------------------------------------

def test_compression_search_finds_the_hand_computed_ratio():
    # N = 2, 100 Mbit/s, t_batch 48 ms: [A] lasts 80/c ms; [B, C] 240/c ms from max(80/c, 12) ms.
    # SF 0.85 allows overhead 48*(1/0.85 - 1) = 8.4706 ms, so [B, C] must end by 28.4706 ms: with c >= 80/12 it
    # starts at 12 ms, so 240/c = 16.4706 and c = 14.5714 (80/14.57 = 5.5 ms < 12: it does start at 12 ms).
    hand = 240 / (0.048 / 0.85 - 0.048 + 0.020 - 0.012) / 1000
    needed = whatif.compression_needed(PROFILE, 2, 1e8, 0.85, 0.048)
    assert needed.compression == pytest.approx(hand, rel=1e-5)
    assert whatif.simulate(PROFILE, 2, 1e8, needed.compression, batch_seconds=0.048).scaling_factor >= 0.85
    assert whatif.simulate(PROFILE, 2, 1e8, needed.compression * 0.999, batch_seconds=0.048).scaling_factor < 0.85


def test_compression_search_says_1_when_the_target_is_met_and_none_when_unreachable():
    assert whatif.compression_needed(PROFILE, 2, 1e11, 0.99, 0.048).compression == 1.0
    # A 10 ms add per call, N = 2: at infinite compression [A] ends at 10 ms, [B, C] runs 12..22 ms: overhead 2 ms,
    # SF 48/50 = 0.96 at best.
    add = whatif.fixed_plus_per_byte(0.010, 0)
    unreachable = whatif.compression_needed(PROFILE, 2, 1e8, 0.97, 0.048, add)
    assert unreachable.compression is None and unreachable.limit == pytest.approx(0.96)
    assert whatif.compression_needed(PROFILE, 2, 1e8, 0.95, 0.048, add).compression > 1
    with pytest.raises(ValueError, match="at most 1"):
        whatif.compression_needed(PROFILE, 2, 1e8, 1.5, 0.048)


@pytest.mark.parametrize("bandwidth", [1e7, 1e8, 1e9])
@pytest.mark.parametrize("window", [0.001, 0.005, 0.050])
def test_scaling_factor_never_falls_as_compression_grows(bandwidth, window):
    # What makes the bisection exact: checked on a profile whose buckets wait for gradients and for the channel.
    ready = [(3e5, 0.0), (1e6, 0.002), (2e5, 0.003), (4e6, 0.009), (5e5, 0.011), (2e6, 0.018)]
    profile = profile_.Profile(tuple(gradient(f"g{i}", s, t) for i, (s, t) in enumerate(ready)), 0.020)
    add = whatif.fixed_plus_per_byte(20e-6, 0.5e-9)
    compressions = [1 + 0.25 * i for i in range(200)]
    factors = [whatif.simulate(profile, 4, bandwidth, c, add, 0.030, overlap.FusionWindow(window)).scaling_factor
               for c in compressions]
    assert factors == sorted(factors)
    assert factors[0] < factors[-1] or factors[0] == 1.0


# -- the profile file --------------------------------------------------------------------------------------------

def test_a_profile_document_reads_back_and_bad_ones_say_which_field():
    document = profile_.document(PROFILE, 0.048)
    assert profile_.from_document(json.loads(json.dumps(document))) == (PROFILE, 0.048)
    with pytest.raises(ValueError) as raised:
        profile_.from_document({"batchSeconds": 0, "backwardSeconds": 0.02,
                                      "gradients": [{"name": "a", "bytes": 4, "readySeconds": -1}]})
    assert "`batchSeconds`" in str(raised.value) and "`gradients[0].readySeconds`" in str(raised.value)
