"""A trial's summary from its ranks' iteration records: throughput, iteration-time percentiles, where time went.

Called by runtime/main.py on the lowest worker rank at the end of a trial (written to
`<output>/<trial>/summary.json`, the pod's termination message, and from there the
DistributedTrainingExperiment status), and by anyone holding the records files.

`summarize` builds a TrialSummary from one WorkerPart per worker, in parts; its document (`to_document`) has
camelCase keys, as on the wire. Readers get the typed summary back with `TrialSummary.from_document` (`read` for a
file's JSON): older files too, whose missing values are None and whose unknown keys are kept (`extras`), so the
keys of contract/keys.py are used only where the document is written and read. `to_status(document)` picks
api.status.Summary's fields (throughput, iterationTimeP50Seconds, iterationTimeP95Seconds, computeFraction,
commFraction, waitFraction, stragglerRank, targetSeconds, targetIterations). The others:
- Timing: workers, measuredIterations (worker iterations counted, all workers), batchSize, computeSeconds /
  commSeconds / waitSeconds / otherSeconds / codecSeconds (means per worker iteration; time/codec, encoding and
  decoding, is a share of its own, codecFraction, neither compute nor communication); a two-level architecture's
  commIntraSeconds / commInterSeconds (commSeconds inside and across pods).
- Traffic: bytesPerIteration (mean bytes sent per worker iteration) and, where the ranks recorded where their bytes
  went, bytesInsidePodPerIteration / bytesInsideNodePerIteration / bytesAcrossNodesPerIteration (its parts by level:
  contract/levels.py), compression (spec.compression.method),
  compressionRatio (bytes sent over bytes/uncompressed, when recorded), bandwidthEnforcement (what applied
  spec.network.bandwidth: Emulated, Network, or None without a cap), sentOverBandwidth (bytes/sent per second
  over spec.network.bandwidth, when set), linkTxBytesPerSecondMean / P95 and linkUtilizationMean / P95
  (measured on each worker's network interface after warm-up, when recorded; runtime/netcounters.py).
- Host: commCpuSecondsMedian / throttledSecondsMedian (medians of cpu/comm and cpu/throttled, when recorded).
- Learning: stalenessMean / stalenessMax (when recorded), serverAggregationSeconds / serverQueueDepthMean
  (parameter servers), lossFirst / lossLast (mean over workers of their first and last recorded loss).
- Evaluation: evaluations / evalLossLast / evalAccuracyLast / evalAccuracyBest and targetSeconds / targetIterations
  (with spec.model.evaluation and target; models/targets.py); perRank {rank: {iterations, iterationSeconds,
  computeSeconds, commSeconds, waitSeconds, otherSeconds}}; usage {rank: runtime/usage.py's and its node} when given.
- Placement (models/cross_node.py, when every rank recorded its node): nodeCount, crossNodeByteShare and
  placement {requested, nodes, ranksPerNode, crossNodePairs}.
Only records after warm-up count; when a trial has none (every step was warm-up), all records count.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import statistics
from typing import Any, Callable, Iterable, Mapping

from ringleader.models import cross_node
from ringleader.models import targets
from ringleader.models.recorded import is_number, measured, nodes_of
from ringleader.api import constants, status
from ringleader.api.spec import ExperimentSpec
from ringleader.api.trial import Trial
from ringleader.contract import keys
from ringleader.contract import records as records_



def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between order statistics, as numpy's default."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _mean(values: Iterable[float | None]) -> float | None:
    """The mean of the values given (None: not recorded, left out); None when none is."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _value(record: dict, key: str) -> float:
    value = record.get(key)
    return 0.0 if value is None else float(value)


