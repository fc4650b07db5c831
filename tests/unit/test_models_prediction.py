"""`ringleader predict`'s arithmetic against values worked out by hand: the profile, the compute, the link, each
model."""

from __future__ import annotations

import dataclasses

import pytest

from ringleader.models import calibration, collectives, cost_models, overlap, prediction, prediction_models, validation
from ringleader.models import profile as profile_
from ringleader.models import results as results_
from ringleader.api import spec as spec_
from ringleader.api import variants
from ringleader.api import trial as trial_
from ringleader.contract import keys
from ringleader.tracking import metric_names


def layers_document() -> dict:
    # Parameter order a.weight, a.bias, b.weight, b.bias. From backward's start: b.bias at 2 and 3 ms (median 2.5),
    # b.weight 3 and 5 (4), a.bias 6 and 8 (7), a.weight 7 and 9 (8); backward lasts 10 and 12 ms (median 11).
    return {
        "parameters": [{"name": "a.weight", "bytes": 800}, {"name": "a.bias", "bytes": 200},
                       {"name": "b.weight", "bytes": 2400}, {"name": "b.bias", "bytes": 600},
                       {"name": "frozen", "bytes": 4}],
        "iterations": [
            {"step": 5, "backwardStart": 0.010, "backwardEnd": 0.020,
             "ready": {"b.bias": 0.012, "b.weight": 0.013, "a.bias": 0.016, "a.weight": 0.017},
             "collectives": [{"bytes": 3000, "start": 0.002, "end": 0.010}, {"bytes": 1000, "start": 0.001,
                                                                                "end": 0.004}]},
            {"step": 6, "backwardStart": 0.110, "backwardEnd": 0.122,
             "ready": {"b.bias": 0.113, "b.weight": 0.115, "a.bias": 0.118, "a.weight": 0.119}},
        ],
    }


def worker_record(step: int, iteration: float = 0.020, comm: float = 0.002, wait: float = 0.0,
                  backward: float = 0.011, warmup: bool = False) -> dict:
    return {"step": step, "role": "worker", "warmup": warmup, keys.TIME_DATA: 0.0001, keys.TIME_FORWARD: 0.003,
            keys.TIME_BACKWARD: backward, keys.TIME_COMM: comm, keys.TIME_WAIT: wait, keys.TIME_UPDATE: 0.001,
            keys.TIME_ITERATION: iteration}


# -- the profile and the compute ----------------------------------------------------------------------------------

def test_the_profile_is_each_parameters_median_ready_time_in_parameter_order():
    found = profile_.from_layers(layers_document())
    assert [g.name for g in found.gradients] == ["a.weight", "a.bias", "b.weight", "b.bias"]  # "frozen": no gradient
    assert [g.ready_seconds for g in found.gradients] == pytest.approx([0.008, 0.007, 0.004, 0.0025])
    assert found.backward_seconds == pytest.approx(0.011) and found.total_bytes == 4000
    assert [g.name for g in found.in_ready_order()] == ["b.bias", "b.weight", "a.bias", "a.weight"]
    # Scaled to the records' median backward (the traced window is a sample): every ready time in proportion.
    doubled = found.scaled(0.022)
    assert doubled.backward_seconds == 0.022
    assert [g.ready_seconds for g in doubled.gradients] == pytest.approx([0.016, 0.014, 0.008, 0.005])
    assert profile_.bucket_sizes(layers_document()) == (1000, 3000)  # launch order
    with pytest.raises(ValueError, match="no traced iterations"):
        profile_.from_layers({**layers_document(), "iterations": []})


