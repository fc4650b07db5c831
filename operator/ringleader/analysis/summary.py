"""A trial's summary from its ranks' iteration records: throughput, iteration-time percentiles, where time went.

Called by runtime/main.py on the lowest worker rank at the end of a trial (written to
`<output>/<trial>/summary.json`, the pod's termination message, and from there the
DistributedTrainingExperiment status), and by anyone holding the records files.

Keys are camelCase, as on the wire: `to_status(summary)` picks api.status.Summary's fields
(throughput, iterationTimeP50Seconds, iterationTimeP95Seconds, computeFraction, commFraction,
waitFraction, stragglerRank); the others are extras (see `summarize`). Only records after
warm-up count; when a trial has none (every step was warm-up), all records count.
"""

from __future__ import annotations

import json
import math
import statistics
from typing import Any, Iterable, Mapping, Sequence, TypeVar

from ringleader.analysis import targets
from ringleader.api import constants, status
from ringleader.api import trial as trial_
from ringleader.contract import keys



def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between order statistics, as numpy's default."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _mean(values: Iterable[float]) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _value(record: dict, key: str) -> float:
    value = record.get(key)
    return 0.0 if value is None else float(value)


R = TypeVar("R", bound=Mapping[str, Any])  # a record: measured() keeps the caller's own type


def measured(records: Sequence[R], role: str | None = None) -> list[R]:
    """The records that count: of `role` (any when None), after warm-up, or all of them if none is."""
    of_role = [r for r in records if role is None or r.get("role", constants.ROLE_WORKER) == role]
    after_warmup = [r for r in of_role if not r.get("warmup", False)]
    return after_warmup or of_role


def rank_summary(records: list[dict]) -> dict[str, float]:
    """One rank's means after warm-up, per metric (metric names as keys), plus iteration counts."""
    counted = measured(records)
    metrics = sorted({key for record in counted for key, value in record.items()
                      if isinstance(value, (int, float)) and not isinstance(value, bool) and key not in ("step", "timestamp")})
    summary: dict[str, float] = {keys.ITERATIONS: float(len(records)), keys.MEASURED_ITERATIONS: float(len(counted))}
    for metric in metrics:
        mean = _mean(record.get(metric) for record in counted)
        if mean is not None:
            summary[metric] = mean
    losses = [r[keys.LOSS] for r in records if r.get(keys.LOSS) is not None]
    if losses:
        summary[keys.LOSS_FIRST], summary[keys.LOSS_LAST] = float(losses[0]), float(losses[-1])
    return summary


