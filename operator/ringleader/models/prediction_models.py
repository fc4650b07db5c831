"""Each architecture's prediction of an iteration from one trial's measurements: what it is given and how it prices
the communication an iteration waits for (models/architectures.py names each architecture's; models/prediction.py
runs them).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from ringleader.api import variants
from ringleader.api.variants import Architecture, Paradigm
from ringleader.models import calibration as calibration_
from ringleader.models import collectives, cost_models, overlap, resources
from ringleader.models import prediction_serving as serving_
from ringleader.models import profile as profile_


@dataclasses.dataclass(frozen=True)
class Inputs:
    """What every architecture's model is given: one trial's measurements."""

    profile: profile_.Profile
    compute: profile_.Compute
    calibration: calibration_.Calibration
    workers: int
    paradigm: Paradigm
    bucketing: overlap.RuntimeBuckets
    """bucketing is how a ring would group this model's gradients: as the ring trial recorded, else the runtime's."""
    wire: collectives.Wire | None = None
    """wire is the trial's compression as it measured it (models/collectives.py), None uncompressed: the ring's rounds,
    the others' smaller messages where their architecture takes the method. Its codec is in C already."""
    architecture: Architecture | None = None
    """architecture is the trial's own, whose sharing of the cores its compute carries; None: the compute as it is."""
    serving: serving_.Serving = serving_.Serving()
    """serving is the work of serving the model per iteration (prediction_serving.py): a server's, or 1/N a peer's."""
    cores: serving_.Cores = serving_.Cores()
    """cores is how crowded the trial's machines were: workers computing at once share them."""
    where: resources.Where = resources.Where()
    """where is the trial's placement and its ranks' CPU quotas: what the host and wire terms are priced on."""
    host: resources.HostCost | None = None
    """host is what a byte cost a worker's CPU while training (resources.host_cost); None: not recorded."""
    pods: cost_models.Pods = cost_models.ONE_PER_POD
    """pods is how the workers sit (`workers.ranksPerPod`) and the link inside a pod; the two-level models price it."""

    def for_architecture(self, architecture: Architecture) -> Inputs:
        """These inputs with the compute `architecture`'s workers would have on the same machines."""
        return dataclasses.replace(self, compute=serving_.moved(self.compute, self.serving, self.cores, self.workers,
                                                                self.architecture, architecture))


@dataclasses.dataclass(frozen=True)
class Model:
    """One architecture's prediction: what it is called, and the communication an iteration waits for."""

    name: str
    comm_seconds: Callable[[Inputs, int], float]
    """comm_seconds(inputs, servers): servers counts for ParameterServer only."""
    compute_seconds: Callable[[Inputs], float] = lambda i: i.compute.critical(i.paradigm)
    """compute_seconds(inputs): the compute an iteration waits for (profile.Compute.critical)."""
    paradigm: Paradigm | None = None
    """paradigm is the one the architecture always runs (the ring: BSP); None: the trial's."""
    replay: Callable[[Inputs], overlap.Replay] | None = None
    """replay is a bucketed architecture's backward replayed with its buckets sent (the overlap figure draws it)."""


def ring_compute(inputs: Inputs) -> float:
    """The compute a ring's iteration waits for. It runs BSP: an allreduce ends once the last rank has launched it,
    so each iteration waits for its slowest worker. On an emulated link each rank's card carries its buckets one after
    another from its own launch, the last one from the last rank's (runtime/nic.py, runtime/ring.py), which hides a
    late rank up to the paced time (docs/performance.md, section 3): the workers' recorded steps are replayed so
    (profile.Compute.paced_seconds), the last bucket ending no sooner than its measured allreduce after the last
    rank."""
    return paced_compute(inputs, ring_replay(inputs), inputs.calibration.measured_allreduce_seconds)


def paced_compute(inputs: Inputs, replay: overlap.Replay, measured: Callable[[float], float]) -> float:
    """ring_compute of a ring whose buckets were replayed as `replay`, a bucket of S bytes lasting `measured(S)`
    without the emulated cap."""
    if inputs.calibration.kind != calibration_.EMULATED:
        return inputs.compute.critical(Paradigm.BSP)
    last = measured(replay.buckets[-1].size_bytes) if replay.buckets else 0.0
    return inputs.compute.paced_seconds(replay.exposed_seconds, last) - replay.exposed_seconds


def _round_seconds(inputs: Inputs, size_bytes: float, round_: collectives.RoundFractions) -> float:
    """One round of a bucket: the probed allreduce of its payload (a gather's: of the payload an allreduce sends as
    many bytes for, N/2 times it)."""
    payload = round_.payload * size_bytes
    return inputs.calibration.allreduce_seconds(payload * inputs.workers / 2 if round_.gather else payload)