def test_compute_is_the_iteration_less_comm_and_wait_whichever_a_synchronizer_books():
    # Rank 0: outside comm 10 and 14 ms; rank 1: 12 and 8 ms (a ring booking its wait as comm, or as wait: the same).
    records = {0: [worker_record(0, iteration=0.5, warmup=True), worker_record(1, 0.030, comm=0.020),
                   worker_record(2, 0.030, comm=0.016)],
               1: [worker_record(1, 0.030, comm=0.010, wait=0.008), worker_record(2, 0.030, comm=0.022)],
               2: [{"step": 1, "role": "ps", keys.TIME_ITERATION: 9.0}]}  # a server: not a worker
    compute = profile_.compute(records)
    assert compute.median_seconds == pytest.approx(0.011)
    assert compute.slowest_per_iteration_seconds == pytest.approx((0.012 + 0.014) / 2)  # BSP waits for it
    assert compute.slowest_worker_seconds == pytest.approx(0.012)  # rank 0's median
    assert compute.critical("BSP") == pytest.approx(0.013) and compute.critical("ASP") == pytest.approx(0.011)
    assert compute.critical("SSP") == compute.critical("DSSP") == pytest.approx(0.012)
    # An emulated ring paced 5 ms from each rank's own compute, ending no sooner than 1 ms after the last rank's:
    # step 1 ends at 15 and 17 ms (rank 1's 12 ms is the last), step 2 at 34 and 30 ms (rank 0's 29 ms the last).
    assert compute.paced_seconds(0.005, 0.001) == pytest.approx((0.034 + 0.030) / 2 / 2)
    assert profile_.measured_iteration_seconds(records) == pytest.approx(0.030)  # warm-up and the server left out
    with pytest.raises(ValueError, match="no worker iteration records"):
        profile_.compute({2: records[2]})


def test_a_stalled_iteration_moves_neither_the_profile_nor_the_compute_nor_the_measured_iteration():
    # Rank 0's fourth iteration stalled for half a second (10 ms of compute became 480); medians do not follow it.
    stalled = [worker_record(s, 0.030, comm=0.020) for s in (1, 2, 3)] + [worker_record(4, 0.5, comm=0.020,
                                                                                        backward=0.5)]
    records = {0: stalled, 1: [worker_record(s, 0.030, comm=0.020) for s in (1, 2, 3, 4)]}
    assert profile_.of_rank(layers_document(), stalled).backward_seconds == pytest.approx(0.011)
    compute = profile_.compute(records)
    assert compute.median_seconds == compute.slowest_per_iteration_seconds == pytest.approx(0.010)
    assert compute.slowest_worker_seconds == pytest.approx(0.010)
    # Paced 5 ms, 1 ms after the last: every step 15 ms but the stalled one.
    assert compute.paced_seconds(0.005, 0.001) == pytest.approx(0.015)
    assert profile_.measured_iteration_seconds(records) == pytest.approx(0.030)


def test_both_commands_take_the_lowest_worker_rank_and_to_model_a_ring_a_ring_trial():
    def result(architecture: str, workers: int, index: int, ranks: tuple[int, ...]) -> results_.TrialResult:
        trial = trial_.Trial(experiment="e", name=f"e-{index}", index=index, spec=spec(architecture, workers))
        return results_.TrialResult(trial, "FINISHED", layers={rank: layers_document() for rank in ranks})

    server = result("ParameterServer", 2, 0, (1, 2))
    assert profile_.worker_rank(server) == 1  # rank 0 is the server, which has no backward
    with pytest.raises(LookupError, match="rank 0 is not a worker"):
        profile_.worker_rank(server, 0)
    with pytest.raises(LookupError, match="no worker rank has a layers.json"):
        profile_.worker_rank(result("PeerToPeer", 2, 1, ()))
    four, two, peers = result("RingAllReduce", 4, 1, (0,)), result("RingAllReduce", 2, 2, (1,)), \
        result("PeerToPeer", 1, 3, (0,))
    assert profile_.pick([server, four, two, peers]) == (two, "a RingAllReduce trial, the one with the fewest workers")
    assert profile_.pick([server, peers]) == (peers, "no RingAllReduce trial has a profile, the one with the fewest "
                                                     "workers")
    with pytest.raises(LookupError, match="no trial has a worker's backward profile"):
        profile_.pick([result("RingAllReduce", 2, 4, ())])


# -- the link ------------------------------------------------------------------------------------------------------

def probe(point=((1000, 0.0015), (2000, 0.0025), (4000, 0.0045), (8000, 0.0085)),
          collective=((1000, 0.0012), (2000, 0.0022), (4000, 0.0042), (8000, 0.0082))) -> dict:
    return {keys.PROBE_SHARED_HOST: True,
            keys.PROBE_POINT_TO_POINT: {keys.PROBE_RANKS: [0, 1], keys.PROBE_SAMPLES: [list(p) for p in point]},
            keys.PROBE_COLLECTIVE: {keys.WORKERS: 2, keys.PROBE_SAMPLES: [list(c) for c in collective]}}


