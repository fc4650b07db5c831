"""MLflow's names, units and rounding for what ranks record and trials summarise, in one place; used by schema.py.

The files on disk keep contract/keys.py's names in SI units (seconds, fractions): only what reaches
MLflow is renamed, converted and rounded, here, so that a chart reads "20.6" for 20.6 ms rather than
"0.02", and a table "20.613" rather than fifteen digits.

MLflow's run page draws one chart per key, in sections named by the key's part before its last "/",
sorted by name, then the section of keys without "/" ("Model metrics"), then its own "System metrics";
a key with one value is drawn as a single bar. So the two kinds of key differ by their slash:

    time/comm_ms, traffic/sent_bytes, train/loss  a series, one point per iteration (the step): line charts
                                                   in their sections, first on the page
        on a rank run, the rank's records; warm-up steps under warmup/ (they would set every scale)
        on a trial run, the trial's series: per iteration, its workers together (models.summary)
    iteration_p50_ms, share_comm_pct, mean_time_comm_ms   a value logged once (a summary): no "/", so
                                                   MLflow's "Model metrics" section, after every series
    predict_error_pct, predict_ring_iteration_ms   the trial summary's prediction, once
    <once key>/<what the trial varies>             the sweep run's comparison of its trials

docs/metrics.md is the reference of every name; a test keeps the two in step.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, TypeGuard

from ringleader.contract import keys

MS = 1000.0  # seconds -> milliseconds
PCT = 100.0  # fraction -> percent
MIB = 1.0 / (1 << 20)  # bytes -> MiB
# Decimals kept, by unit: a millisecond to the microsecond the timers resolve, a percentage to 0.1, bytes whole.
TIME = 3
SHARE = 1
WHOLE = 0
SIGNIFICANT = 5
"""SIGNIFICANT digits kept of a value of no unit (a loss) or of an unknown key: 2.3026, 0.012346."""


@dataclasses.dataclass(frozen=True)
class Name:
    """Where one value of the files goes in MLflow: its key there, and the factor from the file's unit."""

    key: str
    scale: float = 1.0
    meaning: str = ""
    decimals: int | None = None
    """decimals kept after converting; None keeps SIGNIFICANT digits."""

    def convert(self, value: float) -> float:
        return rounded(float(value) * self.scale, self.decimals)


def rounded(value: float, decimals: int | None = None) -> float:
    """`value` to `decimals` places, or to SIGNIFICANT digits: what MLflow shows is what was measured."""
    if decimals is None:
        return float(f"{value:.{SIGNIFICANT}g}")
    return float(round(value, decimals))


def once(key: str) -> str:
    """A key logged once, made slash-free ("iteration/p50" -> "iteration_p50"): MLflow's Model metrics section."""
    return key.replace("/", "_")


