"""MLflow's names and units for what ranks record and trials summarise, in one place; used by schema.py.

The files on disk keep contract/keys.py's names in SI units (seconds, fractions): only what reaches
MLflow is renamed and converted, here, so that a chart reads "20.6" for 20.6 ms rather than "0.02".
One scheme, `<group>/<what>_<unit>`; a count or a loss has no unit suffix:

    time/comm_ms, network/sent_bytes, train/loss    per iteration on a rank run, the step being the iteration
    warmup/<that key>                              the same for warm-up steps, apart: they do not set the scale
    mean/<that key>                                a rank's mean after warm-up (rank run, once)
    iteration/p50_ms, share/comm_pct, time/comm_ms the trial summary (trial run, once)
    rank/<r>/comm_ms                               a worker's means within the trial summary (trial run)
    predict/error_pct, predict/ring_iteration_ms   the trial summary's prediction (trial run, once)
    <trial key with _ for />/<trial name>          the sweep run's comparison of its trials

docs/metrics.md is the reference of every name; a test keeps the two in step.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from ringleader.contract import keys

MS = 1000.0  # seconds -> milliseconds
PCT = 100.0  # fraction -> percent


@dataclasses.dataclass(frozen=True)
class Name:
    """Where one value of the files goes in MLflow: its key there, and the factor from the file's unit."""

    key: str
    scale: float = 1.0
    meaning: str = ""

    def convert(self, value: float) -> float:
        return float(value) * self.scale


# A rank's iteration records (records/iterations.jsonl): step-indexed series on the rank run.
SERIES: dict[str, Name] = {
    keys.TIME_DATA: Name("time/data_ms", MS, "loading the batch"),
    keys.TIME_FORWARD: Name("time/forward_ms", MS, "forward pass"),
    keys.TIME_BACKWARD: Name("time/backward_ms", MS, "backward pass, less the communication it overlaps"),
    keys.TIME_COMM: Name("time/comm_ms", MS, "communicating gradients and weights, not waiting"),
    keys.TIME_WAIT: Name("time/wait_ms", MS, "held back by the synchronization paradigm"),
    keys.TIME_UPDATE: Name("time/update_ms", MS, "applying the update to the weights"),
    keys.TIME_EVAL: Name("time/eval_ms", MS, "held-out evaluation and the stop-at-target check"),
    keys.TIME_OTHER: Name("time/other_ms", MS, "the loop's own work: recording, progress, counters"),
    keys.TIME_ITERATION: Name("time/iteration_ms", MS, "the whole iteration, wall clock"),
    keys.BYTES_SENT: Name("network/sent_bytes", 1.0, "bytes this rank sent"),
    keys.BYTES_RECEIVED: Name("network/received_bytes", 1.0, "bytes this rank received"),
    keys.LINK_TX: Name("network/link_tx_bytes_per_s", 1.0, "bytes per second the network interface sent over "
                                                           "the iteration (loopback: every local rank's)"),
    keys.LINK_RX: Name("network/link_rx_bytes_per_s", 1.0, "bytes per second it received"),
    keys.LINK_UTILIZATION: Name("network/link_utilization_pct", PCT, "link_tx in bits/s over the link rate (the "
                                                                     "emulated cap, else the interface's speed)"),
    keys.STALENESS: Name("sync/staleness", 1.0, "iterations between the weights a gradient was computed on "
                                                "and the servers' clock (the smallest of the shards')"),
    keys.LOSS: Name("train/loss", 1.0, "training loss of the batch"),
    keys.EVAL_LOSS: Name("eval/loss", 1.0, "held-out loss of the parameters after the iteration (every "
                                           "model.evaluation.everyIterations, first worker)"),
    keys.EVAL_ACCURACY: Name("eval/accuracy_pct", PCT, "held-out accuracy of the same"),
    keys.EVAL_SECONDS: Name("eval/time_ms", MS, "how long that evaluation took (part of time/eval)"),
    keys.SERVER_AGGREGATION: Name("server/aggregation_ms", MS, "a parameter server's aggregation round"),
    keys.SERVER_QUEUE_DEPTH: Name("server/queue_depth", 1.0, "pushes a server holds back, waiting"),
    keys.SERVER_THRESHOLD: Name("sync/threshold", 1.0, "DSSP: the staleness threshold the server granted"),
}
WARMUP_PREFIX = "warmup/"
MEAN_PREFIX = "mean/"