def rank_summary(records: list[dict]) -> dict[str, float]:
    """One rank's means after warm-up, per metric (metric names as keys), plus iteration counts."""
    counted = measured(records)
    metrics = sorted({key for record in counted for key, value in record.items()
                      if isinstance(value, (int, float)) and not isinstance(value, bool)
                      and key not in (keys.STEP, keys.TIMESTAMP)})
    summary: dict[str, float] = {keys.ITERATIONS: float(len(records)), keys.MEASURED_ITERATIONS: float(len(counted))}
    for metric in metrics:
        mean = _mean(record.get(metric) for record in counted)
        if mean is not None:
            summary[metric] = mean
    losses = [r[keys.LOSS] for r in records if r.get(keys.LOSS) is not None]
    if losses:
        summary[keys.LOSS_FIRST], summary[keys.LOSS_LAST] = float(losses[0]), float(losses[-1])
    return summary


def _wire(key: str, *, optional: bool = False) -> Any:
    """A summary field written under `key`; an `optional` one is left out of the document when None."""
    return dataclasses.field(default=None, metadata={"key": key, "optional": optional})


def _document(part: Any) -> dict[str, Any]:
    """A summary part's wire fields under their keys, the optional ones that are None left out."""
    return {field.metadata["key"]: getattr(part, field.name) for field in dataclasses.fields(part)
            if "key" in field.metadata and not (field.metadata["optional"] and getattr(part, field.name) is None)}


def _wire_keys(part_type: type) -> dict[str, str]:
    """{field name: its key} of a summary part's wire fields."""
    return {field.name: field.metadata["key"] for field in dataclasses.fields(part_type) if "key" in field.metadata}


def _values(part_type: type, document: Mapping[str, Any]) -> dict[str, Any]:
    """{field name: the document's value under its key} of a summary part: what the document has not is None."""
    return {name: document.get(key) for name, key in _wire_keys(part_type).items()}


def _read(part_type: type, document: Mapping[str, Any]) -> Any:
    """A summary part from a document's keys (an older writer's lacks some: they are None)."""
    return part_type(**_values(part_type, document))


@dataclasses.dataclass(frozen=True)
class WorkerPart:
    """One worker's iterations after warm-up, per iteration: what the trial summary adds up over its workers."""

    rank: int
    times: list[float]  # time/iteration
    compute: list[float]  # the COMPUTE_PHASES, summed
    comm: list[float]
    wait: list[float]
    other: list[float]  # time/eval + time/other
    codec: list[float]
    sent: list[float]  # bytes/sent
    uncompressed: list[float]  # bytes/uncompressed
    staleness: list[float]  # where recorded, as the link values
    link_tx: list[float]
    link_utilization: list[float]
    losses: list[float]  # every recorded loss, warm-up included
    cpu_comm: list[float] = dataclasses.field(default_factory=list)  # cpu/comm, where recorded
    throttled: list[float] = dataclasses.field(default_factory=list)  # cpu/throttled, where recorded
    parts: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    """parts: where recorded, the values of PARTS' keys (bytes by level, time/comm inside and across pods)."""

    @property
    def mean_compute(self) -> float:
        return sum(self.compute) / len(self.compute) if self.compute else 0.0

    def per_rank(self) -> dict[str, float | None]:
        """The trial summary's perRank entry of this worker."""
        return {keys.ITERATIONS: len(self.times), keys.ITERATION_SECONDS: _mean(self.times),
                keys.COMPUTE_SECONDS: self.mean_compute, keys.COMM_SECONDS: _mean(self.comm),
                keys.WAIT_SECONDS: _mean(self.wait), keys.OTHER_SECONDS: _mean(self.other)}