def spec(architecture: str = "RingAllReduce", workers: int = 2, **more) -> spec_.ExperimentSpec:
    return spec_.ExperimentSpec.model_validate({"architecture": architecture, "workers": {"replicas": workers},
                                                **more})


def test_the_probe_fits_one_link_latency_and_bandwidth_and_the_collective():
    # One way: 0.5 ms + 1 us per byte, so B = 8 Mbit/s; the allreduce: 0.2 ms + 1 us per byte.
    found = calibration.calibrate(probe(), spec())
    assert found.link.latency_seconds == pytest.approx(0.0005)
    assert found.link.bandwidth_bits_per_second == pytest.approx(8e6) and found.link.cap_bits_per_second is None
    assert found.link.transfer_seconds(3000) == pytest.approx(0.003)
    assert found.allreduce_seconds(3000) == pytest.approx(0.0032)
    assert found.kind == calibration.LOOPBACK and found.workers == 2
    assert "latency 500.0 us, 0.008 Gbit/s" in found.fit


def test_an_emulated_cap_is_the_runtimes_rule_applied_to_the_measured_link():
    # Capped at 4 Mbit/s, slower than the 8 measured: bytes cross at the cap, and a message paced longer than its
    # 0.5 ms + 1 us per byte hides them (3000 bytes: 6 ms paced, 3.5 measured).
    found = calibration.calibrate(probe(), spec(network={"bandwidth": "4Mbit"}))
    assert found.kind == calibration.EMULATED and found.link.cap_bits_per_second == 4e6
    assert found.link.transfer_seconds(3000) == pytest.approx(0.006) and found.link.latency_seconds == 0.0005
    assert found.link.latency_for(3000) == 0.0
    # The ring of 2 paces a bucket at 2(N-1)/N * 8S/cap = 6 ms from its launch, longer than the measured 3.2 ms.
    assert found.allreduce_seconds(3000) == pytest.approx(0.006)
    # A cap faster than the link changes nothing.
    assert calibration.calibrate(probe(), spec(network={"bandwidth": "1Gbit"})).allreduce_seconds(3000) == \
        pytest.approx(0.0032)
    network = {**probe(), keys.PROBE_SHARED_HOST: False}
    assert calibration.calibrate(network, spec()).kind == calibration.NETWORK
    enforced = spec(network={"bandwidth": "8Mbit", "enforcement": "Network"})
    assert calibration.calibrate(network, enforced).kind == calibration.ENFORCED


def test_one_slow_size_on_a_loaded_machine_moves_the_fit_little():
    # The 2000-byte round trips waited for a core: 9 ms instead of 2.5. A least-squares line would tilt; the median
    # slope keeps 1 us per byte.
    found = calibration.calibrate(probe(point=((1000, 0.0015), (2000, 0.009), (4000, 0.0045), (8000, 0.0085))),
                                  spec())
    assert found.link.bandwidth_bits_per_second == pytest.approx(8e6)


def test_a_probe_that_cannot_be_fitted_says_why():
    with pytest.raises(ValueError, match="no link probe"):
        calibration.calibrate(None, spec())
    with pytest.raises(ValueError, match="fewer than 2 message sizes"):
        calibration.calibrate(probe(point=((1000, 0.001), (1000, 0.002))), spec())
    with pytest.raises(ValueError, match="does not grow with message size"):
        calibration.calibrate(probe(point=((1000, 0.004), (2000, 0.003), (4000, 0.002))), spec())
    # A latency fitted below 0 is taken as 0 and the bandwidth refitted through the origin.
    through_origin = calibration.calibrate(probe(point=((1000, 0.0008), (2000, 0.0020), (4000, 0.0044))), spec())
    assert through_origin.link.latency_seconds == 0.0