# The trial summary (<trial>/summary.json, api.status.Summary and its extras): the trial run, once.
# None: known, and left out on purpose (batchSize is a param already).
TRIAL: dict[str, Name | None] = {
    keys.THROUGHPUT: Name("throughput/samples_per_s", 1.0, "samples per second, all workers together"),
    keys.P50: Name("iteration/p50_ms", MS, "median iteration time over every worker iteration after warm-up"),
    keys.P95: Name("iteration/p95_ms", MS, "95th percentile of the same"),
    keys.COMPUTE_FRACTION: Name("share/compute_pct", PCT, "share of iteration time spent computing"),
    keys.COMM_FRACTION: Name("share/comm_pct", PCT, "share of iteration time spent communicating"),
    keys.WAIT_FRACTION: Name("share/wait_pct", PCT, "share of iteration time spent waiting for peers"),
    keys.STRAGGLER_RANK: Name("straggler/rank", 1.0, "the worker rank with the longest compute time"),
    keys.WORKERS: Name("count/workers", 1.0, "worker ranks that recorded iterations"),
    keys.MEASURED_ITERATIONS: Name("count/measured_iterations", 1.0, "worker iterations after warm-up, all "
                                                                     "workers together"),
    keys.BATCH_SIZE: None,
    keys.COMPUTE_SECONDS: Name("time/compute_ms", MS, "mean compute time (data, forward, backward, update) per "
                                                      "worker iteration"),
    keys.COMM_SECONDS: Name("time/comm_ms", MS, "mean communication time per worker iteration"),
    keys.WAIT_SECONDS: Name("time/wait_ms", MS, "mean wait per worker iteration"),
    keys.BYTES_PER_ITERATION: Name("network/sent_bytes", 1.0, "mean bytes sent per worker iteration"),
    keys.STALENESS_MEAN: Name("sync/staleness_mean", 1.0, "mean staleness of the gradients, in iterations"),
    keys.STALENESS_MAX: Name("sync/staleness_max", 1.0, "largest staleness recorded, in iterations"),
    keys.SERVER_AGGREGATION_SECONDS: Name("server/aggregation_ms", MS, "mean aggregation round of the servers"),
    keys.SERVER_QUEUE_DEPTH_MEAN: Name("server/queue_depth", 1.0, "mean pushes held back by the servers"),
    keys.SENT_OVER_BANDWIDTH: Name("network/sent_over_bandwidth_pct", PCT, "bytes sent per second, as the ranks "
                                   "counted them, over the bandwidth cap (spec.network.bandwidth)"),
    keys.BANDWIDTH_ENFORCEMENT: None,  # a label: summary.json and the param network.enforcement have it
    keys.LINK_INTERFACE: None,  # a label, not a number: the trial's summary.json artifact has it
    keys.LINK_BITS_PER_SECOND: Name("network/link_bits_per_s", 1.0, "the link rate utilization is measured against"),
    keys.LINK_TX_MEAN: Name("network/link_tx_mean_bytes_per_s", 1.0, "mean of link_tx over worker iterations"),
    keys.LINK_TX_P95: Name("network/link_tx_p95_bytes_per_s", 1.0, "95th percentile of the same"),
    keys.LINK_UTILIZATION_MEAN: Name("network/link_utilization_mean_pct", PCT, "mean link utilization"),
    keys.LINK_UTILIZATION_P95: Name("network/link_utilization_p95_pct", PCT, "95th percentile of the same"),
    keys.LOSS_FIRST: Name("train/loss_first", 1.0, "first recorded loss, mean over workers"),
    keys.LOSS_LAST: Name("train/loss_last", 1.0, "last recorded loss, mean over workers"),
    keys.EVALUATIONS: Name("count/evaluations", 1.0, "held-out evaluations recorded"),
    keys.EVAL_LOSS_LAST: Name("eval/loss_last", 1.0, "held-out loss at the last evaluation"),
    keys.EVAL_ACCURACY_LAST: Name("eval/accuracy_last_pct", PCT, "held-out accuracy at the last evaluation"),
    keys.EVAL_ACCURACY_BEST: Name("eval/accuracy_best_pct", PCT, "highest held-out accuracy of any evaluation"),
    keys.TARGET_SECONDS: Name("target/time_s", 1.0, "seconds from the first iteration until the parameters first "
                                                    "reached model.target (earlier evaluations included)"),
    keys.TARGET_ITERATIONS: Name("target/iterations", 1.0, "iterations of the evaluating worker by then"),
}
# The trial summary's perRank entries, as rank/<rank>/<key>.
PER_RANK: dict[str, Name] = {
    keys.ITERATIONS: Name("iterations", 1.0, "iterations after warm-up"),
    keys.ITERATION_SECONDS: Name("iteration_ms", MS, "mean iteration time"),
    keys.COMPUTE_SECONDS: Name("compute_ms", MS, "mean compute time"),
    keys.COMM_SECONDS: Name("comm_ms", MS, "mean communication time"),
    keys.WAIT_SECONDS: Name("wait_ms", MS, "mean wait"),
}
PER_RANK_PREFIX = "rank/"