# A rank's iteration records (records/iterations.jsonl) and a trial's series: step-indexed series on their run.
SERIES: dict[str, Name] = {
    keys.TIME_DATA: Name("time/data_ms", MS, "loading the batch", TIME),
    keys.TIME_FORWARD: Name("time/forward_ms", MS, "forward pass", TIME),
    keys.TIME_BACKWARD: Name("time/backward_ms", MS, "backward pass, less the communication it overlaps", TIME),
    keys.TIME_COMM: Name("time/comm_ms", MS, "communicating gradients and weights, not waiting", TIME),
    keys.TIME_WAIT: Name("time/wait_ms", MS, "held back by the synchronization paradigm", TIME),
    keys.TIME_UPDATE: Name("time/update_ms", MS, "applying the update to the weights", TIME),
    keys.TIME_CODEC: Name("time/codec_ms", MS, "encoding and decoding compressed gradients and weights", TIME),
    keys.TIME_EVAL: Name("time/eval_ms", MS, "held-out evaluation (the evaluating worker)", TIME),
    keys.TIME_OTHER: Name("time/other_ms", MS, "the loop's own work: recording, progress, counters", TIME),
    keys.TIME_ITERATION: Name("time/iteration_ms", MS, "the whole iteration, wall clock", TIME),
    keys.BYTES_SENT: Name("traffic/sent_bytes", 1.0, "bytes this rank sent", WHOLE),
    keys.BYTES_RECEIVED: Name("traffic/received_bytes", 1.0, "bytes this rank received", WHOLE),
    keys.BYTES_UNCOMPRESSED: Name("traffic/uncompressed_bytes", 1.0, "what traffic/sent_bytes would have been "
                                                                      "without compression", WHOLE),
    keys.BYTES_INSIDE_POD: Name("traffic/inside_pod_bytes", 1.0, "of traffic/sent_bytes, to ranks of its own pod",
                                WHOLE),
    keys.BYTES_INSIDE_NODE: Name("traffic/inside_node_bytes", 1.0, "of traffic/sent_bytes, to other pods on its "
                                                                   "node", WHOLE),
    keys.BYTES_ACROSS_NODES: Name("traffic/across_nodes_bytes", 1.0, "of traffic/sent_bytes, to other nodes", WHOLE),
    keys.TIME_COMM_INTRA: Name("time/comm_intra_ms", MS, "of time/comm, a two-level architecture's steps inside the "
                                                         "pod", TIME),
    keys.TIME_COMM_INTER: Name("time/comm_inter_ms", MS, "of time/comm, its steps across pods", TIME),
    keys.LINK_TX: Name("traffic/link_tx_bytes_per_s", 1.0, "bytes per second the network interface sent over "
                                                           "the iteration (loopback: every local rank's)", WHOLE),
    keys.LINK_RX: Name("traffic/link_rx_bytes_per_s", 1.0, "bytes per second it received", WHOLE),
    keys.LINK_UTILIZATION: Name("traffic/link_utilization_pct", PCT, "link_tx in bits/s over the link rate (the "
                                                                     "emulated cap, else the interface's speed)",
                                SHARE),
    # Under usage/, after the phases' section (time/) on a run's page: MLflow sorts its sections by name.
    keys.CPU_COMM: Name("usage/cpu_comm_ms", MS, "CPU time of the process, every thread, inside the synchronizer "
                                                 "(comm, wait, update): what its bytes cost the host", TIME),
    keys.CPU_THROTTLED: Name("usage/throttled_ms", MS, "how long the cgroup's CPU quota throttled the rank over the "
                                                      "iteration", TIME),
    keys.STALENESS: Name("sync/staleness", 1.0, "iterations between the weights a gradient was computed on "
                                                "and the servers' clock (the smallest of the shards')", WHOLE),
    keys.LOSS: Name("train/loss", 1.0, "training loss of the batch"),
    keys.EVAL_LOSS: Name("eval/loss", 1.0, "held-out loss of the parameters after the iteration (every "
                                           "model.evaluation.everyIterations, first worker)"),
    keys.EVAL_ACCURACY: Name("eval/accuracy_pct", PCT, "held-out accuracy of the same", SHARE),
    keys.EVAL_SECONDS: Name("eval/time_ms", MS, "how long that evaluation took (part of time/eval)", TIME),
    keys.SERVER_AGGREGATION: Name("server/aggregation_ms", MS, "a parameter server's aggregation round", TIME),
    keys.SERVER_QUEUE_DEPTH: Name("server/queue_depth", 1.0, "pushes a server holds back, waiting", WHOLE),
    keys.SERVER_THRESHOLD: Name("sync/threshold", 1.0, "DSSP: the staleness threshold the server granted", WHOLE),
    # Only in a trial's series (models.summary.trial_series): its workers' iteration s together.
    keys.TIME_COMPUTE: Name("time/compute_ms", MS, "computing: data, forward, backward and update", TIME),
    keys.THROUGHPUT: Name("throughput/samples_per_s", 1.0, "samples per second of the iteration, all workers "
                                                           "together", SHARE),
}
WARMUP_PREFIX = "warmup/"
MEAN_PREFIX = "mean_"
"""MEAN_PREFIX names a rank's mean of a series after warm-up: mean_time_comm_ms."""