def worker_part(rank: int, records: list[dict]) -> WorkerPart:
    """The worker's part of the summary, from its records (a server's are not its)."""
    own = [r for r in records if records_.is_worker_record(r)]
    counted = measured(own)

    def each(key: str) -> list[float]:
        return [_value(r, key) for r in counted]

    def where_recorded(key: str) -> list[float]:
        return [float(r[key]) for r in counted if r.get(key) is not None]

    return WorkerPart(
        rank=rank, times=each(keys.TIME_ITERATION),
        compute=[sum(_value(r, phase) for phase in keys.COMPUTE_PHASES) for r in counted],
        comm=each(keys.TIME_COMM), wait=each(keys.TIME_WAIT),
        other=[_value(r, keys.TIME_EVAL) + _value(r, keys.TIME_OTHER) for r in counted],
        codec=each(keys.TIME_CODEC), sent=each(keys.BYTES_SENT), uncompressed=each(keys.BYTES_UNCOMPRESSED),
        staleness=where_recorded(keys.STALENESS), link_tx=where_recorded(keys.LINK_TX),
        link_utilization=where_recorded(keys.LINK_UTILIZATION),
        losses=[float(r[keys.LOSS]) for r in own if r.get(keys.LOSS) is not None],
        cpu_comm=where_recorded(keys.CPU_COMM), throttled=where_recorded(keys.CPU_THROTTLED),
        parts={key: where_recorded(key) for key in PARTS})


PARTS = {keys.BYTES_INSIDE_POD: keys.BYTES_INSIDE_POD_PER_ITERATION,
         keys.BYTES_INSIDE_NODE: keys.BYTES_INSIDE_NODE_PER_ITERATION,
         keys.BYTES_ACROSS_NODES: keys.BYTES_ACROSS_NODES_PER_ITERATION,
         keys.TIME_COMM_INTRA: keys.COMM_INTRA_SECONDS, keys.TIME_COMM_INTER: keys.COMM_INTER_SECONDS}
"""PARTS: per-iteration parts of bytes/sent and time/comm, and the summary key of each one's mean per worker iteration
(left out where no worker recorded it: an older runtime's records, a one-level architecture's comm)."""


def mean_parts(found: list[WorkerPart]) -> dict[str, float]:
    """The means per worker iteration of PARTS' keys, under their summary keys, where recorded."""
    means = {}
    for key, summary_key in PARTS.items():
        values = [value for part in found for value in part.parts.get(key, [])]
        if values:
            means[summary_key] = sum(values) / len(values)
    return means


def total(parts: list[WorkerPart], values: Callable[[WorkerPart], list[float]]) -> float:
    """The sum over every worker's iterations of one of its per-iteration values."""
    return sum(sum(values(part)) for part in parts)


@dataclasses.dataclass(frozen=True)
class Timing:
    """Where the workers' iteration time went: api.status.Summary's timings and their means per iteration."""

    throughput: float | None = _wire(keys.THROUGHPUT)
    iteration_time_p50_seconds: float | None = _wire(keys.P50)
    iteration_time_p95_seconds: float | None = _wire(keys.P95)
    compute_fraction: float | None = _wire(keys.COMPUTE_FRACTION)
    comm_fraction: float | None = _wire(keys.COMM_FRACTION)
    wait_fraction: float | None = _wire(keys.WAIT_FRACTION)
    straggler_rank: int | None = _wire(keys.STRAGGLER_RANK)
    workers: int | None = _wire(keys.WORKERS)
    measured_iterations: int | None = _wire(keys.MEASURED_ITERATIONS)
    batch_size: int | None = _wire(keys.BATCH_SIZE)
    compute_seconds: float | None = _wire(keys.COMPUTE_SECONDS)
    comm_seconds: float | None = _wire(keys.COMM_SECONDS)
    wait_seconds: float | None = _wire(keys.WAIT_SECONDS)
    other_seconds: float | None = _wire(keys.OTHER_SECONDS)
    codec_seconds: float | None = _wire(keys.CODEC_SECONDS)
    codec_fraction: float | None = _wire(keys.CODEC_FRACTION)