def test_the_full_duplex_server_is_n_plus_one_transfers():
    link = cost_models.Nic(8e6, 0.001)  # M/B = 1 s for a megabyte
    assert cost_models.parameter_server_comm_seconds(2, 1e6, link, full_duplex=True) == pytest.approx(3.002)
    assert cost_models.parameter_server_comm_seconds(3, 1e6, link, full_duplex=True) == pytest.approx(4.002)
    assert cost_models.parameter_server_comm_seconds(1, 1e6, link, full_duplex=True) == pytest.approx(2.002)
    # Four servers of 2 workers: the worker's own NIC (M each way) is the limit.
    assert cost_models.parameter_server_comm_seconds(2, 1e6, link, servers=4, full_duplex=True) == pytest.approx(2.002)
    assert cost_models.parameter_server_comm_seconds(2, 1e6, link) == pytest.approx(4.002)  # study 1's


# -- the models --------------------------------------------------------------------------------------------------

# 6000 bytes: L1 (1000) ready at 7 ms, L2 (3000) at 3 ms, L3 (2000) at 1 ms; backward 7 ms.
PROFILE = profile_.Profile((profile_.Gradient("L1", 1000, 0.007), profile_.Gradient("L2", 3000, 0.003),
                            profile_.Gradient("L3", 2000, 0.001)), 0.007)
# Two workers' compute per step: rank 0 10 and 10 ms, rank 1 14 and 6 ms; mean 10, the slowest per step 12 on average.
COMPUTE = profile_.Compute({0: {1: 0.010, 2: 0.010}, 1: {1: 0.014, 2: 0.006}})


def inputs(kind: str = calibration.EMULATED, paradigm: str = "BSP",
           bucket_bytes: float = 1) -> prediction_models.Inputs:
    # One way: 0.5 ms + 1 us per byte (B = 8 Mbit/s); the allreduce of 2: 1 ms + 1 us per byte.
    link = calibration.Calibration(cost_models.Nic(8e6, 0.0005), cost_models.CommCost(0.001, 1e-6), 2, kind, "by hand")
    return prediction_models.Inputs(PROFILE, COMPUTE, link, 2, variants.Paradigm(paradigm),
                             overlap.RuntimeBuckets(bucket_bytes, bucket_bytes))


def test_each_architecture_by_hand():
    found = {e.label: e for e in prediction.estimates(inputs())}
    assert list(found) == ["1ps", "4ps", "p2p", "ring", "hring", "1psagg", "4psagg"]  # two levels: test_two_level.py
    # M/B = 6 ms, 2a = 1 ms; BSP waits for the slowest worker of each iteration: 12 ms.
    assert found["1ps"].comm_seconds == pytest.approx(3 * 0.006 + 0.001)  # (N+1) M/B: the full-duplex server
    assert found["1ps"].iteration_seconds == pytest.approx(0.031)
    assert found["4ps"].comm_seconds == pytest.approx(2 * 0.006 + 0.001)  # a worker's own NIC is the limit
    assert found["p2p"].comm_seconds == pytest.approx(0.006 + 0.001)
    assert found["p2p"].compute_seconds == pytest.approx(0.012)
    # The ring, a bucket per layer: L3 1..4 ms, L2 4..8, L1 8..10: 3 ms after backward. On an emulated link each
    # rank's allreduce is paced from its own launch, and ends no sooner than the last bucket's measured allreduce
    # (1 ms + 1000 us = 2 ms) after the last rank: step 1 ends at 16 and 17 ms, step 2 at 29 and 28 ms; 14.25 ms an
    # iteration, of which 11.25 compute waited for (12 if every step waited for its slowest worker).
    assert found["ring"].comm_seconds == pytest.approx(0.003)
    assert found["ring"].compute_seconds == pytest.approx(0.01125)
    assert found["ring"].model == "DAG" and found["1ps"].model == "full-duplex server"
    on_a_network = {e.label: e for e in prediction.estimates(inputs(calibration.NETWORK))}
    assert on_a_network["ring"].compute_seconds == pytest.approx(0.012)  # it ends once the last rank launched it