# The trial summary (<trial>/summary.json, api.status.Summary and its extras): the trial run, once.
# None: known, and left out on purpose (batchSize is a param already, perRank is on the rank runs).
TRIAL: dict[str, Name | None] = {
    keys.THROUGHPUT: Name("throughput_samples_per_s", 1.0, "samples per second, all workers together", SHARE),
    keys.P50: Name("iteration_p50_ms", MS, "median iteration time over every worker iteration after warm-up", TIME),
    keys.P95: Name("iteration_p95_ms", MS, "95th percentile of the same", TIME),
    keys.COMPUTE_FRACTION: Name("share_compute_pct", PCT, "share of iteration time spent computing", SHARE),
    keys.COMM_FRACTION: Name("share_comm_pct", PCT, "share of iteration time spent communicating", SHARE),
    keys.WAIT_FRACTION: Name("share_wait_pct", PCT, "share of iteration time spent waiting for peers", SHARE),
    keys.STRAGGLER_RANK: Name("straggler_rank", 1.0, "the worker rank with the longest compute time", WHOLE),
    keys.WORKERS: Name("count_workers", 1.0, "worker ranks that recorded iterations", WHOLE),
    keys.MEASURED_ITERATIONS: Name("count_measured_iterations", 1.0, "worker iterations after warm-up, all "
                                                                     "workers together", WHOLE),
    keys.BATCH_SIZE: None,
    keys.PER_RANK: None,
    keys.USAGE: None,  # each rank's, on its rank run
    keys.COMPUTE_SECONDS: Name("mean_time_compute_ms", MS, "mean compute time (data, forward, backward, update) "
                                                           "per worker iteration", TIME),
    keys.COMM_SECONDS: Name("mean_time_comm_ms", MS, "mean communication time per worker iteration", TIME),
    keys.WAIT_SECONDS: Name("mean_time_wait_ms", MS, "mean wait per worker iteration", TIME),
    keys.OTHER_SECONDS: Name("mean_time_other_ms", MS, "mean evaluation and loop overhead per worker iteration",
                             TIME),
    keys.CODEC_SECONDS: Name("mean_time_codec_ms", MS, "mean encoding and decoding time per worker iteration", TIME),
    keys.CODEC_FRACTION: Name("share_codec_pct", PCT, "share of iteration time spent encoding and decoding", SHARE),
    keys.BYTES_PER_ITERATION: Name("mean_network_sent_bytes", 1.0, "mean bytes sent per worker iteration", WHOLE),
    keys.BYTES_INSIDE_POD_PER_ITERATION: Name("mean_network_inside_pod_bytes", 1.0, "of which to ranks of the same "
                                                                                    "pod", WHOLE),
    keys.BYTES_INSIDE_NODE_PER_ITERATION: Name("mean_network_inside_node_bytes", 1.0, "of which to other pods on the "
                                                                                      "same node", WHOLE),
    keys.BYTES_ACROSS_NODES_PER_ITERATION: Name("mean_network_across_nodes_bytes", 1.0, "of which to other nodes",
                                                WHOLE),
    keys.COMM_INTRA_SECONDS: Name("mean_time_comm_intra_ms", MS, "of mean_time_comm_ms, inside the pod (two-level "
                                                                 "architectures)", TIME),
    keys.COMM_INTER_SECONDS: Name("mean_time_comm_inter_ms", MS, "of mean_time_comm_ms, across pods", TIME),
    keys.COMPRESSION: None,  # a label: summary.json and the param compression.method have it
    keys.COMPRESSION_RATIO: Name("network_compression_ratio", 1.0, "bytes sent over what the same exchange would "
                                                                   "have sent uncompressed", 4),
    keys.STALENESS_MEAN: Name("mean_sync_staleness", 1.0, "mean staleness of the gradients, in iterations", 2),
    keys.STALENESS_MAX: Name("sync_staleness_max", 1.0, "largest staleness recorded, in iterations", WHOLE),
    keys.SERVER_AGGREGATION_SECONDS: Name("mean_server_aggregation_ms", MS, "mean aggregation round of the servers",
                                          TIME),
    keys.SERVER_QUEUE_DEPTH_MEAN: Name("mean_server_queue_depth", 1.0, "mean pushes held back by the servers", 2),
    keys.SENT_OVER_BANDWIDTH: Name("network_sent_over_bandwidth_pct", PCT, "bytes sent per second, as the ranks "
                                   "counted them, over the bandwidth cap (spec.network.bandwidth)", SHARE),
    keys.BANDWIDTH_ENFORCEMENT: None,  # a label: summary.json and the param network.enforcement have it
    keys.LINK_INTERFACE: None,  # a label, not a number: the trial's summary.json artifact has it
    keys.LINK_BITS_PER_SECOND: Name("network_link_bits_per_s", 1.0, "the link rate utilization is measured against",
                                    WHOLE),
    keys.LINK_TX_MEAN: Name("network_link_tx_mean_bytes_per_s", 1.0, "mean of link_tx over worker iterations",
                            WHOLE),
    keys.LINK_TX_P95: Name("network_link_tx_p95_bytes_per_s", 1.0, "95th percentile of the same", WHOLE),
    keys.LINK_UTILIZATION_MEAN: Name("network_link_utilization_mean_pct", PCT, "mean link utilization", SHARE),
    keys.LINK_UTILIZATION_P95: Name("network_link_utilization_p95_pct", PCT, "95th percentile of the same", SHARE),
    keys.COMM_CPU_SECONDS: Name("median_cpu_comm_ms", MS, "median of cpu/comm over worker iterations", TIME),
    keys.THROTTLED_SECONDS: Name("median_cpu_throttled_ms", MS, "median of cpu/throttled over worker iterations",
                                 TIME),
    keys.LOSS_FIRST: Name("train_loss_first", 1.0, "first recorded loss, mean over workers"),
    keys.LOSS_LAST: Name("train_loss_last", 1.0, "last recorded loss, mean over workers"),
    keys.EVALUATIONS: Name("count_evaluations", 1.0, "held-out evaluations recorded", WHOLE),
    keys.EVAL_LOSS_LAST: Name("eval_loss_last", 1.0, "held-out loss at the last evaluation"),
    keys.EVAL_ACCURACY_LAST: Name("eval_accuracy_last_pct", PCT, "held-out accuracy at the last evaluation", SHARE),
    keys.EVAL_ACCURACY_BEST: Name("eval_accuracy_best_pct", PCT, "highest held-out accuracy of any evaluation",
                                  SHARE),
    keys.TARGET_SECONDS: Name("target_time_s", 1.0, "seconds from the first iteration until the parameters first "
                                                    "reached model.target (earlier evaluations included)", TIME),
    keys.TARGET_ITERATIONS: Name("target_iterations", 1.0, "iterations of the evaluating worker by then", WHOLE),
    keys.NODE_COUNT: Name("placement_nodes", 1.0, "nodes the trial's ranks ran on", WHOLE),
    keys.CROSS_NODE_BYTE_SHARE: Name("placement_cross_node_bytes_pct", PCT, "share of the exchanged bytes whose two "
                                                                            "ranks ran on different nodes", SHARE),
    keys.PLACEMENT: None,  # nodes per rank: the trial run's tags and summary.json have them
}