def summarize(records_by_rank: dict[int, list[dict]], trial: trial_.Trial,
              usage_by_rank: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The trial summary. Besides the api.status.Summary keys (see the module docstring):

    workers, measuredIterations (worker iterations counted, all workers), batchSize,
    computeSeconds / commSeconds / waitSeconds / codecSeconds (means per worker iteration; time/codec, encoding
    and decoding, is a share of its own, codecFraction, neither compute nor communication), bytesPerIteration
    (mean bytes sent per worker iteration), compression (spec.compression.method) and compressionRatio (bytes
    sent over bytes/uncompressed, when recorded), stalenessMean / stalenessMax (when recorded),
    serverAggregationSeconds / serverQueueDepthMean (parameter servers), bandwidthEnforcement (what applied
    spec.network.bandwidth: Emulated, Network, or None without a cap), sentOverBandwidth
    (bytes/sent per second over spec.network.bandwidth, when set: computed from what the ranks counted,
    not measured on the wire), linkTxBytesPerSecondMean / linkTxBytesPerSecondP95 and
    linkUtilizationMean / linkUtilizationP95 (measured on each worker's network interface, over its
    iterations after warm-up, when recorded; runtime/netcounters.py),
    lossFirst / lossLast (mean over workers of their first and last recorded loss),
    evaluations / evalLossLast / evalAccuracyLast / evalAccuracyBest and targetSeconds / targetIterations
    (with spec.model.evaluation and target; analysis/targets.py),
    perRank {rank: {iterations, iterationSeconds, computeSeconds, commSeconds, waitSeconds}},
    usage {rank: what its process used while training, runtime/usage.py} when `usage_by_rank` is given.
    """
    batch_size = trial.spec.model.batch_size
    worker_ranks = sorted(rank for rank, records in records_by_rank.items()
                          if any(r.get("role", constants.ROLE_WORKER) == constants.ROLE_WORKER for r in records))
    per_rank: dict[str, dict[str, float]] = {}
    iteration_times: list[float] = []
    throughput = 0.0
    totals = dict.fromkeys(("iteration", "compute", "comm", "wait", "codec", "other", "bytes", "uncompressed"), 0.0)
    count = 0
    mean_compute: dict[int, float] = {}
    staleness: list[float] = []
    link_tx: list[float] = []
    link_utilization: list[float] = []
    first_losses, last_losses = [], []
    for rank in worker_ranks:
        all_records = [r for r in records_by_rank[rank] if r.get("role", constants.ROLE_WORKER) == constants.ROLE_WORKER]
        records = measured(all_records)
        times = [_value(r, keys.TIME_ITERATION) for r in records]
        compute = [sum(_value(r, phase) for phase in keys.COMPUTE_PHASES) for r in records]
        comm = [_value(r, keys.TIME_COMM) for r in records]
        wait = [_value(r, keys.TIME_WAIT) for r in records]
        other = [_value(r, keys.TIME_EVAL) + _value(r, keys.TIME_OTHER) for r in records]
        elapsed = sum(times)
        if elapsed > 0:
            throughput += batch_size * len(records) / elapsed
        iteration_times += times
        totals["iteration"] += elapsed
        totals["compute"] += sum(compute)
        totals["comm"] += sum(comm)
        totals["wait"] += sum(wait)
        totals["other"] += sum(other)
        totals["codec"] += sum(_value(r, keys.TIME_CODEC) for r in records)
        totals["bytes"] += sum(_value(r, keys.BYTES_SENT) for r in records)
        totals["uncompressed"] += sum(_value(r, keys.BYTES_UNCOMPRESSED) for r in records)
        count += len(records)
        mean_compute[rank] = sum(compute) / len(records) if records else 0.0
        staleness += [float(r[keys.STALENESS]) for r in records if r.get(keys.STALENESS) is not None]
        link_tx += [float(r[keys.LINK_TX]) for r in records if r.get(keys.LINK_TX) is not None]
        link_utilization += [float(r[keys.LINK_UTILIZATION]) for r in records
                             if r.get(keys.LINK_UTILIZATION) is not None]
        losses = [r[keys.LOSS] for r in all_records if r.get(keys.LOSS) is not None]
        if losses:
            first_losses.append(losses[0])
            last_losses.append(losses[-1])
        per_rank[str(rank)] = {
            keys.ITERATIONS: len(records),
            keys.ITERATION_SECONDS: _mean(times),
            keys.COMPUTE_SECONDS: mean_compute[rank],
            keys.COMM_SECONDS: _mean(comm),
            keys.WAIT_SECONDS: _mean(wait),
            keys.OTHER_SECONDS: _mean(other),
        }

    def fraction(part: str) -> float | None:
        return totals[part] / totals["iteration"] if totals["iteration"] > 0 else None

    summary: dict[str, Any] = {
        keys.THROUGHPUT: throughput if count else None,
        keys.P50: percentile(iteration_times, 50),
        keys.P95: percentile(iteration_times, 95),
        keys.COMPUTE_FRACTION: fraction("compute"),
        keys.COMM_FRACTION: fraction("comm"),
        keys.WAIT_FRACTION: fraction("wait"),
        keys.STRAGGLER_RANK: max(mean_compute, key=mean_compute.get) if mean_compute else None,
        keys.WORKERS: len(worker_ranks),
        keys.MEASURED_ITERATIONS: count,
        keys.BATCH_SIZE: batch_size,
        keys.COMPUTE_SECONDS: totals["compute"] / count if count else None,
        keys.COMM_SECONDS: totals["comm"] / count if count else None,
        keys.WAIT_SECONDS: totals["wait"] / count if count else None,
        keys.OTHER_SECONDS: totals["other"] / count if count else None,
        keys.CODEC_SECONDS: totals["codec"] / count if count else None,
        keys.CODEC_FRACTION: fraction("codec"),
        keys.BYTES_PER_ITERATION: totals["bytes"] / count if count else None,
        keys.COMPRESSION: trial.spec.compression.method.value,
    }
    if totals["uncompressed"] > 0:
        summary[keys.COMPRESSION_RATIO] = totals["bytes"] / totals["uncompressed"]
    if staleness:
        summary[keys.STALENESS_MEAN] = sum(staleness) / len(staleness)
        summary[keys.STALENESS_MAX] = max(staleness)
    server_records = [r for records in records_by_rank.values() for r in measured(records, constants.ROLE_PS)
                      if r.get("role") == constants.ROLE_PS]
    if server_records:
        summary[keys.SERVER_AGGREGATION_SECONDS] = _mean(r.get(keys.SERVER_AGGREGATION) for r in server_records)
        summary[keys.SERVER_QUEUE_DEPTH_MEAN] = _mean(r.get(keys.SERVER_QUEUE_DEPTH) for r in server_records)
    bits_per_second = trial.spec.network.bits_per_second()
    summary[keys.BANDWIDTH_ENFORCEMENT] = trial.spec.network.enforced_by()
    if bits_per_second and totals["iteration"] > 0:
        summary[keys.SENT_OVER_BANDWIDTH] = 8.0 * totals["bytes"] / totals["iteration"] / bits_per_second
    if link_tx:
        summary[keys.LINK_TX_MEAN], summary[keys.LINK_TX_P95] = _mean(link_tx), percentile(link_tx, 95)
    if link_utilization:
        summary[keys.LINK_UTILIZATION_MEAN] = _mean(link_utilization)
        summary[keys.LINK_UTILIZATION_P95] = percentile(link_utilization, 95)
    if first_losses:
        summary[keys.LOSS_FIRST] = sum(first_losses) / len(first_losses)
        summary[keys.LOSS_LAST] = sum(last_losses) / len(last_losses)
    summary.update(targets.summarize(records_by_rank, trial.spec.model.target))
    summary[keys.PER_RANK] = per_rank
    if usage_by_rank:
        summary[keys.USAGE] = {str(rank): used for rank, used in sorted(usage_by_rank.items())}
    return summary


def trial_series(records_by_rank: dict[int, list[dict]], trial: trial_.Trial) -> list[dict[str, Any]]:
    """The trial's series for its MLflow run: per step any worker recorded, what its workers did together.

    The median over the workers of time/iteration, time/compute (the sum of COMPUTE_PHASES), time/comm,
    time/wait and, with compression, time/codec (a median: one stalled worker does not move it) and throughput, each worker's batch over its
    iteration time, summed: after warm-up only, whose slow first iterations would set every chart's scale
    (the rank runs have them, under warmup/). From the first step on: the mean of their losses and the
    evaluation of the worker that ran one. "timestamp" is the latest worker's: when the step had ended on all."""
    batch_size = trial.spec.model.batch_size
    phases = (keys.TIME_ITERATION, keys.TIME_COMM, keys.TIME_WAIT) + (
        (keys.TIME_CODEC,) if trial.spec.compression.compressing() else ())
    steps: dict[int, list[dict]] = {}
    for records in records_by_rank.values():
        for record in records:
            step = record.get("step")
            if record.get("role", constants.ROLE_WORKER) == constants.ROLE_WORKER and is_number(step):
                steps.setdefault(int(step), []).append(record)
    series = []
    for step, found in sorted(steps.items()):
        point: dict[str, Any] = {"step": step}
        stamps = [r["timestamp"] for r in found if is_number(r.get("timestamp"))]
        if stamps:
            point["timestamp"] = max(stamps)
        timed = [r for r in found if is_number(r.get(keys.TIME_ITERATION)) and not r.get("warmup", False)]
        if timed:
            for key in phases:
                point[key] = statistics.median(_value(r, key) for r in timed)
            point[keys.TIME_COMPUTE] = statistics.median(sum(_value(r, phase) for phase in keys.COMPUTE_PHASES)
                                                         for r in timed)
            point[keys.THROUGHPUT] = sum(batch_size / r[keys.TIME_ITERATION] for r in timed
                                         if r[keys.TIME_ITERATION] > 0)
        for key in (keys.LOSS, keys.EVAL_LOSS, keys.EVAL_ACCURACY):
            value = _mean(r.get(key) for r in found if is_number(r.get(key)))
            if value is not None:
                point[key] = value
        series.append(point)
    return series


def is_number(value: Any) -> bool:
    """A finite int or float, not a bool: a value a record or summary can chart."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def to_status(summary: dict[str, Any]) -> status.Summary:
    """The api.status.Summary part of a summary, for the experiment's status."""
    return status.Summary.model_validate({key: summary.get(key) for key in keys.STATUS_KEYS})


def compact(summary: dict[str, Any], limit: int = 4000) -> dict[str, Any]:
    """The summary within `limit` bytes of JSON (a pod's termination message holds 4 KiB): perRank, usage, the
    prediction and the probed link go first."""
    if len(json.dumps(summary)) <= limit:
        return summary
    smaller = {key: value for key, value in summary.items()
               if key not in (keys.PER_RANK, keys.USAGE, keys.PREDICTION, keys.LINK_PROBE)}
    if len(json.dumps(smaller)) <= limit:
        return smaller
    return {key: summary.get(key) for key in keys.STATUS_KEYS}