def test_the_paradigm_sets_the_compute_waited_for_but_the_ring_is_always_bsp():
    found = {e.label: e for e in prediction.estimates(inputs(calibration.NETWORK, "ASP"))}
    assert found["1ps"].compute_seconds == found["p2p"].compute_seconds == pytest.approx(0.010)  # each worker's own
    assert found["ring"].compute_seconds == pytest.approx(0.012)
    assert found["1ps"].band is None and "not validated under ASP" in found["1ps"].note


def test_bands_come_from_the_validation_of_that_kind_or_say_why_not():
    found = {e.label: e for e in prediction.estimates(inputs())}
    for label in ("1ps", "p2p", "ring"):  # no load recorded: the busiest validated machine's band
        assert found[label].band == validation.BANDS[calibration.EMULATED, label][-1] and found[label].note == ""
    assert found["4ps"].band is None and "no 4ps prediction" in found["4ps"].note
    outside = prediction.estimates(dataclass_replace(inputs(), workers=16))
    assert all("not 16" in e.note for e in outside if e.band is not None)


def dataclass_replace(found: prediction_models.Inputs, **changes) -> prediction_models.Inputs:
    import dataclasses
    return dataclasses.replace(found, **changes)


def test_on_an_uncapped_loopback_the_numbers_are_no_prediction_and_say_why():
    records = {0: [worker_record(s) for s in range(3)], 1: [worker_record(s) for s in range(3)]}
    found = prediction.predict_trial(a_trial("PeerToPeer"), records, layers_document(), 0, probe())
    assert found.inputs.calibration.kind == calibration.LOOPBACK
    assert found.cannot_predict == validation.UNPREDICTABLE[calibration.LOOPBACK]
    assert "cannot predict on an uncapped loopback" in found.cannot_predict
    assert all(e.band is None and e.note == "" for e in found.estimates)
    assert found.to_document()[keys.CANNOT_PREDICT] == found.cannot_predict
    assert prediction.table(found).startswith("NO PREDICTION, cannot predict on an uncapped loopback")
    assert prediction.headline(found).endswith(f"({found.cannot_predict})")


# -- a trial ------------------------------------------------------------------------------------------------------

def a_trial(architecture: str, workers: int = 2, **more) -> trial_.Trial:
    return trial_.Trial(experiment="e", name="e-0", index=0, spec=spec(architecture, workers, **more))


def test_a_headline_whose_measured_median_is_0_s_says_so_without_an_error_it_cannot_compute():
    records = {0: [worker_record(s, 0.020) for s in (1, 2)], 1: [worker_record(s, 0.026) for s in (1, 2)]}
    found = prediction.predict_trial(a_trial("RingAllReduce", network={"bandwidth": "8Mbit"}), records,
                                     layers_document(), 0, probe())
    assert "error" in prediction.headline(found)
    instant = dataclass_replace(found, measured_seconds=0.0)
    assert instant.error is None
    said = prediction.headline(instant)
    assert "measured 0.000 ms (median)" in said and "error" not in said


def test_a_ring_trial_is_predicted_from_its_probe_and_compared_with_its_median_iteration():
    records = {0: [worker_record(0, iteration=0.5, warmup=True)] + [worker_record(s, 0.020) for s in (1, 2)],
               1: [worker_record(s, 0.026) for s in (1, 2)]}
    found = prediction.predict_trial(a_trial("RingAllReduce", network={"bandwidth": "8Mbit"}), records,
                                     layers_document(), 0, probe())
    assert found.architecture == "ring" and found.inputs.workers == 2
    assert found.inputs.bucketing.recorded == (1000, 3000)  # the ring trial's own buckets
    assert found.inputs.profile.backward_seconds == pytest.approx(0.011)  # rank 0's median time/backward
    assert found.measured_seconds == pytest.approx(0.023)  # the median of 20, 20, 26, 26 ms; warm-up left out
    assert found.error == pytest.approx(abs(found.own.iteration_seconds - 0.023) / 0.023)
    assert [e.label for e in found.estimates] == ["1ps", "4ps", "p2p", "ring", "hring", "1psagg", "4psagg"]
    document = found.to_document()
    assert document[keys.LINK_KIND] == calibration.EMULATED and document[keys.WORKERS] == 2
    ring = document[keys.ARCHITECTURES]["ring"]
    assert ring[keys.BAND_FRACTION] == validation.BANDS[calibration.EMULATED, "ring"][-1].within
    assert document[keys.ARCHITECTURES]["4ps"][keys.BAND_FRACTION] is None
    metrics = metric_names.trial({keys.PREDICTION: document})
    assert metrics["predict_iteration_ms"] == round(1000 * found.own.iteration_seconds, 3)
    assert metrics["predict_error_pct"] == round(100 * found.error, 1)
    assert metrics["predict_measured_iteration_ms"] == 23.0
    assert metrics["predict_ring_iteration_ms"] == metrics["predict_iteration_ms"]
    assert metrics["predict_ring_band_pct"] == round(100 * ring[keys.BAND_FRACTION], 1)
    assert "predict_4ps_band_pct" not in metrics
    assert not any(key.endswith((keys.FIT, keys.BAND_NOTE, keys.LINK_KIND)) for key in metrics)  # words: no metric


