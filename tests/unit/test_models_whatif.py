"""models/whatif.py against hand-computed cases: the FIFO allreduce channel, overhead and SF (the fusion rule
itself: test_models_overlap.py)."""

import json

import pytest
import torch

from ringleader.models import addcost, collectives, cost_models, overlap, whatif
from ringleader.models import profile as profile_
from ringleader.models import results as results_
from ringleader.models.summary import TrialSummary
from ringleader.api import spec as spec_
from ringleader.api import variants
from ringleader.api import trial as trial_
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
    compressed = whatif.simulate(PROFILE, 2, 1e8, collectives.uniform(4, 0.005), batch_seconds=0.048)
    assert compressed.overhead_seconds == pytest.approx(0.065)
    assert compressed.scaling_factor == pytest.approx(0.048 / 0.113)
    assert whatif.simulate(PROFILE, 2, 1e8, collectives.uniform(1, 0.005)).overhead_seconds == pytest.approx(0.300)
    swept = whatif.sweep(PROFILE, 2, 0.048, [1e8], [collectives.uniform(c, 0.005) for c in (1, 4)])
    assert [r.overhead_seconds for r in swept] == pytest.approx([0.300, 0.065])


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


# -- a method's rounds, the collective's floor, the wait (the runtime's ring, runtime/ring.py) --------------------


def test_later_rounds_follow_every_bucket_first_round_and_the_codec_and_wait_add_up():
    # 100 Mbit/s, 2 workers, each round sends its payload (2(N-1)/N = 1). First rounds of 1/4: [A] 0.25 MB 0..20 ms,
    # [B, C] 0.75 MB 20..80 ms: 60 ms exposed. Second rounds of 1/8: 10 + 30 ms after. Codec 5 ms, wait 7 ms.
    two_rounds = collectives.Wire((collectives.RoundFractions(0.25), collectives.RoundFractions(0.125)),
                                  codec_seconds=0.005, label="PowerSGD")
    result = whatif.simulate(PROFILE, 2, 1e8, two_rounds, batch_seconds=0.048, wait_seconds=0.007)
    assert result.replay.ends == pytest.approx((0.020, 0.080))
    assert result.later_seconds == pytest.approx(0.040)
    assert result.overhead_seconds == pytest.approx(0.060 + 0.040 + 0.005 + 0.007)
    assert result.compression == pytest.approx(1 / 0.375) and result.label == "PowerSGD"
    alone = whatif.simulate(PROFILE, 1, 1e8, two_rounds, batch_seconds=0.048, wait_seconds=0.007)
    assert alone.overhead_seconds == 0.0 and alone.scaling_factor == 1.0  # one worker: nothing to send or wait for


def test_a_round_costs_at_least_the_measured_collective():
    # 100 Gbit/s: the transfers take microseconds, the probed collective 30 ms + 10 ns/byte of payload.
    floor = cost_models.CommCost(0.030, 1e-8)
    one_round = whatif.simulate(PROFILE, 2, 1e11, collectives.uniform(4), floor=floor)
    # [A]: 30 + 2.5 ms from 0; [B, C]: 30 + 7.5 ms from 32.5 ms; backward ends at 20 ms
    assert one_round.replay.ends == pytest.approx((0.0325, 0.070))
    assert one_round.overhead_seconds == pytest.approx(0.050)
    # at 10 Mbit/s the transfer is longer than the floor: the floor is hidden under it
    assert whatif.round_seconds(1e6, 2, 1e7, collectives.RoundFractions(1.0), floor=floor) == pytest.approx(0.8)


def test_a_gathered_round_sends_n_minus_1_payloads():
    topk = collectives.RoundFractions(0.02, gather=True)
    assert topk.wire_bytes(1e6, 4) == pytest.approx(3 * 0.02e6)
    assert collectives.Wire((topk,)).ratio(4) == pytest.approx(1.5e6 / 0.06e6)
    assert topk.added_bytes(1e6) == 0.0  # gathered values are added by the decoder, not the ring


def shaped(name, shape, ready=0.0):
    return profile_.Gradient(name, 4.0 * float(torch.Size(shape).numel()), ready, tuple(shape))


def test_power_sgd_rounds_are_sized_by_the_shapes_as_the_codec_factors_them():
    # weight 100 x 50, rank 2: P 200 and Q 100 values (300 * 2 < 5000); bias (100,): 1 x ... sent whole, 100 values
    profile = profile_.Profile((shaped("weight", (100, 50)), shaped("bias", (100,))), 0.01)
    method = spec_.Compression(method="PowerSGD", rank=2)
    rounds = collectives.ROUNDS[method.method](profile, method)
    assert [r.payload for r in rounds] == pytest.approx([300 / 5100, 100 / 5100])
    # the trial measured half the ratio these rounds give: each round's payload doubles, and the ratio is the trial's
    measured = collectives.measured(profile, method, 2, 5100 / 400 / 2, 0.002)
    assert [r.payload for r in measured.rounds] == pytest.approx([600 / 5100, 200 / 5100])
    assert measured.ratio(2) == pytest.approx(5100 / 800) and measured.codec_seconds == 0.002
    # without shapes (a layers.json from before they were recorded): half the bytes in each round
    bare = profile_.Profile((gradient("weight", 20000, 0.0),), 0.01)
    assert [r.payload for r in collectives.measured(bare, method, 2, 10.0, 0.0).rounds] == pytest.approx([0.05, 0.05])