def _rounds(inputs: Inputs) -> tuple[collectives.RoundFractions, ...]:
    return inputs.wire.rounds if inputs.wire else (collectives.RoundFractions(1.0),)


def ring_replay(inputs: Inputs) -> overlap.Replay:
    """The ring's buckets sent after backward, each costing the probed allreduce of its size, or of its first round's
    payload when compressing (study 2's DAG model)."""
    first = _rounds(inputs)[0]
    return overlap.replay(inputs.profile, inputs.bucketing, lambda size: _round_seconds(inputs, size, first))


def ring_comm(inputs: Inputs) -> float:
    """t_c_no, and a compression's later rounds (PowerSGD's Q), each bucket's after every first round."""
    replay = ring_replay(inputs)
    return replay.exposed_seconds + sum(_round_seconds(inputs, bucket.size_bytes, round_)
                                        for round_ in _rounds(inputs)[1:] for bucket in replay.buckets)


def hierarchical_measured_seconds(inputs: Inputs, size_bytes: float) -> float:
    """One bucket of the hierarchical ring without the emulated cap: the ring of the pod's k ranks on the link inside
    the pod (cost_models.ring_comm_seconds: 2(k-1)/k * S/B_in + 2(k-1)a_in), and the allreduce of its S/k chunk among
    the P pods, the probed allreduce of every worker moved from N ranks to P (a ring's startup grows with its
    steps, 2(R-1)a, and its bytes with 2(R-1)/R)."""
    k, calibration = inputs.pods.ranks, inputs.calibration
    count = inputs.pods.count(inputs.workers)
    inside = cost_models.ring_comm_seconds(k, size_bytes, inputs.pods.link(calibration.link))
    if count == 1 or calibration.collective is None:
        return inside
    n = calibration.workers
    fitted = calibration.collective
    moved = cost_models.CommCost(fitted.a_seconds * (count - 1) / (n - 1),
                                 fitted.b_seconds_per_byte * (count - 1) / count * n / (n - 1))
    return inside + max(0.0, moved.seconds(size_bytes / k))


def hierarchical_seconds(inputs: Inputs, size_bytes: float) -> float:
    """One bucket of the hierarchical ring: as measured, or the pod's card carrying 2(P-1)/P * S under an emulated
    cap (runtime/hierarchical_ring.py) when that is longer. With one rank per pod: the ring's probed allreduce."""
    measured = hierarchical_measured_seconds(inputs, size_bytes)
    cap, count = inputs.calibration.link.cap_bits_per_second, inputs.pods.count(inputs.workers)
    if not cap or count == 1:
        return measured
    return max(measured, 2.0 * (count - 1) / count * cost_models.BITS_PER_BYTE * size_bytes / cap)


def _hierarchical_rounds(inputs: Inputs) -> tuple[collectives.RoundFractions, ...]:
    """The trial's rounds where the hierarchical ring takes its method (api/variants.py CODECS), else one whole."""
    wire = inputs.wire
    takes = (wire is None or wire.method is None
             or variants.takes(Architecture.HIERARCHICAL_RING_ALL_REDUCE, wire.method))
    return _rounds(inputs) if takes else (collectives.RoundFractions(1.0),)


def hierarchical_replay(inputs: Inputs) -> overlap.Replay:
    """The hierarchical ring's buckets sent after backward (study 2's DAG model), each of its first round's payload."""
    first = _hierarchical_rounds(inputs)[0]
    return overlap.replay(inputs.profile, inputs.bucketing,
                          lambda size: hierarchical_seconds(inputs, first.payload * size))


def hierarchical_comm(inputs: Inputs) -> float:
    """t_c_no of the hierarchical ring, and a compression's later rounds, each bucket's after every first round."""
    replay = hierarchical_replay(inputs)
    return replay.exposed_seconds + sum(hierarchical_seconds(inputs, round_.payload * bucket.size_bytes)
                                        for round_ in _hierarchical_rounds(inputs)[1:] for bucket in replay.buckets)


def message_bytes(inputs: Inputs, architecture: Architecture) -> float:
    """M as a parameter server's or a peer's messages carry it: compressed where the architecture takes the trial's
    method (FP16, BF16: one round, its payload), whole otherwise."""
    wire = inputs.wire
    if wire is None or wire.method is None or not variants.takes(architecture, wire.method):
        return inputs.profile.total_bytes
    return inputs.profile.total_bytes * sum(r.payload for r in wire.rounds)
