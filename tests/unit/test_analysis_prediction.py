"""`ringleader predict`'s arithmetic against values worked out by hand: layers, samples, the link, each model."""

from __future__ import annotations

import pytest

from ringleader.analysis import models, prediction
from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.contract import keys
from ringleader.tracking import metric_names

# Three layers in forward order; backward runs L3, L2, L1. 6000 bytes in all.
PROFILE = prediction.Profile(
    layers=(prediction.Layer("L1", 0.004, 1000), prediction.Layer("L2", 0.002, 3000), prediction.Layer("L3", 0.001, 2000)),
    forward_seconds=0.003, backward_seconds=0.007, update_seconds=0.001)
LINK = models.Link(8e6, 0.0005)  # 1 byte per microsecond, half a millisecond per message


def layers_document() -> dict:
    # Layer "b" (3000 bytes) is ready first: at 3 ms and 5 ms of backward (median 4 ms); "a" (1000 bytes) at 7 ms
    # and 9 ms (median 8 ms); backward lasts 10 ms and 12 ms (median 11 ms).
    return {
        "parameters": [{"name": "a.weight", "bytes": 800}, {"name": "a.bias", "bytes": 200},
                       {"name": "b.weight", "bytes": 2400}, {"name": "b.bias", "bytes": 600}],
        "iterations": [
            {"step": 5, "backwardStart": 0.010, "backwardEnd": 0.020,
             "ready": {"b.bias": 0.012, "b.weight": 0.013, "a.bias": 0.016, "a.weight": 0.017},
             "collectives": [{"bytes": 100, "start": 0.001, "end": 0.004}, {"bytes": 300, "start": 0.002, "end": 0.010},
                             {"bytes": 200, "start": 0.012, "end": 0.014}]},
            {"step": 6, "backwardStart": 0.110, "backwardEnd": 0.122,
             "ready": {"b.bias": 0.113, "b.weight": 0.115, "a.bias": 0.118, "a.weight": 0.119}},
        ],
    }


def test_layers_are_modules_ready_at_their_last_gradient_in_backward_order():
    layers = prediction.layers_from_document(layers_document())
    assert [layer.name for layer in layers] == ["a", "b"]  # forward order: the last ready first
    assert [layer.size_bytes for layer in layers] == [1000, 3000]
    # b: ready at 4 ms from backward's start; a: 4 ms later, plus the 3 ms backward lasts after it.
    assert layers[1].backward_seconds == pytest.approx(0.004)
    assert layers[0].backward_seconds == pytest.approx(0.007)


def test_profile_scales_the_traced_backward_to_the_recorded_median_which_a_stall_does_not_move():
    records = [worker_record(step, backward=0.022) for step in range(3)] + [worker_record(3, backward=0.5)]
    found = prediction.profile(layers_document(), records)
    # Traced 11 ms, recorded 22 ms at the median (a mean would be 136 ms): every layer twice as long.
    assert [layer.backward_seconds for layer in found.layers] == pytest.approx([0.014, 0.008])
    assert found.forward_seconds == pytest.approx(0.0031) and found.update_seconds == pytest.approx(0.001)
    assert found.compute_seconds == pytest.approx(0.0031 + 0.022 + 0.001)


def test_collectives_on_one_channel_are_timed_from_when_the_channel_was_free():
    # The second was launched at 2 ms but waited for the first until 4 ms: 6 ms of its own, not 8.
    samples = prediction.collective_samples(layers_document())
    assert [size for size, _ in samples] == [100, 300, 200]
    assert [seconds for _, seconds in samples] == pytest.approx([0.003, 0.006, 0.002])


def test_two_sizes_fit_both_latency_and_bandwidth_of_a_ring():
    # Ring of 4: t(M) = 6a + 1.5 * 8M/B; with B = 12 Mbit/s and a = 0.1 ms: 0.6 ms + 1 us per byte.
    samples = [(1000, 0.0016), (3000, 0.0036), (2000, 0.0026)]
    calibration = prediction.calibrate("RingAllReduce", 4, samples)
    assert calibration.link.bandwidth_bits_per_second == pytest.approx(1.2e7)
    assert calibration.link.latency_seconds == pytest.approx(1e-4)
    assert calibration.sizes == 3 and calibration.fit.startswith("latency and bandwidth fitted")


