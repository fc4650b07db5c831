"""Predicted iteration time of a trial, and of the other architectures on the same model and workers.

Called by `ringleader predict` (launch/predict.py) and, at a trial's end, by its lowest worker rank
(runtime/main.py), whose summary.json then carries the prediction into MLflow (`predict_...`).
Pure computation over one worker rank's layers.json document and iteration records; docs/predict.md
says what is fitted from what. Every time it takes from the records is a median over the iterations after
warm-up, and so is the measured iteration it is compared with: a few iterations stalled by the machine's
other load move a mean far more than the iteration the models describe.

    profile      per-layer backward times and gradient bytes (layers.json), compute medians (records)
    calibrate    the link (bandwidth B, latency a) from this trial's own (bytes, seconds) pairs:
                 the ring's bucket allreduces (layers.json "collectives"), else each iteration's
                 exchange (time/comm for the model's bytes); B from spec.network.bandwidth when set
    estimates    1PS, 4PS, P2P with study 1's cost models (T_comp + T_comm), ring with study 2's
                 DAG model over the runtime's buckets (wait-free backward, one FIFO channel)
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Any, Mapping, Sequence

from ringleader.analysis import models, summary
from ringleader.api import constants
from ringleader.api import trial as trial_
from ringleader.api.spec import Architecture
from ringleader.contract import buckets as buckets_
from ringleader.contract import environment as contract
from ringleader.contract import keys

RING = "ring"
P2P = "p2p"
COMPARED_SERVERS = (1, 4)
"""COMPARED_SERVERS are the parameter-server counts every prediction includes: 1PS and 4PS, as in study 1."""
# The ring's bucket size when the trial did not set RINGLEADER_BUCKET_BYTES, and its first bucket's cap: the model
# groups layers as runtime/ring.py does.
DEFAULT_BUCKET_BYTES = contract.DEFAULT_BUCKET_BYTES
FIRST_BUCKET_BYTES = contract.FIRST_BUCKET_BYTES


def label(architecture: Architecture | str, servers: int = 1) -> str:
    """The short name of an architecture in tables and metric names: 1ps, 4ps, p2p, ring."""
    architecture = Architecture(architecture)
    if architecture == Architecture.PARAMETER_SERVER:
        return f"{servers}ps"
    return P2P if architecture == Architecture.PEER_TO_PEER else RING


# ---------------------------------------------------------------------------------------------
# What the trial measured


@dataclasses.dataclass(frozen=True)
class Layer:
    """One layer (a module's parameters together) as the DAG model sees it."""

    name: str
    backward_seconds: float
    """backward_seconds is t_b: from the previous layer's gradient (in backward order) to this one's."""
    size_bytes: float


@dataclasses.dataclass(frozen=True)
class Profile:
    """A worker's iteration without communication: layers in forward order, and its median phases (seconds)."""

    layers: tuple[Layer, ...]
    forward_seconds: float
    """forward_seconds is t_f: loading the batch and the forward pass."""
    backward_seconds: float
    update_seconds: float

    @property
    def compute_seconds(self) -> float:
        return self.forward_seconds + self.backward_seconds + self.update_seconds

    @property
    def model_bytes(self) -> float:
        return sum(layer.size_bytes for layer in self.layers)


def layers_from_document(document: Mapping[str, Any]) -> list[Layer]:
    """Layers in forward order from a layers.json document (timing.IterationTimer.layers()).

    A layer is the parameters of one module ("net.0.weight" and "net.0.bias" are "net.0"); it is ready
    when its last gradient is, at the median over the traced iterations. Backward order is ready order;
    each layer's t_b runs from the previous ready time (backward's start for the first), and what backward
    lasts after the last gradient is the last layer's too."""
    iterations = document.get("iterations") or []
    if not iterations:
        raise ValueError("layers.json has no traced iterations: run more than warmupIterations iterations "
                         "(RINGLEADER_TRACE_ITERATIONS > 0)")
    owner = {p["name"]: p["name"].rpartition(".")[0] or p["name"] for p in document["parameters"]}
    sizes: dict[str, float] = {}
    for parameter in document["parameters"]:
        sizes[owner[parameter["name"]]] = sizes.get(owner[parameter["name"]], 0.0) + float(parameter["bytes"])
    readies: dict[str, list[float]] = {}
    for iteration in iterations:
        latest: dict[str, float] = {}
        for name, ready in iteration["ready"].items():
            if name in owner:
                layer = owner[name]
                latest[layer] = max(latest.get(layer, 0.0), ready - iteration["backwardStart"])
        for layer, ready in latest.items():
            readies.setdefault(layer, []).append(ready)
    if not readies:
        raise ValueError("layers.json records no gradient of its parameters")
    ready_at = sorted(((statistics.median(times), layer) for layer, times in readies.items()))
    backward_end = statistics.median(i["backwardEnd"] - i["backwardStart"] for i in iterations)
    in_backward_order, previous = [], 0.0
    for ready, layer in ready_at:
        in_backward_order.append(Layer(layer, max(0.0, ready - previous), sizes[layer]))
        previous = max(previous, ready)
    last = in_backward_order[-1]
    in_backward_order[-1] = dataclasses.replace(last, backward_seconds=last.backward_seconds
                                                + max(0.0, backward_end - previous))
    return in_backward_order[::-1]


def profile(layers_document: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> Profile:
    """A worker's profile: its layers, with t_b scaled so they add up to its median time/backward after
    warm-up (the traced window is a sample of the same iterations), and its median data + forward and update."""
    layers = layers_from_document(layers_document)
    counted = summary.measured(list(records), constants.ROLE_WORKER)
    if not counted:
        raise ValueError("no worker iteration records")

    def median(*phases: str) -> float:
        return statistics.median(sum(r.get(phase) or 0.0 for phase in phases) for r in counted)

    backward = median(keys.TIME_BACKWARD)
    traced = sum(layer.backward_seconds for layer in layers)
    if traced > 0:
        layers = [dataclasses.replace(layer, backward_seconds=layer.backward_seconds * backward / traced)
                  for layer in layers]
    return Profile(tuple(layers), median(keys.TIME_DATA, keys.TIME_FORWARD), backward, median(keys.TIME_UPDATE))


def collective_samples(layers_document: Mapping[str, Any]) -> list[tuple[float, float]]:
    """(bytes, seconds) of each recorded collective (the ring's bucket allreduces), as the channel served it.

    The collectives of one iteration share one channel in launch order, so a collective launched while
    its predecessor ran waited for it: its own time runs from max(its launch, the predecessor's end)."""
    samples = []
    for iteration in layers_document.get("iterations") or []:
        channel_free = -math.inf
        for collective in sorted(iteration.get("collectives") or [], key=lambda c: c["start"]):
            started = max(collective["start"], channel_free)
            if collective["end"] > started:
                samples.append((float(collective["bytes"]), collective["end"] - started))
            channel_free = max(channel_free, collective["end"])
    return samples


def exchange_samples(records: Sequence[Mapping[str, Any]], model_bytes: float) -> list[tuple[float, float]]:
    """(model bytes, time/comm) of each worker iteration after warm-up: one exchange of the whole model."""
    return [(model_bytes, float(r[keys.TIME_COMM])) for r in summary.measured(list(records), constants.ROLE_WORKER)
            if (r.get(keys.TIME_COMM) or 0.0) > 0]


def measured_iteration_seconds(records_by_rank: Mapping[int, Sequence[Mapping[str, Any]]]) -> float | None:
    """The median time/iteration over every worker iteration after warm-up (the trial's p50): what the prediction
    is compared with."""
    times = [float(r[keys.TIME_ITERATION]) for records in records_by_rank.values()
             for r in summary.measured(list(records), constants.ROLE_WORKER)
             if r.get("role", constants.ROLE_WORKER) == constants.ROLE_WORKER and r.get(keys.TIME_ITERATION)]
    return statistics.median(times) if times else None


# ---------------------------------------------------------------------------------------------
# The link, from the trial's own communication


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The link the models use, and how it was found."""

    link: models.Link
    samples: int
    """samples is how many (bytes, seconds) pairs were fitted."""
    sizes: int
    """sizes is how many distinct sizes they had: a latency needs two."""
    fit: str
    """fit says, in words, what was fitted and what was taken (docs/predict.md lists the cases)."""


def traffic(architecture: Architecture | str, workers: int, servers: int = 1) -> tuple[float, float]:
    """(F, L) of study 1's T_comm(M) = L*a + F * 8*M/B for `architecture`: F model-sized transfers on its
    busiest NIC and L latencies. (0, 0) where nothing crosses the network (one P2P peer or ring worker)."""
    architecture = Architecture(architecture)
    if architecture == Architecture.PARAMETER_SERVER:
        return 2.0 * max(workers / servers, 1.0), 2.0
    if workers == 1:
        return 0.0, 0.0
    if architecture == Architecture.PEER_TO_PEER:
        return 2.0 * (workers - 1) / workers, 2.0
    return 2.0 * (workers - 1) / workers, 2.0 * (workers - 1)


def calibrate(architecture: Architecture | str, workers: int, samples: Sequence[tuple[float, float]],
              servers: int = 1, spec_bits_per_second: float | None = None) -> Calibration:
    """The link (B, a) under which `architecture`'s cost model reproduces the measured (bytes, seconds) pairs.

    B: `spec_bits_per_second` when the trial capped the link (the latency is then the median of what the
    transfers leave of each pair's time, at least 0); else both fitted by least squares, t(M) = L*a + F*8*M/B,
    when the pairs have two sizes or more; else (one size) B is the effective rate F*8*M/t, M and t medians,
    and a is taken as 0."""
    per_byte, latencies = traffic(architecture, workers, servers)
    if per_byte == 0:
        raise ValueError(f"one {Architecture(architecture).value} worker sends nothing over the network: there "
                         "is no link to calibrate; predict from a trial with 2 or more workers")
    samples = [(m, t) for m, t in samples if m > 0 and t > 0]
    if not samples:
        raise ValueError("no communication was recorded (time/comm is 0 in every iteration after warm-up): "
                         "nothing to calibrate the link from")
    sizes = len({m for m, _ in samples})
    said = f"{len(samples)} sample{'s' if len(samples) != 1 else ''} of {sizes} size{'s' if sizes != 1 else ''}"
    if spec_bits_per_second:
        left = statistics.median(t - per_byte * models.BITS_PER_BYTE * m / spec_bits_per_second for m, t in samples)
        latency = max(0.0, left / latencies)
        return Calibration(models.Link(spec_bits_per_second, latency), len(samples), sizes,
                           f"bandwidth from spec.network.bandwidth; latency fitted as what its transfers leave of "
                           f"the measured time, median ({said})")
    if sizes >= 2:
        cost = models.fit_comm_cost(samples)
        if cost.b_seconds_per_byte > 0:
            latency = cost.a_seconds / latencies
            bandwidth = per_byte * models.BITS_PER_BYTE / cost.b_seconds_per_byte
            clamped = "; the latency fitted below 0, taken as 0" if latency < 0 else ""
            return Calibration(models.Link(bandwidth, max(0.0, latency)), len(samples), sizes,
                               f"latency and bandwidth fitted ({said}){clamped}")
    bandwidth = (per_byte * models.BITS_PER_BYTE * statistics.median(m for m, _ in samples)
                 / statistics.median(t for _, t in samples))
    why = "one message size" if sizes < 2 else "time does not grow with size"
    return Calibration(models.Link(bandwidth, 0.0), len(samples), sizes,
                       f"bandwidth fitted as the effective rate (medians); latency not fitted ({why}), taken as 0 "
                       f"({said})")


# ---------------------------------------------------------------------------------------------
# The models


@dataclasses.dataclass(frozen=True)
class Estimate:
    """One architecture's predicted iteration on the trial's model, workers and link (seconds)."""

    label: str
    model: str
    """model is "study 1" (T_comp + T_comm) or "DAG" (study 2's critical path)."""
    compute_seconds: float
    comm_seconds: float
    """comm_seconds is the communication the iteration waits for: all of it for study 1, t_c_no for the DAG."""
    iteration_seconds: float


def ring_buckets(layers: Sequence[Layer], bucket_bytes: float, sizes: Sequence[float] = ()) -> list[Layer]:
    """The layers merged as the ring fills its buckets (contract/buckets.py, the runtime's rule), or, given the
    `sizes` of the buckets a ring trial recorded, as it filled them. Returned in forward order, each with its
    layers' t_b and bytes."""
    backward = list(reversed(layers))
    groups = buckets_.group([x.size_bytes for x in backward], bucket_bytes, FIRST_BUCKET_BYTES, recorded=sizes)
    merged = [[backward[i] for i in members] for members in groups] or [[]]  # no layers: one empty bucket
    return [Layer("+".join(x.name for x in bucket), sum(x.backward_seconds for x in bucket),
                  sum(x.size_bytes for x in bucket)) for bucket in merged][::-1]


def recorded_bucket_sizes(layers_document: Mapping[str, Any]) -> list[float]:
    """The sizes of a ring trial's buckets in launch order, from its first traced iteration with collectives."""
    for iteration in layers_document.get("iterations") or []:
        if iteration.get("collectives"):
            return [float(c["bytes"]) for c in sorted(iteration["collectives"], key=lambda c: c["start"])]
    return []


def ring_dag(profile_: Profile, workers: int, link: models.Link, bucket_bytes: float,
             sizes: Sequence[float] = ()) -> models.DagIteration:
    """Study 2's DAG model of a ring trial: each bucket allreduced, first in first out, once its last
    gradient is ready; t_c of a bucket of M bytes = 2(N-1)a + 2(N-1)/N * 8M/B."""
    buckets = ring_buckets(profile_.layers, bucket_bytes, sizes)
    return models.dag_iteration([b.backward_seconds for b in buckets],
                                [models.ring_comm_seconds(workers, b.size_bytes, link) for b in buckets],
                                forward_seconds=profile_.forward_seconds, update_seconds=profile_.update_seconds)


def estimates(profile_: Profile, workers: int, link: models.Link, bucket_bytes: float = DEFAULT_BUCKET_BYTES,
              servers: Sequence[int] = COMPARED_SERVERS, bucket_sizes: Sequence[float] = ()) -> list[Estimate]:
    """Every architecture on this model, these workers and this link: kPS for each of `servers`, P2P, ring
    (its buckets of `bucket_sizes` when a ring trial recorded them, else of `bucket_bytes`)."""
    compute, size = profile_.compute_seconds, profile_.model_bytes
    found = []
    for k in sorted(set(servers)):
        comm = models.parameter_server_comm_seconds(workers, size, link, k)
        found.append(Estimate(label(Architecture.PARAMETER_SERVER, k), "study 1", compute, comm,
                              models.iteration_seconds(Architecture.PARAMETER_SERVER, compute, comm)))
    comm = models.peer_to_peer_comm_seconds(workers, size, link)
    found.append(Estimate(P2P, "study 1", compute, comm,
                          models.iteration_seconds(Architecture.PEER_TO_PEER, compute, comm)))
    dag = ring_dag(profile_, workers, link, bucket_bytes, bucket_sizes)
    found.append(Estimate(RING, "DAG", compute, dag.t_c_no, dag.t_iter))
    return found


# ---------------------------------------------------------------------------------------------
# A trial


@dataclasses.dataclass(frozen=True)
class TrialPrediction:
    """A trial's own predicted iteration, the other architectures', and what it measured."""

    architecture: str
    """architecture is the label of the trial's own architecture, one of the estimates'."""
    workers: int
    profile: Profile
    calibration: Calibration
    estimates: tuple[Estimate, ...]
    measured_seconds: float | None

    @property
    def own(self) -> Estimate:
        return next(e for e in self.estimates if e.label == self.architecture)

    @property
    def error(self) -> float | None:
        """|predicted - measured| / measured for the trial's own architecture; None without a measurement."""
        if not self.measured_seconds:
            return None
        return abs(self.own.iteration_seconds - self.measured_seconds) / self.measured_seconds

    def to_document(self) -> dict[str, Any]:
        """The trial summary's `prediction` object (contract/keys.py), in seconds and fractions."""
        return {
            keys.PREDICTED_ARCHITECTURE: self.architecture,
            keys.ITERATION_SECONDS: self.own.iteration_seconds,
            keys.MEASURED_ITERATION_SECONDS: self.measured_seconds,
            keys.ERROR_FRACTION: self.error,
            keys.COMPUTE_SECONDS: self.profile.compute_seconds,
            keys.LINK_BITS_PER_SECOND: self.calibration.link.bandwidth_bits_per_second,
            keys.LATENCY_SECONDS: self.calibration.link.latency_seconds,
            keys.FIT: self.calibration.fit,
            keys.ARCHITECTURES: {e.label: {keys.ITERATION_SECONDS: e.iteration_seconds,
                                           keys.COMM_SECONDS: e.comm_seconds} for e in self.estimates},
        }


def predict_trial(trial: trial_.Trial, records_by_rank: Mapping[int, Sequence[Mapping[str, Any]]],
                  layers_document: Mapping[str, Any], rank: int,
                  bucket_bytes: float = DEFAULT_BUCKET_BYTES) -> TrialPrediction:
    """Calibrate on worker `rank` (its layers.json document and records) and predict every architecture.
    A ring trial's own buckets are those it recorded; `bucket_bytes` makes the ring's buckets otherwise.

    ValueError, saying why, when the records cannot calibrate the models (no traced iteration, one ring
    worker, no communication recorded)."""
    spec = trial.spec
    if rank not in records_by_rank or not records_by_rank[rank]:
        raise ValueError(f"trial {trial.name} has no iteration records for rank {rank}")
    workers = len(trial.worker_slots())
    servers = spec.parameter_servers.replicas if spec.architecture == Architecture.PARAMETER_SERVER else 1
    profile_ = profile(layers_document, records_by_rank[rank])
    ring = spec.architecture == Architecture.RING_ALL_REDUCE
    samples = collective_samples(layers_document) if ring else []
    if not samples:
        samples = exchange_samples(records_by_rank[rank], profile_.model_bytes)
    calibration = calibrate(spec.architecture, workers, samples, servers, spec.network.bits_per_second())
    compared = tuple(COMPARED_SERVERS) + ((servers,) if spec.architecture == Architecture.PARAMETER_SERVER else ())
    return TrialPrediction(label(spec.architecture, servers), workers, profile_, calibration,
                           tuple(estimates(profile_, workers, calibration.link, bucket_bytes, compared,
                                           recorded_bucket_sizes(layers_document) if ring else ())),
                           measured_iteration_seconds(records_by_rank))


def table(prediction: TrialPrediction) -> str:
    """The estimates as a text table, this trial's architecture marked."""
    lines = [f"{'architecture':<13} {'model':<8} {'compute ms':>10} {'comm ms':>9} {'iteration ms':>12}"]
    for e in prediction.estimates:
        mark = " <- this trial" if e.label == prediction.architecture else ""
        lines.append(f"{e.label:<13} {e.model:<8} {1000 * e.compute_seconds:>10.3f} {1000 * e.comm_seconds:>9.3f} "
                     f"{1000 * e.iteration_seconds:>12.3f}{mark}")
    return "\n".join(lines)


def headline(prediction: TrialPrediction) -> str:
    """One line: this trial's predicted and measured (median) iteration time, and the error."""
    said = f"{prediction.architecture}: predicted {1000 * prediction.own.iteration_seconds:.3f} ms"
    if prediction.measured_seconds is None:
        return said + ", nothing measured to compare with"
    return (f"{said}, measured {1000 * prediction.measured_seconds:.3f} ms (median), "
            f"error {100 * prediction.error:.1f}%")