def test_a_parameter_server_trial_with_three_servers_is_compared_with_1ps_and_4ps_too():
    records = {3: [worker_record(s) for s in range(3)], 4: [worker_record(s) for s in range(3)]}
    found = prediction.predict_trial(a_trial("ParameterServer", parameterServers={"replicas": 3}), records,
                                     layers_document(), 3, probe())
    assert found.architecture == "3ps"
    assert [e.label for e in found.estimates] == ["1ps", "3ps", "4ps", "p2p", "ring", "hring", "1psagg", "3psagg",
                                                  "4psagg"]
    # 3PS of 2 workers: max(3 * M/3B, 2 M/B) + 2a = 2 * 4000 us + 1 ms.
    assert found.own.comm_seconds == pytest.approx(0.009)
    assert found.inputs.bucketing.recorded == (1000, 3000)  # recorded sizes are read whatever the architecture


def test_a_trial_without_a_probe_or_records_cannot_be_predicted():
    records = {0: [worker_record(s) for s in range(3)]}
    with pytest.raises(ValueError, match="no link probe"):
        prediction.predict_trial(a_trial("PeerToPeer", 1), records, layers_document(), 0, None)
    with pytest.raises(ValueError, match="no iteration records for rank 1"):
        prediction.predict_trial(a_trial("PeerToPeer"), records, layers_document(), 1, probe())


def test_the_table_marks_this_trial_and_numbers_its_notes():
    records = {0: [worker_record(s) for s in range(3)], 1: [worker_record(s) for s in range(3)]}
    found = prediction.predict_trial(a_trial("PeerToPeer", network={"bandwidth": "8Mbit"}), records,
                                     layers_document(), 0, probe())
    lines = prediction.table(found).splitlines()
    assert lines[0].split()[:3] == ["architecture", "model", "compute"]
    [p2p] = [line for line in lines if line.startswith("p2p")]
    assert p2p.endswith("<- this trial") and "±" in p2p
    [four] = [line for line in lines if line.startswith("4ps ")]
    assert "no validated band [1]" in four and any(line.startswith("  [1] 4ps: not validated") for line in lines)


# -- a compressed trial ---------------------------------------------------------------------------------------------