def test_one_size_gives_the_effective_bandwidth_and_says_the_latency_was_not_fitted():
    # 1PS with 2 workers: the server's NIC carries 4 models; 4 * 8000 bits in 5 ms on average.
    calibration = prediction.calibrate("ParameterServer", 2, [(1000, 0.004), (1000, 0.006)])
    assert calibration.link.bandwidth_bits_per_second == pytest.approx(6.4e6)
    assert calibration.link.latency_seconds == 0
    assert "latency not fitted (one message size)" in calibration.fit


def test_a_capped_link_keeps_the_spec_bandwidth_and_fits_the_latency_it_leaves():
    # P2P of 2 at 8 Mbit/s: 1000 bytes take 1 ms; 3 ms measured leaves 2 ms for 2 latencies.
    calibration = prediction.calibrate("PeerToPeer", 2, [(1000, 0.003)], spec_bits_per_second=8e6)
    assert calibration.link.bandwidth_bits_per_second == 8e6
    assert calibration.link.latency_seconds == pytest.approx(0.001)
    assert calibration.fit.startswith("bandwidth from spec.network.bandwidth")


def test_a_single_ring_worker_or_no_communication_cannot_calibrate():
    with pytest.raises(ValueError, match="one RingAllReduce worker sends nothing"):
        prediction.calibrate("RingAllReduce", 1, [(1000, 0.001)])
    with pytest.raises(ValueError, match="no communication was recorded"):
        prediction.calibrate("PeerToPeer", 2, [(1000, 0.0)])


def test_each_cost_model_by_hand():
    found = {e.label: e for e in prediction.estimates(PROFILE, 2, LINK, bucket_bytes=0)}
    # compute 3 + 7 + 1 = 11 ms; M/B = 6 ms; 2a = 1 ms
    assert found["1ps"].comm_seconds == pytest.approx(2 * 2 * 0.006 + 0.001)  # the server's NIC: 25 ms
    assert found["1ps"].iteration_seconds == pytest.approx(0.036)
    assert found["4ps"].comm_seconds == pytest.approx(2 * 0.006 + 0.001)  # a worker's own NIC is the limit
    assert found["4ps"].iteration_seconds == pytest.approx(0.024)
    assert found["p2p"].comm_seconds == pytest.approx(0.006 + 0.001)
    assert found["p2p"].iteration_seconds == pytest.approx(0.018)
    assert {e.model for e in found.values()} == {"study 1", "DAG"} and found["ring"].model == "DAG"


def test_the_ring_fifo_recurrence_on_a_three_layer_profile():
    # Every layer its own collective, t_c(M) = 2(N-1)a + 2(N-1)/N * M/B = 1 ms + M us: L3 3 ms, L2 4 ms, L1 2 ms.
    # tau_b: L3 0, L2 1, L1 3 (backward ends at 7). tau_c: L3 1; L2 max(1+3, 1+2) = 4; L1 max(4+4, 3+4) = 8.
    # The last aggregation ends at 10: 3 ms not hidden; t_iter = 3 + 7 + 3 + 1 = 14 ms.
    dag = prediction.ring_dag(PROFILE, 2, LINK, bucket_bytes=0)
    assert dag.comm_starts == pytest.approx((0.008, 0.004, 0.001))
    assert dag.t_c_no == pytest.approx(0.003) and dag.t_iter == pytest.approx(0.014)


def test_ring_buckets_merge_layers_as_the_runtime_fills_them():
    # 4000-byte buckets in backward order: L3 (2000) is not full, L3+L2 (5000) is; L1 alone.
    buckets = prediction.ring_buckets(PROFILE.layers, 4000)
    assert [(b.name, b.size_bytes) for b in buckets] == [("L1", 1000), ("L3+L2", 5000)]
    assert [b.backward_seconds for b in buckets] == pytest.approx([0.004, 0.003])
    # B1 (L3+L2): 0 to 3 ms, t_c 6 ms; B2 (L1): 3 to 7 ms, t_c 2 ms, starts at max(3+6, 7) = 9, ends 11: 4 ms exposed.
    dag = prediction.ring_dag(PROFILE, 2, LINK, bucket_bytes=4000)
    assert dag.t_c_no == pytest.approx(0.004) and dag.t_iter == pytest.approx(0.015)
    # The same buckets from the sizes a ring trial recorded, whatever bucket_bytes says.
    recorded = prediction.ring_buckets(PROFILE.layers, prediction.DEFAULT_BUCKET_BYTES, sizes=[5000, 1000])
    assert recorded == buckets
    assert prediction.recorded_bucket_sizes(layers_document()) == [100, 300, 200]
    # The 25 MiB default: the first bucket closes at 1 MiB, which L3 alone is not: one bucket, nothing overlaps,
    # 7 ms after a 7 ms backward.
    assert prediction.ring_dag(PROFILE, 2, LINK, prediction.DEFAULT_BUCKET_BYTES).t_iter == pytest.approx(0.018)