def test_each_method_measured_at_its_ratio_sends_what_the_trial_sent():
    for method in variants.CompressionMethod:
        compression = spec_.Compression(method=method)
        measured = collectives.measured(PROFILE, compression, 3, 7.5, 0.0)
        assert measured.ratio(3) == pytest.approx(7.5), method


def test_the_measured_scaling_factor_is_t_batch_over_the_median_iteration():
    iterations = [{"step": step, "role": "worker", "warmup": step == 0, keys.TIME_ITERATION: 0.1 + 0.1 * (step == 0),
                   keys.TIME_COMM: 0.03, keys.TIME_WAIT: 0.01, keys.TIME_CODEC: 0.01} for step in range(4)]
    assert whatif.measured_scaling_factor(iterations) == pytest.approx(0.05 / 0.1)


def test_a_trials_basis_has_its_ring_buckets_wait_probe_and_measured_method():
    spec = spec_.ExperimentSpec.model_validate({"architecture": "RingAllReduce", "workers": {"replicas": 2},
                                                "compression": {"method": "FP16"}})
    trial = trial_.Trial(experiment="e", name="e-0", index=0, spec=spec)

    def record(step, compute):  # compute outside comm, wait and codec: iteration - 0.030
        return {"step": step, "role": "worker", "warmup": False, keys.TIME_BACKWARD: 0.02,
                keys.TIME_ITERATION: compute + 0.030, keys.TIME_COMM: 0.020, keys.TIME_WAIT: 0.008,
                keys.TIME_CODEC: 0.002, keys.BYTES_SENT: 5e5, keys.BYTES_UNCOMPRESSED: 1e6}

    # rank 0's compute 40 ms each step; rank 1's 50, 40, 60: the slowest per step 50, 40, 60 (median 50)
    records_ = {0: [record(s, 0.040) for s in (1, 2, 3)],
                1: [record(s, c) for s, c in ((1, 0.05), (2, 0.04), (3, 0.06))]}
    layers = {"parameters": [{"name": "w", "bytes": 4e6, "shape": [1000, 1000]}],
              "iterations": [{"backwardStart": 0.0, "backwardEnd": 0.02, "ready": {"w": 0.01},
                              "collectives": [{"bytes": 4e6, "start": 0.02, "end": 0.03}]}]}
    probe = {keys.PROBE_POINT_TO_POINT: {keys.PROBE_SAMPLES: [[1000, 0.0015], [4000, 0.0045]]},
             keys.PROBE_COLLECTIVE: {keys.WORKERS: 2, keys.PROBE_SAMPLES: [[1000, 0.0012], [4000, 0.0042]]}}
    probed = TrialSummary.from_document({keys.LINK_PROBE: probe})
    basis = whatif.basis(results_.TrialResult(trial, "FINISHED", summary=probed, records=records_,
                                              layers={0: layers}), 0)
    assert basis.batch_seconds == pytest.approx(0.040) and basis.wait_seconds == pytest.approx(0.010)
    assert basis.bucketing == overlap.RuntimeBuckets(recorded=(4e6,))
    assert basis.floor.a_seconds == pytest.approx(0.0002) and basis.floor.b_seconds_per_byte == pytest.approx(1e-6)
    assert basis.wire.label == "FP16" and basis.wire.ratio(2) == pytest.approx(2.0)
    assert basis.wire.codec_seconds == pytest.approx(0.002)
    assert basis.profile.gradients[0].shape == (1000, 1000)
    unprobed = whatif.basis(results_.TrialResult(trial, "FINISHED", records=records_, layers={0: layers}), 0)
    assert unprobed.floor is None


def basis_of(floor):
    return whatif.Basis(PROFILE, 0.048, 2, whatif.FUSION, 0.0, floor, None)


def test_where_the_probed_collective_bounds_every_round_faster_links_are_said_to_change_nothing():
    # 30 ms + 10 ns/byte a round: from 10 Gbit/s up the transfers are shorter than it, below they are longer.
    floor = cost_models.CommCost(0.030, 1e-8)
    results = whatif.sweep(PROFILE, 2, 0.048, [g * 1e9 for g in (0.1, 10, 25, 100)], (1, 4), floor=floor)
    assert whatif.plateau(results) == 10e9
    said = whatif.floor_said(results, basis_of(floor), whatif.no_add, whatif.FUSION)
    assert said.startswith("at and above 10 Gbit/s the probe's fitted allreduce (30000.0 us + 10.000 ns/byte")
    assert said.endswith("bounds the iteration; faster links change nothing")


def test_where_backward_hides_every_round_that_is_the_bound_named():
    results = whatif.sweep(PROFILE, 2, 0.048, [g * 1e9 for g in (1, 100, 200)], (1,))
    assert whatif.plateau(results) == 100e9
    assert "at and above 100 Gbit/s backward (every round ends before it does" in whatif.floor_said(
        results, basis_of(None), whatif.no_add, whatif.FUSION)


def test_while_the_fastest_link_still_gains_no_floor_is_said():
    results = whatif.sweep(PROFILE, 2, 0.048, [g * 1e9 for g in (0.1, 0.2, 0.4)], (1, 4))
    assert whatif.plateau(results) is None
    assert whatif.floor_said(results, basis_of(None), whatif.no_add, whatif.FUSION) is None