# The trial summary's prediction (models/prediction.py), as predict_<key>; its architectures' estimates as
# predict_<label>_<key>.
PREDICTION: dict[str, Name] = {
    keys.ITERATION_SECONDS: Name("iteration_ms", MS, "predicted iteration time of this trial's own architecture",
                                 TIME),
    keys.MEASURED_ITERATION_SECONDS: Name("measured_iteration_ms", MS, "the measured median iteration time it is "
                                                                       "compared with", TIME),
    keys.ERROR_FRACTION: Name("error_pct", PCT, "|predicted - measured| / measured", SHARE),
    keys.COMPUTE_SECONDS: Name("compute_ms", MS, "the median compute time every architecture's prediction shares",
                               TIME),
    keys.LINK_BITS_PER_SECOND: Name("link_bits_per_s", 1.0, "the link bandwidth the models use, probed at the "
                                                            "trial's start", WHOLE),
    keys.LATENCY_SECONDS: Name("latency_ms", MS, "the per-message latency the models use, probed likewise", TIME),
}
PREDICTED: dict[str, Name] = {
    keys.ITERATION_SECONDS: Name("iteration_ms", MS, "predicted iteration time of that architecture", TIME),
    keys.COMM_SECONDS: Name("comm_ms", MS, "its communication not hidden behind backward", TIME),
    keys.BAND_FRACTION: Name("band_pct", PCT, "the |error| 9 in 10 held-out predictions kept within", SHARE),
    keys.HOST_SECONDS: Name("host_ms", MS, "its exchange's host term: CPU for the busiest rank's bytes at its quota",
                            TIME),
    keys.WIRE_SECONDS: Name("wire_ms", MS, "its wire term: the busiest NIC's time, the flows crossing it shared", TIME),
    keys.NIC_UTILIZATION: Name("nic_utilization_pct", PCT, "the busiest NIC's bits over what it could carry in the "
                                                           "predicted iteration", SHARE),
}
PREDICTION_PREFIX = "predict_"

