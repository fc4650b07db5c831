"""MLflow's metric names: series with a "/", values logged once without; milliseconds and percent rounded to what was
measured; warm-up apart; the sweep's trials named by what they vary; the files keep their own names."""

from __future__ import annotations

import pathlib
import re

import pytest

from ringleader.models import summary
from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.contract import keys
from ringleader.tracking import metric_names, schema

REFERENCE = pathlib.Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def a_trial() -> trial_.Trial:
    spec = spec_.ExperimentSpec.model_validate({"architecture": "ParameterServer", "workers": {"replicas": 2},
                                                "model": {"batchSize": 10}, "network": {"bandwidth": "100Mbit"},
                                                "sync": {"paradigm": "SSP", "staleness": 2}})
    return trial_.Trial(experiment="e", name="e-0", index=0, spec=spec)


def worker(step: int, warmup: bool = False, iteration: float = 0.0206, comm: float = 0.004) -> dict:
    return {"step": step, "role": "worker", "warmup": warmup, "timestamp": 1.7e9 + step,
            keys.TIME_DATA: 0.0001, keys.TIME_FORWARD: 0.002, keys.TIME_BACKWARD: 0.006, keys.TIME_COMM: comm,
            keys.TIME_WAIT: 0.001, keys.TIME_UPDATE: 0.0005, keys.TIME_ITERATION: iteration,
            keys.BYTES_SENT: 236000.0, keys.BYTES_RECEIVED: 235000.0, keys.LOSS: 2.0 - step / 10,
            keys.LINK_TX: 5e6 + step, keys.LINK_RX: 4e6, keys.LINK_UTILIZATION: 0.04,
            keys.STALENESS: 1.0}


def records() -> dict[int, list[dict]]:
    server = [{"step": s, "role": "ps", "warmup": s == 0, keys.SERVER_AGGREGATION: 0.003,
               keys.SERVER_QUEUE_DEPTH: 1.0, keys.SERVER_THRESHOLD: 2.0} for s in range(3)]
    return {0: server, 1: [worker(0, warmup=True, iteration=0.9)] + [worker(s) for s in range(1, 4)],
            2: [worker(0, warmup=True, iteration=0.9)] + [worker(s, iteration=0.0253) for s in range(1, 4)]}


KEY = re.compile(r"^[a-z_]+(/[a-z0-9_-]+)+$")  # a series: <group>/<what>[_<unit>], lower case
ONCE = re.compile(r"^[a-z0-9_]+$")  # a value logged once: no "/", so after every series on MLflow's run page


def test_iteration_records_become_milliseconds_under_one_scheme():
    metrics = metric_names.series(worker(3, comm=0.004))
    assert metrics["time/comm_ms"] == 4.0
    assert metrics["time/iteration_ms"] == 20.6  # not 20.599999999999998: rounded to the microsecond
    assert metrics["traffic/sent_bytes"] == 236000.0 and metrics["train/loss"] == 1.7
    assert metrics["sync/staleness"] == 1.0
    assert not {"step", "role", "warmup", "timestamp"} & set(metrics)
    assert all(KEY.match(key) for key in metrics), sorted(metrics)


def test_warmup_steps_go_under_their_own_prefix_so_they_never_set_the_series_scale():
    metrics = metric_names.series(worker(0, warmup=True, iteration=0.9))
    assert metrics["warmup/time/iteration_ms"] == pytest.approx(900.0)
    assert all(key.startswith("warmup/") for key in metrics)


def test_values_are_rounded_to_what_the_timers_and_shares_resolve():
    metrics = metric_names.series({keys.TIME_COMM: 0.0041234567, keys.LINK_UTILIZATION: 0.123456,
                                   keys.BYTES_SENT: 1234.56, keys.LOSS: 2.302585093, "custom/thing": 1 / 3})
    assert metrics == {"time/comm_ms": 4.123, "traffic/link_utilization_pct": 12.3, "traffic/sent_bytes": 1235.0,
                       "train/loss": 2.3026, "custom/thing": 0.33333}
    assert metric_names.trial({keys.THROUGHPUT: 812.3456, keys.COMM_FRACTION: 0.30004}) == {
        "throughput_samples_per_s": 812.3, "share_comm_pct": 30.0}