def test_a_compressed_trial_is_priced_at_its_rounds_where_its_architecture_takes_the_method():
    # One bucket of all 6000 bytes, ready when backward ends (7 ms); an allreduce costs 1 ms + 1 us per byte.
    one_bucket = dataclass_replace(inputs(bucket_bytes=1e9), workers=2)
    power_sgd = collectives.Wire((collectives.RoundFractions(0.5), collectives.RoundFractions(0.25)), 0.0, "PowerSGD",
                                 variants.CompressionMethod.POWER_SGD)
    found = {e.label: e for e in prediction.estimates(dataclass_replace(one_bucket, wire=power_sgd))}
    # P: 3000 bytes, 1 + 3 ms after backward; then Q: 1500 bytes, 1 + 1.5 ms. Uncompressed: 1 + 6 ms.
    assert found["ring"].comm_seconds == pytest.approx(0.004 + 0.0025)
    assert {e.label: e for e in prediction.estimates(one_bucket)}["ring"].comm_seconds == pytest.approx(0.007)
    assert "priced at the trial's PowerSGD, c = 1.33" in found["ring"].note  # 1 / (0.5 + 0.25)
    # a parameter server cannot run PowerSGD: its messages are priced whole, and the note says so
    assert found["p2p"].comm_seconds == pytest.approx(0.006 + 0.001)
    assert "PowerSGD needs RingAllReduce: priced uncompressed" in found["p2p"].note
    fp16 = collectives.Wire((collectives.RoundFractions(0.5),), 0.0, "FP16", variants.CompressionMethod.FP16)
    halved = {e.label: e for e in prediction.estimates(dataclass_replace(one_bucket, wire=fp16))}
    assert halved["p2p"].comm_seconds == pytest.approx(0.003 + 0.001)  # M/2 over B, and 2a
    assert halved["ring"].comm_seconds == pytest.approx(0.004)
    # TopK gathers 600 bytes from each other rank: as many bytes as an allreduce of 600 * N/2
    topk = collectives.Wire((collectives.RoundFractions(0.1, gather=True),), 0.0, "TopK",
                            variants.CompressionMethod.TOP_K)
    gathered = {e.label: e for e in prediction.estimates(dataclass_replace(one_bucket, wire=topk))}["ring"]
    assert gathered.comm_seconds == pytest.approx(0.001 + 0.0006)


def test_a_compressed_trials_prediction_takes_the_ratio_its_records_measured():
    def compressed(step, iteration=0.020):
        return worker_record(step, iteration) | {keys.BYTES_SENT: 500.0, keys.BYTES_UNCOMPRESSED: 1000.0,
                                                 keys.TIME_CODEC: 0.001}

    records = {0: [compressed(s) for s in (1, 2)], 1: [compressed(s) for s in (1, 2)]}
    trial = a_trial("RingAllReduce", network={"bandwidth": "8Mbit"}, compression={"method": "FP16"})
    found = prediction.predict_trial(trial, records, layers_document(), 0, probe())
    assert found.inputs.wire.method == variants.CompressionMethod.FP16
    assert found.inputs.wire.ratio(2) == pytest.approx(2)
    plain = prediction.predict_trial(a_trial("RingAllReduce", network={"bandwidth": "8Mbit"}), records,
                                     layers_document(), 0, probe())
    # its buckets' allreduces send half the bytes: they end sooner (here hidden under backward either way)
    assert plain.inputs.wire is None
    assert prediction_models.ring_replay(found.inputs).ends[-1] < prediction_models.ring_replay(plain.inputs).ends[-1]


def test_the_document_states_the_band_as_the_error_nine_in_ten_held_out_predictions_kept_within():
    band = validation.Band(within=0.02, median=0.005, worst=0.04, pairs=30, workers=(2,), threads_per_cpu=2.0,
                           busy_cores=0, load_per_cpu=1.0)
    found = [dataclasses.replace(e, band=band) for e in prediction.estimates(inputs())]
    predicted = prediction.TrialPrediction("p2p", inputs(), tuple(found), 0.02)
    document = predicted.to_document()
    assert document[keys.ARCHITECTURES]["p2p"][keys.BAND_FRACTION] == 0.02  # not the worst pair's 4 %
    assert document[keys.ARCHITECTURES]["p2p"][keys.BAND_MEDIAN_FRACTION] == 0.005
    assert "±2.0% in 9 of 10 (median 0.5%)" in prediction.table(predicted)


# -- the host and the wire at the trial's placement ----------------------------------------------------------------

def across_nodes(cpu_comm: float | None, nodes: tuple[str, str, str] = ("n1", "n1", "n2"),
                 cpus: float = 0.25) -> tuple[trial_.Trial, dict, dict, dict]:
    """A 1PS trial of 2 workers on a network: by default the server (rank 0) on n1, one worker beside it, one on n2;
    pods of 250m CPU; its workers' records with cpu/comm, or without (an older runtime's)."""
    def record(step: int) -> dict:
        found = worker_record(step) | {keys.BYTES_SENT: 6000.0, keys.BYTES_RECEIVED: 6000.0}
        return found | ({keys.CPU_COMM: cpu_comm} if cpu_comm is not None else {})

    records = {0: [], 1: [record(s) for s in range(3)], 2: [record(s) for s in range(3)]}
    usage = {str(rank): {keys.HOST: f"pod-{rank}", keys.NODE: node, keys.CPUS: cpus} for rank, node in enumerate(nodes)}
    network_probe = {**probe(), keys.PROBE_SHARED_HOST: False}
    return a_trial("ParameterServer"), records, usage, network_probe