# A rank's summary (rank-<r>/summary.json): the rank run, once; its means of SERIES as MEAN_PREFIX + the series
# key made slash-free.
RANK: dict[str, Name | None] = {
    keys.ITERATIONS: Name("count_iterations", 1.0, "records the rank wrote, warm-up included", WHOLE),
    keys.MEASURED_ITERATIONS: Name("count_measured_iterations", 1.0, "records after warm-up", WHOLE),
    keys.LOSS_FIRST: Name("train_loss_first", 1.0, "first recorded loss"),
    keys.LOSS_LAST: Name("train_loss_last", 1.0, "last recorded loss"),
    keys.LINK_BITS_PER_SECOND: Name("network_link_bits_per_s", 1.0, "the link rate utilization is measured against",
                                    WHOLE),
    keys.LINK_INTERFACE: None,  # a label: the rank's summary.json has it
    keys.CPU_UTILIZATION: Name("cpu_utilization_pct", PCT, "cpu_time_s over wall_time_s: 100 = one CPU busy all "
                                                           "along", SHARE),
    keys.CPU_SECONDS: Name("cpu_time_s", 1.0, "CPU time of the process, all its threads, over its iterations after "
                                              "warm-up", TIME),
    keys.WALL_SECONDS: Name("wall_time_s", 1.0, "the wall time those iterations took", TIME),
    keys.CPUS: Name("cpu_count", 1.0, "CPUs the process may run on (its affinity, capped by a cgroup quota)", 2),
    keys.MACHINE_CPUS: Name("machine_cpu_count", 1.0, "CPUs of the machine (node) the process may run on, no quota "
                                                      "applied: what the node's ranks share", 2),
    keys.THREADS: Name("cpu_threads", 1.0, "torch's intra-op threads", WHOLE),
    keys.PEAK_RSS_BYTES: Name("memory_peak_rss_mib", MIB, "the most resident memory the process held", SHARE),
    keys.LOAD_PER_CPU: Name("machine_load_per_cpu", 1.0, "the machine's 1-minute load average per CPU when training "
                                                         "ended: other work's processes as well as the trial's", 2),
    keys.HOST: None,  # a label: the rank's summary.json has it
    keys.NODE: None,  # a label: the rank run's tag ringleader.node has it
    keys.POD: None,  # labels: the rank run's tags ringleader.pod and ringleader.localRank have them
    keys.LOCAL_RANK: None,
    keys.RINGLEADER: None,  # versions: the rank's summary.json has them, an operator's sweep run's provenance too
    keys.TORCH: None,
    keys.PYTHON: None,
}

# What the sweep run compares of its trials, as <TRIAL key>/<trial label>: the status's summary values, which the
# operator has for every trial as well.
SWEEP = (keys.THROUGHPUT, keys.P50, keys.P95, keys.COMPUTE_FRACTION, keys.COMM_FRACTION, keys.WAIT_FRACTION,
         keys.TARGET_SECONDS)

# Record keys that are indexes or labels, not metrics.
NOT_METRICS = frozenset({keys.STEP, "rank", keys.ROLE, keys.WARMUP, keys.TIMESTAMP, "worker"})