def timing(parts: list[WorkerPart], batch_size: int) -> Timing:
    """Throughput adds every worker's rate; percentiles pool all their iterations; fractions are of their total
    time and means per worker iteration; the straggler has the largest mean compute."""
    pooled = [time for part in parts for time in part.times]
    count, elapsed = len(pooled), total(parts, lambda p: p.times)

    def per_iteration(phase: Callable[[WorkerPart], list[float]]) -> float | None:
        return total(parts, phase) / count if count else None

    def fraction(phase: Callable[[WorkerPart], list[float]]) -> float | None:
        return total(parts, phase) / elapsed if elapsed > 0 else None

    return Timing(
        throughput=sum(batch_size * len(p.times) / sum(p.times) for p in parts if sum(p.times) > 0) if count else None,
        iteration_time_p50_seconds=percentile(pooled, 50), iteration_time_p95_seconds=percentile(pooled, 95),
        compute_fraction=fraction(lambda p: p.compute), comm_fraction=fraction(lambda p: p.comm),
        wait_fraction=fraction(lambda p: p.wait),
        straggler_rank=max(parts, key=lambda part: part.mean_compute).rank if parts else None,
        workers=len(parts), measured_iterations=count, batch_size=batch_size,
        compute_seconds=per_iteration(lambda p: p.compute), comm_seconds=per_iteration(lambda p: p.comm),
        wait_seconds=per_iteration(lambda p: p.wait), other_seconds=per_iteration(lambda p: p.other),
        codec_seconds=per_iteration(lambda p: p.codec), codec_fraction=fraction(lambda p: p.codec))


@dataclasses.dataclass(frozen=True)
class Traffic:
    """What the workers sent, how it was compressed and capped, and what their network interfaces measured."""

    bytes_per_iteration: float | None = _wire(keys.BYTES_PER_ITERATION)
    compression: str | None = _wire(keys.COMPRESSION)
    compression_ratio: float | None = _wire(keys.COMPRESSION_RATIO, optional=True)
    bandwidth_enforcement: str | None = _wire(keys.BANDWIDTH_ENFORCEMENT)
    sent_over_bandwidth: float | None = _wire(keys.SENT_OVER_BANDWIDTH, optional=True)
    link_tx_mean: float | None = _wire(keys.LINK_TX_MEAN, optional=True)
    link_tx_p95: float | None = _wire(keys.LINK_TX_P95, optional=True)
    link_utilization_mean: float | None = _wire(keys.LINK_UTILIZATION_MEAN, optional=True)
    link_utilization_p95: float | None = _wire(keys.LINK_UTILIZATION_P95, optional=True)


def traffic(parts: list[WorkerPart], spec: ExperimentSpec) -> Traffic:
    """Bytes per worker iteration; their ratio to the uncompressed bytes and the rate they make over the
    spec's bandwidth (computed from what the ranks counted, not measured on the wire) where those exist."""
    count, elapsed = sum(len(part.times) for part in parts), total(parts, lambda p: p.times)
    sent, uncompressed = total(parts, lambda p: p.sent), total(parts, lambda p: p.uncompressed)
    bits_per_second = spec.network.bits_per_second()
    link_tx = [rate for part in parts for rate in part.link_tx]
    link_utilization = [share for part in parts for share in part.link_utilization]
    return Traffic(
        bytes_per_iteration=sent / count if count else None, compression=spec.compression.method.value,
        compression_ratio=sent / uncompressed if uncompressed > 0 else None,
        bandwidth_enforcement=spec.network.enforced_by(),
        sent_over_bandwidth=8.0 * sent / elapsed / bits_per_second if bits_per_second and elapsed > 0 else None,
        link_tx_mean=_mean(link_tx), link_tx_p95=percentile(link_tx, 95),
        link_utilization_mean=_mean(link_utilization), link_utilization_p95=percentile(link_utilization, 95))


@dataclasses.dataclass(frozen=True)
class Host:
    """What the workers' bytes cost their hosts (runtime/usage.py Counters): medians over every worker iteration
    after warm-up, left out where not recorded (an older runtime's records; a cgroup without cpu.stat)."""

    comm_cpu_seconds: float | None = _wire(keys.COMM_CPU_SECONDS, optional=True)
    throttled_seconds: float | None = _wire(keys.THROTTLED_SECONDS, optional=True)