# The trial summary's prediction (analysis/prediction.py), as predict/<key>; its architectures' estimates as
# predict/<label>_<key>.
PREDICTION: dict[str, Name] = {
    keys.ITERATION_SECONDS: Name("iteration_ms", MS, "predicted iteration time of this trial's own architecture"),
    keys.MEASURED_ITERATION_SECONDS: Name("measured_iteration_ms", MS, "the measured mean iteration time it is "
                                                                       "compared with"),
    keys.ERROR_FRACTION: Name("error_pct", PCT, "|predicted - measured| / measured"),
    keys.COMPUTE_SECONDS: Name("compute_ms", MS, "the compute time every architecture's prediction shares"),
    keys.LINK_BITS_PER_SECOND: Name("link_bits_per_s", 1.0, "the link bandwidth the models use, probed at the "
                                                            "trial's start"),
    keys.LATENCY_SECONDS: Name("latency_ms", MS, "the per-message latency the models use, probed likewise"),
}
PREDICTED: dict[str, Name] = {
    keys.ITERATION_SECONDS: Name("iteration_ms", MS, "predicted iteration time of that architecture"),
    keys.COMM_SECONDS: Name("comm_ms", MS, "its communication not hidden behind backward"),
    keys.BAND_FRACTION: Name("band_pct", PCT, "the validated worst |error| of that kind of prediction"),
}
PREDICTION_PREFIX = "predict/"

# A rank's summary (rank-<r>/summary.json): the rank run, once; its means of SERIES go under MEAN_PREFIX.
RANK: dict[str, Name] = {
    keys.ITERATIONS: Name("count/iterations", 1.0, "records the rank wrote, warm-up included"),
    keys.MEASURED_ITERATIONS: Name("count/measured_iterations", 1.0, "records after warm-up"),
    keys.LOSS_FIRST: Name("train/loss_first", 1.0, "first recorded loss"),
    keys.LOSS_LAST: Name("train/loss_last", 1.0, "last recorded loss"),
    keys.LINK_BITS_PER_SECOND: Name("network/link_bits_per_s", 1.0, "the link rate utilization is measured against"),
}

# What the sweep run compares of its trials, as <trial key, "/" made "_">/<trial name>: the status's summary
# values, which the operator has for every trial as well.
SWEEP = (keys.THROUGHPUT, keys.P50, keys.P95, keys.COMPUTE_FRACTION, keys.COMM_FRACTION, keys.WAIT_FRACTION,
         keys.TARGET_SECONDS)

# Record keys that are indexes or labels, not metrics.
NOT_METRICS = frozenset({"step", "rank", "role", "warmup", "timestamp", "time", "wall_time", "worker"})