def is_metric_value(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _named(name: Name | None, value: Any, prefix: str = "") -> dict[str, float]:
    return {prefix + name.key: name.convert(value)} if name is not None and is_metric_value(value) else {}


def _other(key: str, value: Any) -> dict[str, float]:
    """A number the table does not know (a newer runtime's): kept under its file name and unit, not lost."""
    return {key: rounded(float(value))} if is_metric_value(value) else {}


def series(record: Mapping[str, Any]) -> dict[str, float]:
    """One iteration, server or trial-series record's metrics, warm-up steps under `warmup/`."""
    prefix = WARMUP_PREFIX if record.get(keys.WARMUP) is True else ""
    metrics: dict[str, float] = {}
    for key, value in record.items():
        if key in NOT_METRICS:
            continue
        for name, number in (_named(SERIES[key], value) if key in SERIES else _other(key, value)).items():
            metrics[prefix + name] = number
    return metrics


# Series that are zero by design for many trials (no waiting in a ring, no codec uncompressed, no staleness under
# BSP): each is logged from its first non-zero value on, so a series zero throughout draws no flat chart. Their
# means, zeros included, are among the values logged once.
ZERO_UNTIL_USED = frozenset(SERIES[key].key for key in (
    keys.TIME_DATA, keys.TIME_FORWARD, keys.TIME_BACKWARD, keys.TIME_COMM, keys.TIME_WAIT, keys.TIME_UPDATE,
    keys.TIME_CODEC, keys.TIME_EVAL, keys.TIME_OTHER, keys.STALENESS, keys.SERVER_QUEUE_DEPTH))


def without_leading_zeros(metrics: Mapping[str, float], used: set[str]) -> dict[str, float]:
    """`metrics` (one record's, from series()) less the ZERO_UNTIL_USED keys that are 0 and not in `used`, the keys
    seen non-zero before; adds the keys non-zero now to `used`."""
    kept = {}
    for key, value in metrics.items():
        if key.removeprefix(WARMUP_PREFIX) in ZERO_UNTIL_USED and key not in used:
            if value == 0:
                continue
            used.add(key)
        kept[key] = value
    return kept


def trial(summary: Mapping[str, Any]) -> dict[str, float]:
    """A trial summary's metrics (summary.json, or api.status.Summary's wire dict), each logged once."""
    metrics: dict[str, float] = {}
    for key, value in summary.items():
        if key == keys.PREDICTION and isinstance(value, Mapping):
            metrics.update(prediction(value))
        elif key in TRIAL:
            metrics.update(_named(TRIAL[key], value))
        else:
            metrics.update({once(k): v for k, v in _other(key, value).items()})
    return metrics


def prediction(values: Mapping[str, Any]) -> dict[str, float]:
    """A trial summary's prediction: predict_iteration_ms, predict_error_pct, ..., predict_<label>_iteration_ms."""
    metrics: dict[str, float] = {}
    for key, value in values.items():
        if key == keys.ARCHITECTURES and isinstance(value, Mapping):
            for label, estimate in value.items():
                if isinstance(estimate, Mapping):
                    for name_key, number in estimate.items():
                        if name_key in PREDICTED:
                            metrics.update(_named(PREDICTED[name_key], number, f"{PREDICTION_PREFIX}{once(label)}_"))
        elif key in PREDICTION:
            metrics.update(_named(PREDICTION[key], value, PREDICTION_PREFIX))
    return metrics


def rank(summary: Mapping[str, Any]) -> dict[str, float]:
    """A rank summary's metrics, each logged once: its counts and losses, and its means after warm-up."""
    metrics: dict[str, float] = {}
    for key, value in summary.items():
        if key in RANK:
            metrics.update(_named(RANK[key], value))
        elif key in SERIES:
            name = SERIES[key]
            metrics.update(_named(dataclasses.replace(name, key=MEAN_PREFIX + once(name.key)), value))
        else:
            metrics.update({MEAN_PREFIX + once(k): v for k, v in _other(key, value).items()})
    return metrics


def sweep_key(summary_key: str, label: str) -> str:
    """"iteration_p50_ms/RingAllReduce-4_workers": the metric first, so MLflow shows one section per metric, its
    trials side by side, each named by what it varies (schema.sweep_labels)."""
    return f"{_sweep_name(summary_key).key}/{label}"


def _sweep_name(summary_key: str) -> Name:
    name = TRIAL[summary_key]
    assert name is not None, f"{summary_key} is in SWEEP, so it has a trial metric name"
    return name


def sweep(summaries: Mapping[str, Mapping[str, Any] | None],
          labels: Mapping[str, str] | None = None) -> dict[str, float]:
    """The sweep run's metrics from {trial name: its summary (None when it has none)}, each trial under its label
    ({trial name: label}, schema.sweep_labels; its name where it has none)."""
    labels = labels or {}
    metrics: dict[str, float] = {}
    for trial_name, summary in summaries.items():
        for key in SWEEP:
            value = (summary or {}).get(key)
            if is_metric_value(value):
                metrics[sweep_key(key, labels.get(trial_name, trial_name))] = _sweep_name(key).convert(value)
    return metrics