def host(parts: list[WorkerPart]) -> Host:
    cpu = [value for part in parts for value in part.cpu_comm]
    throttled = [value for part in parts for value in part.throttled]
    return Host(comm_cpu_seconds=percentile(cpu, 50), throttled_seconds=percentile(throttled, 50))


@dataclasses.dataclass(frozen=True)
class Learning:
    """How stale the workers' gradients were, how the parameter servers kept up, and how the loss fell."""

    staleness_mean: float | None = _wire(keys.STALENESS_MEAN, optional=True)
    staleness_max: float | None = _wire(keys.STALENESS_MAX, optional=True)
    server_aggregation_seconds: float | None = _wire(keys.SERVER_AGGREGATION_SECONDS, optional=True)
    server_queue_depth_mean: float | None = _wire(keys.SERVER_QUEUE_DEPTH_MEAN, optional=True)
    loss_first: float | None = _wire(keys.LOSS_FIRST, optional=True)
    loss_last: float | None = _wire(keys.LOSS_LAST, optional=True)


def learning(parts: list[WorkerPart], records_by_rank: dict[int, list[dict]]) -> Learning:
    """Staleness over every worker iteration after warm-up, the servers' means after theirs, and the mean over
    workers of their first and last recorded loss."""
    staleness = [value for part in parts for value in part.staleness]
    servers = [r for records in records_by_rank.values() for r in measured(records, constants.ROLE_PS)
               if r.get(keys.ROLE) == constants.ROLE_PS]
    losing = [part for part in parts if part.losses]
    return Learning(
        staleness_mean=_mean(staleness), staleness_max=max(staleness) if staleness else None,
        server_aggregation_seconds=_mean(r.get(keys.SERVER_AGGREGATION) for r in servers),
        server_queue_depth_mean=_mean(r.get(keys.SERVER_QUEUE_DEPTH) for r in servers),
        loss_first=_mean(part.losses[0] for part in losing), loss_last=_mean(part.losses[-1] for part in losing))


@dataclasses.dataclass(frozen=True)
class HeldOutEvaluation:
    """The held-out evaluations (models/targets.py): how many, the last and best, and when the target was reached;
    all None without evaluations, the target's None until it is reached."""

    evaluations: int | None = _wire(keys.EVALUATIONS, optional=True)
    eval_loss_last: float | None = _wire(keys.EVAL_LOSS_LAST, optional=True)
    eval_accuracy_last: float | None = _wire(keys.EVAL_ACCURACY_LAST, optional=True)
    eval_accuracy_best: float | None = _wire(keys.EVAL_ACCURACY_BEST, optional=True)
    target_seconds: float | None = _wire(keys.TARGET_SECONDS, optional=True)
    target_iterations: int | None = _wire(keys.TARGET_ITERATIONS, optional=True)


@dataclasses.dataclass(frozen=True)
class RecordedPlacement:
    """Where the ranks ran (models/cross_node.py): all None unless every rank recorded its node."""

    node_count: int | None = _wire(keys.NODE_COUNT)
    cross_node_byte_share: float | None = _wire(keys.CROSS_NODE_BYTE_SHARE)
    """cross_node_byte_share: of the bytes the trial's exchanges carry, the share between ranks on different nodes
    (None when they carry none)."""
    nodes: Mapping[str, Any] | None = _wire(keys.PLACEMENT)
    """nodes is the placement block: requested, each rank's node, ranks per node, the pairs that crossed nodes."""

    def to_document(self) -> dict[str, Any]:
        return {} if self.node_count is None else _document(self)


