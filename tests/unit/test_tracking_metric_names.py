"""MLflow's metric names: one scheme, milliseconds and percent, warm-up apart; the files keep their own names."""

from __future__ import annotations

import pathlib
import re

import pytest

from ringleader.analysis import summary
from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.contract import keys
from ringleader.tracking import metric_names

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


KEY = re.compile(r"^[a-z_]+(/[a-z0-9_-]+)+$")  # <group>/<what>[_<unit>], lower case


def test_iteration_records_become_milliseconds_under_one_scheme():
    metrics = metric_names.series(worker(3, comm=0.004))
    assert metrics["time/comm_ms"] == pytest.approx(4.0)
    assert metrics["time/iteration_ms"] == pytest.approx(20.6)
    assert metrics["network/sent_bytes"] == 236000.0 and metrics["train/loss"] == pytest.approx(1.7)
    assert metrics["sync/staleness"] == 1.0
    assert not {"step", "role", "warmup", "timestamp"} & set(metrics)
    assert all(KEY.match(key) for key in metrics), sorted(metrics)


def test_warmup_steps_go_under_their_own_prefix_so_they_never_set_the_series_scale():
    metrics = metric_names.series(worker(0, warmup=True, iteration=0.9))
    assert metrics["warmup/time/iteration_ms"] == pytest.approx(900.0)
    assert all(key.startswith("warmup/") for key in metrics)


def test_server_records_and_unknown_numbers_keep_a_name():
    metrics = metric_names.series({"step": 1, "role": "ps", keys.SERVER_AGGREGATION: 0.003,
                                   keys.SERVER_QUEUE_DEPTH: 2, "custom/thing": 5, "note": "text", "nan": float("nan")})
    assert metrics == {"server/aggregation_ms": pytest.approx(3.0), "server/queue_depth": 2.0, "custom/thing": 5.0}


def test_every_value_of_a_real_trial_summary_has_a_name_in_the_table():
    document = summary.summarize(records(), a_trial())
    produced = set(document) - {keys.PER_RANK}
    assert produced <= set(metric_names.TRIAL), produced - set(metric_names.TRIAL)
    per_rank = {key for values in document[keys.PER_RANK].values() for key in values}
    assert per_rank <= set(metric_names.PER_RANK)
    rank = summary.rank_summary(records()[1])
    assert set(rank) <= set(metric_names.RANK) | set(metric_names.SERIES), set(rank)


def test_trial_summary_in_milliseconds_and_percent():
    document = summary.summarize(records(), a_trial())
    metrics = metric_names.trial(document)
    assert metrics["iteration/p50_ms"] == pytest.approx(1000 * document[keys.P50])
    assert metrics["iteration/p95_ms"] == pytest.approx(1000 * document[keys.P95])
    assert metrics["share/comm_pct"] == pytest.approx(100 * document[keys.COMM_FRACTION])
    assert metrics["time/comm_ms"] == pytest.approx(4.0)
    assert metrics["rank/2/iteration_ms"] == pytest.approx(25.3)
    assert metrics["network/sent_over_bandwidth_pct"] == pytest.approx(100 * document[keys.SENT_OVER_BANDWIDTH])
    assert metrics["throughput/samples_per_s"] == pytest.approx(document[keys.THROUGHPUT])
    assert metrics["network/link_tx_mean_bytes_per_s"] == pytest.approx(document[keys.LINK_TX_MEAN])
    assert metrics["network/link_tx_p95_bytes_per_s"] == pytest.approx(document[keys.LINK_TX_P95])
    assert metrics["network/link_utilization_mean_pct"] == pytest.approx(4.0)
    assert metrics["network/link_utilization_p95_pct"] == pytest.approx(4.0)
    assert "batchSize" not in metrics and not any("Seconds" in key or "Fraction" in key for key in metrics)
    assert all(KEY.match(key) for key in metrics), sorted(metrics)


def test_the_status_summary_wire_dict_gets_the_same_names():
    wire = {keys.THROUGHPUT: 120.0, keys.P50: 0.0206, keys.COMM_FRACTION: 0.25, keys.STRAGGLER_RANK: None}
    assert metric_names.trial(wire) == {"throughput/samples_per_s": 120.0, "iteration/p50_ms": pytest.approx(20.6),
                                        "share/comm_pct": 25.0}


def test_rank_summary_means_go_under_mean():
    metrics = metric_names.rank(summary.rank_summary(records()[2]))
    assert metrics["mean/time/iteration_ms"] == pytest.approx(25.3)
    assert metrics["count/iterations"] == 4 and metrics["count/measured_iterations"] == 3
    assert metrics["train/loss_first"] == pytest.approx(2.0)
    assert not any(key.startswith("time/") for key in metrics)  # never a point in an iteration series


def test_the_sweep_compares_its_trials_one_section_per_metric():
    metrics = metric_names.sweep({"study-0": {keys.P50: 0.0206, keys.THROUGHPUT: 100.0, keys.COMM_FRACTION: 0.5},
                                  "study-1": {keys.P50: 0.0253}, "study-2": None})
    assert metrics == {"iteration_p50_ms/study-0": pytest.approx(20.6), "iteration_p50_ms/study-1": pytest.approx(25.3),
                       "throughput_samples_per_s/study-0": 100.0, "share_comm_pct/study-0": 50.0}


def test_the_reference_documents_every_name():
    text = REFERENCE.read_text()
    names = [name.key for name in metric_names.SERIES.values()]
    names += [name.key for name in metric_names.TRIAL.values() if name]
    names += [name.key for name in metric_names.RANK.values()]
    names += [f"rank/<r>/{name.key}" for name in metric_names.PER_RANK.values()]
    names += [f"predict/{name.key}" for name in metric_names.PREDICTION.values()]
    names += [f"predict/<architecture>_{name.key}" for name in metric_names.PREDICTED.values()]
    missing = [name for name in names if f"`{name}`" not in text]
    assert not missing, f"docs/metrics.md lacks {missing}"


def test_measured_link_rates_become_bytes_per_second_and_percent():
    metrics = metric_names.series(worker(3))
    assert metrics["network/link_tx_bytes_per_s"] == 5e6 + 3
    assert metrics["network/link_rx_bytes_per_s"] == 4e6
    assert metrics["network/link_utilization_pct"] == pytest.approx(4.0)
    ranked = metric_names.rank({keys.LINK_BITS_PER_SECOND: 1e9, keys.LINK_INTERFACE: "lo (loopback, shared)"})
    assert ranked == {"network/link_bits_per_s": 1e9}  # the label is not a metric