def test_server_records_and_unknown_numbers_keep_a_name():
    metrics = metric_names.series({"step": 1, "role": "ps", keys.SERVER_AGGREGATION: 0.003,
                                   keys.SERVER_QUEUE_DEPTH: 2, "custom/thing": 5, "note": "text", "nan": float("nan")})
    assert metrics == {"server/aggregation_ms": pytest.approx(3.0), "server/queue_depth": 2.0, "custom/thing": 5.0}


def test_every_value_of_a_real_trial_summary_has_a_name_in_the_table():
    document = summary.summarize(records(), a_trial()).to_document()
    produced = set(document) - {keys.PER_RANK}
    assert produced <= set(metric_names.TRIAL), produced - set(metric_names.TRIAL)
    rank = summary.rank_summary(records()[1])
    assert set(rank) <= set(metric_names.RANK) | set(metric_names.SERIES), set(rank)


def test_trial_summary_in_milliseconds_and_percent_once_each():
    document = summary.summarize(records(), a_trial()).to_document()
    metrics = metric_names.trial(document)
    assert metrics["iteration_p50_ms"] == round(1000 * document[keys.P50], 3)
    assert metrics["iteration_p95_ms"] == round(1000 * document[keys.P95], 3)
    assert metrics["share_comm_pct"] == round(100 * document[keys.COMM_FRACTION], 1)
    assert metrics["mean_time_comm_ms"] == 4.0
    assert metrics["network_sent_over_bandwidth_pct"] == round(100 * document[keys.SENT_OVER_BANDWIDTH], 1)
    assert metrics["throughput_samples_per_s"] == round(document[keys.THROUGHPUT], 1)
    assert metrics["network_link_tx_mean_bytes_per_s"] == round(document[keys.LINK_TX_MEAN])
    assert metrics["network_link_tx_p95_bytes_per_s"] == round(document[keys.LINK_TX_P95])
    assert metrics["network_link_utilization_mean_pct"] == 4.0
    assert metrics["network_link_utilization_p95_pct"] == 4.0
    assert "batchSize" not in metrics and not any("Seconds" in key or "Fraction" in key for key in metrics)
    assert not [key for key in metrics if key.startswith("rank")]  # per rank: the rank runs' own means
    assert all(ONCE.match(key) for key in metrics), sorted(metrics)


def test_the_trial_series_is_its_workers_together_per_step():
    points = summary.trial_series(records(), a_trial())
    assert [p["step"] for p in points] == [0, 1, 2, 3]
    assert set(points[0]) == {"step", "timestamp", keys.LOSS}  # a warm-up step: its loss, not its slow times
    # Workers 1 and 2 at step 1: 20.6 and 25.3 ms; the median of two is their middle.
    assert points[1][keys.TIME_ITERATION] == pytest.approx((0.0206 + 0.0253) / 2)
    assert points[1][keys.TIME_COMPUTE] == pytest.approx(0.0001 + 0.002 + 0.006 + 0.0005)
    assert points[1][keys.THROUGHPUT] == pytest.approx(10 / 0.0206 + 10 / 0.0253)  # batch 10, both workers
    assert points[1][keys.LOSS] == pytest.approx(1.9) and points[1]["timestamp"] == 1.7e9 + 1
    metrics = metric_names.series(points[1])
    assert set(metrics) == {"time/iteration_ms", "time/compute_ms", "time/comm_ms", "time/wait_ms",
                            "throughput/samples_per_s", "train/loss"}
    assert metric_names.series(points[0]) == {"train/loss": 2.0}  # one loss curve from the first step


def test_the_status_summary_wire_dict_gets_the_same_names():
    wire = {keys.THROUGHPUT: 120.0, keys.P50: 0.0206, keys.COMM_FRACTION: 0.25, keys.STRAGGLER_RANK: None}
    assert metric_names.trial(wire) == {"throughput_samples_per_s": 120.0, "iteration_p50_ms": 20.6,
                                        "share_comm_pct": 25.0}


def test_rank_summary_means_are_logged_once_as_mean_of_their_series():
    metrics = metric_names.rank(summary.rank_summary(records()[2]))
    assert metrics["mean_time_iteration_ms"] == 25.3
    assert metrics["count_iterations"] == 4 and metrics["count_measured_iterations"] == 3
    assert metrics["train_loss_first"] == 2.0
    assert all(ONCE.match(key) for key in metrics), sorted(metrics)  # never a point in an iteration series