@dataclasses.dataclass(frozen=True)
class LevelParts:
    """The means per worker iteration of bytes/sent by level and of time/comm inside and across pods (PARTS), where
    recorded: an older runtime's records have none, a one-level architecture no time/comm split."""

    bytes_inside_pod: float | None = _wire(keys.BYTES_INSIDE_POD_PER_ITERATION, optional=True)
    bytes_inside_node: float | None = _wire(keys.BYTES_INSIDE_NODE_PER_ITERATION, optional=True)
    bytes_across_nodes: float | None = _wire(keys.BYTES_ACROSS_NODES_PER_ITERATION, optional=True)
    comm_intra_seconds: float | None = _wire(keys.COMM_INTRA_SECONDS, optional=True)
    comm_inter_seconds: float | None = _wire(keys.COMM_INTER_SECONDS, optional=True)


@dataclasses.dataclass(frozen=True)
class TrialSummary:
    """A trial's summary, in parts; `to_document()` is summary.json (keys: contract/keys.py, the module docstring).

    The lowest worker rank adds what only it knows (runtime/main.py): where the link rates were measured, the
    link probed at the start and the prediction."""

    timing: Timing
    traffic: Traffic
    learning: Learning
    evaluation: HeldOutEvaluation = HeldOutEvaluation()
    per_rank: dict[str, dict[str, Any]] | None = _wire(keys.PER_RANK, optional=True)
    """per_rank maps each worker rank (a string, as in JSON) to WorkerPart.per_rank (None in a termination message's
    compacted summary)."""
    usage: dict[str, dict[str, Any]] | None = _wire(keys.USAGE, optional=True)
    """usage maps each rank to what its process used while training (runtime/usage.py), when given."""
    link_interface: str | None = _wire(keys.LINK_INTERFACE, optional=True)
    link_bits_per_second: float | None = _wire(keys.LINK_BITS_PER_SECOND, optional=True)
    """link_interface and link_bits_per_second: where Traffic's link rates were measured, if they were."""
    link_probe: Mapping[str, Any] | None = _wire(keys.LINK_PROBE, optional=True)
    """link_probe is the link measured at the start (runtime/linkprobe.py)."""
    prediction: Mapping[str, Any] | None = _wire(keys.PREDICTION, optional=True)
    """prediction is models/prediction.py's document (with a bucketed architecture's timeline, which the report draws
    as it is: each prediction is computed once, in the rank), or why there is none."""
    placement: RecordedPlacement = RecordedPlacement()
    host: Host = Host()
    """host is what the workers' communication cost their CPUs, where recorded."""
    parts: LevelParts = LevelParts()
    extras: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """extras: what a document read (from_document) held under keys this version does not know, kept as found."""

    def to_document(self) -> dict[str, Any]:
        """The summary.json document: camelCase keys, as on the wire; what is not known left out."""
        return {**_document(self.timing), **_document(self.traffic), **_document(self.parts), **_document(self.host),
                **_document(self.learning), **_document(self.evaluation), **_document(self),
                **self.placement.to_document(), **self.extras}

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> TrialSummary:
        """The summary a summary.json document (any version's), a termination message or a status's wire dict
        holds; to_document gives the same document back for what this version writes."""
        parts: dict[str, Any] = {name: _read(part_type, document) for name, part_type in _PART_TYPES.items()}
        return cls(**parts, **_values(cls, document),
                   extras={key: value for key, value in document.items() if key not in _KNOWN_KEYS})

    @functools.cached_property
    def _numbers(self) -> dict[str, float]:
        return {key: float(value) for key, value in self.to_document().items() if is_number(value)}

    def number(self, key: str) -> float | None:
        """A value by its summary key (contract/keys.py) as a float, for a report choosing its metric by name;
        None where the summary has no number under it."""
        return self._numbers.get(key)


_PART_TYPES = {"timing": Timing, "traffic": Traffic, "learning": Learning, "evaluation": HeldOutEvaluation,
               "placement": RecordedPlacement, "host": Host, "parts": LevelParts}
"""_PART_TYPES: TrialSummary's parts, by field name, each read from a document by its own keys."""
_KNOWN_KEYS = frozenset(key for part_type in (*_PART_TYPES.values(), TrialSummary)
                        for key in _wire_keys(part_type).values())