def is_metric_value(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _named(name: Name | None, value: Any) -> dict[str, float]:
    return {name.key: name.convert(value)} if name is not None and is_metric_value(value) else {}


def _other(key: str, value: Any) -> dict[str, float]:
    """A number the table does not know (a newer runtime's): kept under its file name and unit, not lost."""
    return {key: float(value)} if is_metric_value(value) else {}


def series(record: Mapping[str, Any]) -> dict[str, float]:
    """One iteration or server record's metrics, warm-up steps under `warmup/`."""
    prefix = WARMUP_PREFIX if record.get("warmup") is True else ""
    metrics: dict[str, float] = {}
    for key, value in record.items():
        if key in NOT_METRICS:
            continue
        for name, number in (_named(SERIES[key], value) if key in SERIES else _other(key, value)).items():
            metrics[prefix + name] = number
    return metrics


def trial(summary: Mapping[str, Any]) -> dict[str, float]:
    """A trial summary's metrics (summary.json, or api.status.Summary's wire dict)."""
    metrics: dict[str, float] = {}
    for key, value in summary.items():
        if key == keys.PER_RANK and isinstance(value, Mapping):
            for rank, values in value.items():
                if isinstance(values, Mapping):
                    metrics.update(per_rank(str(rank), values))
        elif key == keys.PREDICTION and isinstance(value, Mapping):
            metrics.update(prediction(value))
        elif key in TRIAL:
            metrics.update(_named(TRIAL[key], value))
        else:
            metrics.update(_other(key, value))
    return metrics


def per_rank(rank: str, values: Mapping[str, Any]) -> dict[str, float]:
    prefix = f"{PER_RANK_PREFIX}{rank}/"
    metrics: dict[str, float] = {}
    for key, value in values.items():
        if key in PER_RANK:
            metrics.update({prefix + k: v for k, v in _named(PER_RANK[key], value).items()})
        else:
            metrics.update({prefix + k: v for k, v in _other(key, value).items()})
    return metrics


def prediction(values: Mapping[str, Any]) -> dict[str, float]:
    """A trial summary's prediction: predict/iteration_ms, predict/error_pct, ..., predict/<label>_iteration_ms."""
    metrics: dict[str, float] = {}
    for key, value in values.items():
        if key == keys.ARCHITECTURES and isinstance(value, Mapping):
            for label, estimate in value.items():
                if isinstance(estimate, Mapping):
                    metrics.update({f"{PREDICTION_PREFIX}{label}_{k}": v for name_key, number in estimate.items()
                                    if name_key in PREDICTED
                                    for k, v in _named(PREDICTED[name_key], number).items()})
        elif key in PREDICTION:
            metrics.update({PREDICTION_PREFIX + k: v for k, v in _named(PREDICTION[key], value).items()})
    return metrics


def rank(summary: Mapping[str, Any]) -> dict[str, float]:
    """A rank summary's metrics: its counts and losses, and its means after warm-up under `mean/`."""
    metrics: dict[str, float] = {}
    for key, value in summary.items():
        if key in RANK:
            metrics.update(_named(RANK[key], value))
        elif key in SERIES:
            metrics.update({MEAN_PREFIX + k: v for k, v in _named(SERIES[key], value).items()})
        else:
            metrics.update({MEAN_PREFIX + k: v for k, v in _other(key, value).items()})
    return metrics


def sweep_key(summary_key: str, trial_name: str) -> str:
    """"iteration_p50_ms/study-3-2": the metric first, so MLflow shows one section per metric, its trials side by side."""
    name = TRIAL[summary_key]
    assert name is not None, summary_key
    return f"{name.key.replace('/', '_')}/{trial_name}"


def sweep(summaries: Mapping[str, Mapping[str, Any] | None]) -> dict[str, float]:
    """The sweep run's metrics from {trial name: its summary (None when it has none)}."""
    metrics: dict[str, float] = {}
    for trial_name, summary in summaries.items():
        for key in SWEEP:
            value = (summary or {}).get(key)
            if is_metric_value(value):
                metrics[sweep_key(key, trial_name)] = TRIAL[key].convert(value)
    return metrics