def test_the_first_ring_bucket_closes_at_one_mebibyte_as_the_runtime_fills_it():
    mib = 1024 * 1024
    layers = [prediction.Layer(f"L{i}", 0.001, 3 * mib) for i in range(1, 13)]  # 36 MiB in all
    buckets = prediction.ring_buckets(layers, prediction.DEFAULT_BUCKET_BYTES)
    # Backward order: L12 alone (3 MiB, already over 1 MiB), then 25 MiB or more (L11 to L3, 27 MiB), then the rest.
    assert [b.name for b in buckets] == ["L2+L1", "L11+L10+L9+L8+L7+L6+L5+L4+L3", "L12"]


def worker_record(step: int, backward: float = 0.011, comm: float = 0.002, iteration: float = 0.02,
                  warmup: bool = False) -> dict:
    return {"step": step, "role": "worker", "warmup": warmup, keys.TIME_DATA: 0.0001, keys.TIME_FORWARD: 0.003,
            keys.TIME_BACKWARD: backward, keys.TIME_COMM: comm, keys.TIME_WAIT: 0.0, keys.TIME_UPDATE: 0.001,
            keys.TIME_ITERATION: iteration}


def a_trial(architecture: str, workers: int = 2, **spec) -> trial_.Trial:
    document = {"architecture": architecture, "workers": {"replicas": workers}, **spec}
    return trial_.Trial(experiment="e", name="e-0", index=0, spec=spec_.ExperimentSpec.model_validate(document))


def test_a_ring_trial_is_calibrated_on_its_collectives_and_compared_with_its_median_iteration():
    records = {0: [worker_record(0, iteration=0.5, warmup=True)] + [worker_record(s, iteration=0.020) for s in (1, 2)],
               1: [worker_record(s, iteration=0.026) for s in (1, 2)]}
    found = prediction.predict_trial(a_trial("RingAllReduce"), records, layers_document(), 0)
    assert found.architecture == "ring" and found.workers == 2
    assert found.calibration.samples == 3 and found.calibration.sizes == 3
    assert found.measured_seconds == pytest.approx(0.023)  # the median of 20, 20, 26, 26 ms; warm-up left out
    assert found.error == pytest.approx(abs(found.own.iteration_seconds - 0.023) / 0.023)
    assert [e.label for e in found.estimates] == ["1ps", "4ps", "p2p", "ring"]
    document = found.to_document()
    metrics = metric_names.trial({keys.PREDICTION: document})
    assert metrics["predict_iteration_ms"] == round(1000 * found.own.iteration_seconds, 3)
    assert metrics["predict_error_pct"] == round(100 * found.error, 1)
    assert metrics["predict_measured_iteration_ms"] == 23.0
    assert metrics["predict_ring_iteration_ms"] == metrics["predict_iteration_ms"]
    assert {f"predict_{label}_comm_ms" for label in ("1ps", "4ps", "p2p", "ring")} <= set(metrics)
    assert keys.FIT not in metrics and not any(key.endswith(keys.FIT) for key in metrics)  # words are no metric


def test_a_parameter_server_trial_with_three_servers_is_compared_with_1ps_and_4ps_too():
    records = {3: [worker_record(s) for s in range(3)], 4: [worker_record(s) for s in range(3)]}
    trial = a_trial("ParameterServer", parameterServers={"replicas": 3})
    found = prediction.predict_trial(trial, records, layers_document(), 3)
    assert found.architecture == "3ps"
    assert [e.label for e in found.estimates] == ["1ps", "3ps", "4ps", "p2p", "ring"]
    # One exchange size per iteration: the effective rate. 3PS of 2 workers: F = 2*max(2/3, 1) = 2 models of 4000
    # bytes in 2 ms, so B = 2 * 8 * 4000 / 0.002 and the trial's own comm is reproduced.
    assert found.calibration.link.bandwidth_bits_per_second == pytest.approx(3.2e7)
    assert found.own.comm_seconds == pytest.approx(0.002)