"""_KNOWN_KEYS: every key a TrialSummary writes; a document's others are its extras."""


def summarize(records_by_rank: dict[int, list[dict]], trial: Trial,
              usage_by_rank: dict[int, dict[str, Any]] | None = None) -> TrialSummary:
    """The trial summary of every rank's records (the ranks that recorded no worker iteration are servers) and,
    when given, what each rank's process used (runtime/usage.py)."""
    parts = [worker_part(rank, records) for rank, records in sorted(records_by_rank.items())
             if any(records_.is_worker_record(r) for r in records)]
    return TrialSummary(
        timing=timing(parts, trial.spec.model.batch_size), traffic=traffic(parts, trial.spec),
        learning=learning(parts, records_by_rank),
        evaluation=_read(HeldOutEvaluation, targets.summarize(records_by_rank, trial.spec.model.target)),
        per_rank={str(part.rank): part.per_rank() for part in parts},
        usage={str(rank): used for rank, used in sorted(usage_by_rank.items())} if usage_by_rank else None,
        placement=_read(RecordedPlacement, cross_node.placement(trial, nodes_of(usage_by_rank))), host=host(parts),
        parts=_read(LevelParts, mean_parts(parts)))


def read(document: Any) -> TrialSummary | None:
    """The trial summary a summary.json file held (layout.read_json's); None when absent or not a JSON object."""
    return TrialSummary.from_document(document) if isinstance(document, dict) else None


def trial_series(records_by_rank: dict[int, list[dict]], trial: Trial) -> list[dict[str, Any]]:
    """The trial's series for its MLflow run: per step any worker recorded, what its workers did together.

    The median over the workers of time/iteration, time/compute (the sum of COMPUTE_PHASES), time/comm,
    time/wait and, with compression, time/codec (a median: one stalled worker does not move it) and throughput, each
    worker's batch over its iteration time, summed: after warm-up only, whose slow first iterations would set every
    chart's scale (the rank runs have them, under warmup/). From the first step on: the mean of their losses and the
    evaluation of the worker that ran one. "timestamp" is the latest worker's: when the step had ended on all."""
    batch_size = trial.spec.model.batch_size
    phases = (keys.TIME_ITERATION, keys.TIME_COMM, keys.TIME_WAIT) + (
        (keys.TIME_CODEC,) if trial.spec.compression.compressing() else ())
    steps: dict[int, list[dict]] = {}
    for records in records_by_rank.values():
        for record in records:
            step = record.get(keys.STEP)
            if records_.is_worker_record(record) and is_number(step):
                steps.setdefault(int(step), []).append(record)
    series = []
    for step, found in sorted(steps.items()):
        point: dict[str, Any] = {keys.STEP: step}
        stamps = [r[keys.TIMESTAMP] for r in found if is_number(r.get(keys.TIMESTAMP))]
        if stamps:
            point[keys.TIMESTAMP] = max(stamps)
        timed = [r for r in found if is_number(r.get(keys.TIME_ITERATION)) and not r.get(keys.WARMUP, False)]
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


def to_status(summary: dict[str, Any]) -> status.Summary:
    """The api.status.Summary part of a summary, for the experiment's status."""
    return status.Summary.model_validate({key: summary.get(key) for key in keys.STATUS_KEYS})


def compact(summary: dict[str, Any], limit: int = 4000) -> dict[str, Any]:
    """The summary within `limit` bytes of JSON (a pod's termination message holds 4 KiB): perRank, usage, the
    prediction, the probed link and the placement's per-rank nodes go first."""
    if len(json.dumps(summary)) <= limit:
        return summary
    smaller = {key: value for key, value in summary.items()
               if key not in (keys.PER_RANK, keys.USAGE, keys.PREDICTION, keys.LINK_PROBE, keys.PLACEMENT)}
    if len(json.dumps(smaller)) <= limit:
        return smaller
    return {key: summary.get(key) for key in keys.STATUS_KEYS}