def sweep_of(matrix: dict, repetitions: int = 1) -> list[trial_.Trial]:
    from ringleader.api import experiment

    return trial_.expand(experiment.parse({
        "apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment", "metadata": {"name": "s"},
        "spec": {"sweep": {"matrix": matrix, "repetitions": repetitions}}})).trials


def test_the_sweep_compares_its_trials_one_section_per_metric_each_named_by_what_it_varies():
    labels = {"study-0": "RingAllReduce", "study-1": "ParameterServer", "study-2": "PeerToPeer"}
    metrics = metric_names.sweep({"study-0": {keys.P50: 0.0206, keys.THROUGHPUT: 100.0, keys.COMM_FRACTION: 0.5},
                                  "study-1": {keys.P50: 0.0253}, "study-2": None}, labels)
    assert metrics == {"iteration_p50_ms/RingAllReduce": 20.6, "iteration_p50_ms/ParameterServer": 25.3,
                       "throughput_samples_per_s/RingAllReduce": 100.0, "share_comm_pct/RingAllReduce": 50.0}
    assert metric_names.sweep({"study-0": {keys.P50: 0.0206}}) == {"iteration_p50_ms/study-0": 20.6}


def test_sweep_labels_name_only_what_varies_and_stay_unique_valid_keys():
    by_architecture = sweep_of({"architecture": ["ParameterServer", "RingAllReduce"]})
    assert list(schema.sweep_labels(by_architecture).values()) == ["ParameterServer", "RingAllReduce"]
    two_axes = sweep_of({"architecture": ["PeerToPeer", "RingAllReduce"], "workers": [1, 4]})
    assert list(schema.sweep_labels(two_axes).values()) == [
        "PeerToPeer-1_worker", "PeerToPeer-4_workers", "RingAllReduce-1_worker", "RingAllReduce-4_workers"]
    # Staleness means nothing under BSP: not in its label, as not in its run name; repetitions tell copies apart.
    paradigms = sweep_of({"architecture": ["ParameterServer"], "paradigm": ["BSP", "SSP"], "staleness": [2]}, 2)
    assert list(schema.sweep_labels(paradigms).values()) == [
        "BSP-repetition_0", "BSP-repetition_1", "SSP-staleness_2-repetition_0", "SSP-staleness_2-repetition_1"]
    # Nothing varies: the trial's own name.
    [alone] = sweep_of({"architecture": ["RingAllReduce"]})
    assert schema.sweep_labels([alone]) == {alone.name: alone.name}
    for trials in (by_architecture, two_axes, paradigms):
        keys_ = [metric_names.sweep_key(keys.P50, label) for label in schema.sweep_labels(trials).values()]
        assert len(set(keys_)) == len(trials)
        assert all(re.fullmatch(r"[\w.\- :/]{1,250}", key) for key in keys_), keys_


def test_the_reference_documents_every_name():
    text = REFERENCE.read_text()
    names = [name.key for name in metric_names.SERIES.values()]
    names += [name.key for name in metric_names.TRIAL.values() if name]
    names += [name.key for name in metric_names.RANK.values() if name]
    names += [f"predict_{name.key}" for name in metric_names.PREDICTION.values()]
    names += [f"predict_<architecture>_{name.key}" for name in metric_names.PREDICTED.values()]
    missing = [name for name in names if f"`{name}`" not in text]
    assert not missing, f"docs/metrics.md lacks {missing}"


def test_measured_link_rates_become_bytes_per_second_and_percent():
    metrics = metric_names.series(worker(3))
    assert metrics["traffic/link_tx_bytes_per_s"] == 5e6 + 3
    assert metrics["traffic/link_rx_bytes_per_s"] == 4e6
    assert metrics["traffic/link_utilization_pct"] == pytest.approx(4.0)
    ranked = metric_names.rank({keys.LINK_BITS_PER_SECOND: 1e9, keys.LINK_INTERFACE: "lo (loopback, shared)"})
    assert ranked == {"network_link_bits_per_s": 1e9}  # the label is not a metric