def test_on_a_network_a_parameter_server_is_priced_at_its_placement_by_the_longer_of_host_and_wire():
    trial, records, usage, network_probe = across_nodes(cpu_comm=0.004)
    found = prediction.predict_trial(trial, records, layers_document(), 1, network_probe, usage=usage)
    one = next(e for e in found.estimates if e.label == "1ps")
    model_bytes, bits = found.inputs.profile.total_bytes, found.inputs.calibration.link.effective_bits_per_second
    # One worker on another node than the server's: 2*1*M/B on the server's NIC; the one beside it costs none.
    assert one.resources.wire_seconds == pytest.approx(2 * 8 * model_bytes / bits)
    # The host: (4 ms - 1 ms of update) of CPU for 12 000 bytes, the server's 4M at 250m.
    assert one.resources.host_seconds == pytest.approx(0.003 / 12000 * 4 * model_bytes / 0.25)
    assert one.resources.bound == "host" and "priced at its placement, host-bound" in one.note
    assert one.comm_seconds == pytest.approx(one.resources.host_seconds
                                             + 2 * found.inputs.calibration.link.latency_seconds)
    document = found.to_document()
    assert document[keys.HOST_NOTE] is None
    assert document[keys.ARCHITECTURES]["1ps"][keys.BOUND] == "host"
    assert "host ms" in prediction.table(found).splitlines()[0]


def test_records_without_cpu_comm_are_priced_on_the_wire_alone_and_say_so():
    trial, records, usage, network_probe = across_nodes(cpu_comm=None)
    found = prediction.predict_trial(trial, records, layers_document(), 1, network_probe, usage=usage)
    one = next(e for e in found.estimates if e.label == "1ps")
    assert one.resources.host_seconds is None and one.resources.bound == "wire"
    assert "host term not priced" in found.to_document()[keys.HOST_NOTE]
    assert "host term not priced" in prediction.table(found)
    # The ring keeps its probed allreduce; an emulated link (the bench's) keeps its card's rule: both as validated.
    ring = next(e for e in found.estimates if e.label == "ring")
    assert "priced at its placement" not in ring.note


def test_across_nodes_a_spread_trial_takes_the_band_of_its_pods_quota_where_the_study_validated_one():
    band = validation.NODE_BANDS[0.25]
    trial, records, usage, network_probe = across_nodes(cpu_comm=0.004, nodes=("n1", "n2", "n3"))
    found = {e.label: e for e in prediction.predict_trial(trial, records, layers_document(), 1, network_probe,
                                                          usage=usage).estimates}
    for label in ("1ps", "p2p", "ring"):
        assert found[label].band == band and "not validated" not in found[label].note, label
    assert found["4ps"].band is None
    assert found["4ps"].note.startswith("not validated across nodes: the study ran 1ps, p2p, ring, not 4ps")


def test_across_nodes_a_shared_node_or_an_unvalidated_quota_states_no_band_and_says_why():
    trial, records, usage, network_probe = across_nodes(cpu_comm=0.004)  # a worker beside the server
    packed = prediction.predict_trial(trial, records, layers_document(), 1, network_probe, usage=usage)
    for estimate in packed.estimates:
        assert estimate.band is None and "stay inside a node" in estimate.note, estimate.label
    assert "stay inside a node" in prediction.table(packed)
    trial, records, usage, network_probe = across_nodes(cpu_comm=0.004, nodes=("n1", "n2", "n3"), cpus=1.0)
    whole = prediction.predict_trial(trial, records, layers_document(), 1, network_probe, usage=usage)
    for estimate in whole.estimates:
        assert estimate.band is None and "not validated across nodes" in estimate.note, estimate.label
    assert "at pods of 1 CPU" in next(e for e in whole.estimates if e.label == "ring").note

