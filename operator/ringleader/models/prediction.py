"""Predicted iteration time of a trial, and of the other architectures on the same model, workers and link.

Called by `ringleader predict` (commands/predict.py) and, at a trial's end, by its lowest worker rank
(runtime/main.py), whose summary.json then carries the prediction into MLflow (`predict_...`) and the
report (prediction_figure.py). docs/predict.md says what is measured and fitted from what;
docs/predict-validation.md how close it comes. Every time it takes from the records is a median over the
iterations after warm-up (profile.py), and so is the measured iteration it is compared with: a few iterations
stalled by the machine's other load move a mean far more than the iteration the models describe.

    profile    the rank's gradients and backward (layers.json) and every worker's compute (records): profile.py
    link       the one link every architecture is priced on, probed at the trial's start: calibration.py; with
               several ranks to a pod, that link without its emulated cap inside a pod (the cap is the pod's card)
    resources  the host (a byte's CPU at the pod's quota) and the wire (each node's NIC shared by the flows that
               cross it) at the trial's placement, shown apart; on real NICs they price 1PS/kPS and P2P: pricing.py
    estimate   the compute the iteration waits for (BSP: the slowest worker of each iteration; moved to each
               architecture's sharing of the cores, plus a server's or peer's serving: prediction_serving.py)
               plus the communication it does not hide, per architecture (models/architectures.py: its Model,
               models/prediction_models.py)
    band       the |error| 9 in 10 held-out predictions of its kind kept within, or why it has none: validation.py
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from ringleader.models import calibration as calibration_
from ringleader.models import collectives, cost_models, overlap, pricing, resources, validation, whatif
from ringleader.models import prediction_serving as serving_
from ringleader.models import profile as profile_
from ringleader.models.architectures import ARCHITECTURE_MODELS
from ringleader.models.prediction_models import Inputs, message_bytes
from ringleader.api.trial import Trial
from ringleader.api import constants, variants
from ringleader.api.variants import Architecture
from ringleader.contract import environment as contract
from ringleader.contract import keys

COMPARED_SERVERS = (1, 4)
"""COMPARED_SERVERS are the parameter-server counts every prediction includes: 1PS and 4PS, as in study 1."""
DEFAULT_BUCKET_BYTES = contract.DEFAULT_BUCKET_BYTES
"""DEFAULT_BUCKET_BYTES is the ring's bucket size when the trial did not set RINGLEADER_BUCKET_BYTES."""


@dataclasses.dataclass(frozen=True)
class ArchitectureEstimate:
    """One architecture's predicted iteration on the trial's model, workers and link (seconds)."""

    label: str
    model: str
    compute_seconds: float
    """compute_seconds is C, the compute the iteration waits for."""
    comm_seconds: float
    """comm_seconds is the communication the iteration waits for: all of it, the ring's what backward left."""
    serving_seconds: float
    """serving_seconds is the part of compute_seconds a server or peer spends serving the model after the pushes."""
    band: validation.Coverage | None
    note: str
    """note says why there is no band, or where the band does not quite apply; empty otherwise."""
    resources: resources.ExchangeResources | None = None
    """resources are the exchange's host and wire terms (resources.py), shown apart; None where not priced."""

    @property
    def iteration_seconds(self) -> float:
        return self.compute_seconds + self.comm_seconds

    @property
    def nic_utilization(self) -> float | None:
        return self.resources.nic_utilization(self.iteration_seconds) if self.resources else None


def estimates(inputs: Inputs, servers: Sequence[int] = COMPARED_SERVERS) -> list[ArchitectureEstimate]:
    """Every architecture on these inputs, in the enum's order: one with servers for each of `servers` (kPS)."""
    chosen = [(a, k) for a, traits in variants.ARCHITECTURES.items()
              for k in (sorted(set(servers)) if traits.has_servers else (1,))]
    found = []
    trial_share = trial_cross_node_share(inputs)
    for architecture, k in chosen:
        model, name = ARCHITECTURE_MODELS[architecture].prediction, variants.label(architecture, k)
        moved = inputs.for_architecture(architecture)
        paradigm = model.paradigm or inputs.paradigm
        serves = inputs.serving.seconds(architecture, inputs.workers, k)
        priced = two_resources(inputs, architecture, k)
        placed = validation.Placed(trial_share is not None, trial_share or 0.0, priced.cross_node_share,
                                   inputs.where.cpus.get(constants.ROLE_WORKER))
        band, note = validation.band(inputs.calibration.kind, name, inputs.workers, paradigm, inputs.cores, placed)
        comm, how = model.comm_seconds(moved, k), ""
        if placed_on_nics(inputs, architecture):
            comm = priced.seconds + 2.0 * inputs.calibration.link.latency_seconds
            how = f"priced at its placement, {priced.bound}-bound"
        found.append(ArchitectureEstimate(name, model.name, model.compute_seconds(moved) + serves, comm, serves, band,
                                          "; ".join(filter(None, (note, how, _compression_note(inputs, architecture)))),
                                          priced))
    return found


def two_resources(inputs: Inputs, architecture: Architecture, servers: int) -> resources.ExchangeResources:
    """The exchange's host and wire terms at the trial's placement (pricing.price), on the NIC's rate or else the
    probed link's."""
    bits = inputs.where.nic_bits_per_second or inputs.calibration.link.effective_bits_per_second
    has_servers = variants.ARCHITECTURES[architecture].has_servers
    return pricing.price(architecture, servers if has_servers else 0, inputs.workers,
                         message_bytes(inputs, architecture), inputs.where, bits, inputs.host, inputs.pods.ranks)


def trial_cross_node_share(inputs: Inputs) -> float | None:
    """The share of the trial's own bytes that crossed nodes, as its models place them; None where its ranks' nodes
    or its architecture are not known."""
    if inputs.architecture is None or not inputs.where.known:
        return None
    return two_resources(inputs, inputs.architecture, max(1, len(inputs.where.server_nodes))).cross_node_share


def placed_on_nics(inputs: Inputs, architecture: Architecture) -> bool:
    """Whether `architecture`'s communication is priced by the longer of the two terms (plus 2a): a parameter server's
    or the peers' (the architectures whose ranks serve the model in messages) on real NICs, a network or one the
    cluster caps, whose placement every rank recorded. An emulated card keeps its own full-duplex rule
    (runtime/nic.py) and a loopback is the CPU itself, both validated as they are (docs/predict-validation.md); a
    ring is priced by its probed allreduce, which already ran on those NICs. Elsewhere the terms are shown only."""
    return (inputs.calibration.kind in (calibration_.NETWORK, calibration_.ENFORCED) and inputs.where.known
            and variants.ARCHITECTURES[architecture].serving_role is not None)


def _compression_note(inputs: Inputs, architecture: Architecture) -> str:
    """How a compressed trial's compression was priced for `architecture`; '' uncompressed."""
    wire = inputs.wire
    if wire is None or wire.method is None:
        return ""
    method = wire.method.value
    if not variants.takes(architecture, wire.method):
        takers = [a.value for a in variants.CODECS[wire.method].architectures]
        return f"{method} needs {variants.either(takers)}: priced uncompressed"
    return (f"priced at the trial's {method}, c = {wire.ratio(inputs.workers):.3g}, its codec in compute; "
            "the band was validated uncompressed")


# ---------------------------------------------------------------------------------------------
# A trial


@dataclasses.dataclass(frozen=True)
class TrialPrediction:
    """A trial's own predicted iteration, the other architectures', and what it measured."""

    architecture: str
    """architecture is the label of the trial's own architecture, one of the estimates'."""
    inputs: Inputs
    estimates: tuple[ArchitectureEstimate, ...]
    measured_seconds: float | None

    @property
    def own(self) -> ArchitectureEstimate:
        return next(e for e in self.estimates if e.label == self.architecture)

    @property
    def cannot_predict(self) -> str | None:
        """Why the models cannot predict on this trial's kind of link (validation.UNPREDICTABLE); None where they
        can."""
        return validation.UNPREDICTABLE.get(self.inputs.calibration.kind)

    @property
    def error(self) -> float | None:
        """|predicted - measured| / measured for the trial's own architecture; None without a measurement."""
        if not self.measured_seconds:
            return None
        return abs(self.own.iteration_seconds - self.measured_seconds) / self.measured_seconds

    def to_document(self) -> dict[str, Any]:
        """The trial summary's `prediction` object (contract/keys.py), in seconds and fractions."""
        link = self.inputs.calibration
        return {
            keys.PREDICTED_ARCHITECTURE: self.architecture,
            keys.WORKERS: self.inputs.workers,
            keys.ITERATION_SECONDS: self.own.iteration_seconds,
            keys.MEASURED_ITERATION_SECONDS: self.measured_seconds,
            keys.ERROR_FRACTION: self.error,
            keys.COMPUTE_SECONDS: self.own.compute_seconds,
            keys.LINK_BITS_PER_SECOND: link.link.effective_bits_per_second,
            keys.LATENCY_SECONDS: link.link.latency_seconds,
            keys.LINK_KIND: link.kind,
            keys.FIT: link.fit,
            keys.CANNOT_PREDICT: self.cannot_predict,
            keys.HOST_NOTE: self.host_note,
            keys.ARCHITECTURES: {e.label: {keys.ITERATION_SECONDS: e.iteration_seconds,
                                           keys.COMM_SECONDS: e.comm_seconds,
                                           keys.BAND_FRACTION: e.band.within if e.band else None,
                                           keys.BAND_MEDIAN_FRACTION: e.band.median if e.band else None,
                                           keys.BAND_NOTE: e.note,
                                           keys.HOST_SECONDS: e.resources.host_seconds if e.resources else None,
                                           keys.WIRE_SECONDS: e.resources.wire_seconds if e.resources else None,
                                           keys.BOUND: e.resources.bound if e.resources else None,
                                           keys.NIC_UTILIZATION: e.nic_utilization} for e in self.estimates},
            **self.timeline(),
        }

    def timeline(self) -> dict[str, Any]:
        """The DAG model's iteration of this trial's bucketed architecture ({TIMELINE: ...}); {} for another."""
        architecture = self.inputs.architecture
        replayed = ARCHITECTURE_MODELS[architecture].prediction.replay if architecture is not None else None
        if replayed is None:
            return {}
        replay = replayed(self.inputs)
        buckets = [[start, end] for start, end in zip(replay.starts, replay.ends)]
        return {keys.TIMELINE: {keys.TIMELINE_BACKWARD_SECONDS: replay.backward_seconds,
                                keys.TIMELINE_BUCKETS: buckets}}

    @property
    def host_note(self) -> str | None:
        """Why the host term is not priced; None where it is."""
        if self.inputs.host is not None:
            return None
        return ("host term not priced: the records carry no cpu/comm (a runtime before it measured what a byte costs "
                "the host); communication priced as before, the wire term alone")


def predict_trial(trial: Trial, records_by_rank: Mapping[int, Sequence[Mapping[str, Any]]],
                  layers_document: Mapping[str, Any], rank: int, probe: Mapping[str, Any] | None,
                  bucket_bytes: float = DEFAULT_BUCKET_BYTES,
                  usage: Mapping[str, Any] | None = None) -> TrialPrediction:
    """Predict every architecture from worker `rank`'s layers.json, every worker's records and the link probed at
    the trial's start (the summary's `linkProbe`). A ring trial's buckets are those it recorded; `bucket_bytes`
    makes the ring's buckets otherwise. `usage` (the summary's) says how crowded the ranks' machines were.

    ValueError, saying why, when they cannot calibrate the models (no probe, no traced iteration, no records)."""
    spec = trial.spec
    if rank not in records_by_rank or not records_by_rank[rank]:
        raise ValueError(f"trial {trial.name} has no iteration records for rank {rank}")
    profile, workers = profile_.of_rank(layers_document, records_by_rank[rank]), len(trial.worker_slots())
    measured = whatif.measured_compression(records_by_rank[rank]) if spec.compression.compressing() else None
    compressed = None if measured is None else collectives.measured(profile, spec.compression, workers,
                                                                    measured.compression,
                                                             0.0)  # the codec's time is in C
    has_servers = variants.ARCHITECTURES[spec.architecture].has_servers
    servers = spec.parameter_servers.replicas if has_servers else 1
    link = calibration_.calibrate(probe, spec)
    capped = spec.network.bits_per_second()  # a cap the cluster enforces is the NIC's rate where slower than probed
    nic = min(link.link.effective_bits_per_second, capped or link.link.effective_bits_per_second)
    inputs = Inputs(profile, profile_.compute(records_by_rank), link, workers,
                    spec.sync.paradigm,
                    overlap.RuntimeBuckets(bucket_bytes, recorded=profile_.bucket_sizes(layers_document)), compressed,
                    spec.architecture, serving_.serving(spec.architecture, records_by_rank, workers, servers),
                    serving_.cores(usage, [slot.rank for slot in trial.worker_slots()]),
                    resources.where(trial, usage, nic), resources.host_cost(records_by_rank),
                    cost_models.Pods(spec.workers.pod_ranks))
    compared = tuple(COMPARED_SERVERS) + ((servers,) if has_servers else ())
    return TrialPrediction(variants.label(spec.architecture, servers), inputs, tuple(estimates(inputs, compared)),
                           profile_.measured_iteration_seconds(records_by_rank))


def table(prediction: TrialPrediction) -> str:
    """The estimates as a text table, this trial's architecture marked, each with its validated band, and the notes
    below it (TERMS defines the columns)."""
    lines = [f"NO PREDICTION, {prediction.cannot_predict}; what the models say:"] if prediction.cannot_predict else []
    lines.append(f"{'architecture':<13} {'model':<18} {'compute ms':>10} {'of it serving':>13} {'comm ms':>9} "
                 f"{'host ms':>9} {'wire ms':>9} {'bound':>5} {'NIC %':>6} "
                 f"{'iteration ms':>12}  {'within, 9 in 10 held-out':<36}")
    notes = []
    for e in prediction.estimates:
        mark = " <- this trial" if e.label == prediction.architecture else ""
        band = e.band.said() if e.band else "no validated band"
        if e.note:
            notes.append(f"{e.label}: {e.note}")
            band += f" [{len(notes)}]"
        lines.append(f"{e.label:<13} {e.model:<18} {1000 * e.compute_seconds:>10.3f} {1000 * e.serving_seconds:>13.3f} "
                     f"{1000 * e.comm_seconds:>9.3f} {_terms(e)} {1000 * e.iteration_seconds:>12.3f}  {band:<36}{mark}")
    if prediction.host_note:
        lines.append(f"  {prediction.host_note}")
    lines += [f"  [{i}] {note}" for i, note in enumerate(notes, 1)]
    return "\n".join(lines)


def _terms(estimate: ArchitectureEstimate) -> str:
    """The host and wire columns: each term in ms, which bounds, the busiest NIC's utilisation ("-": not priced)."""
    priced = estimate.resources
    if priced is None:
        return f"{'-':>9} {'-':>9} {'-':>5} {'-':>6}"
    host = "-" if priced.host_seconds is None else f"{1000 * priced.host_seconds:.3f}"
    nic = estimate.nic_utilization
    return (f"{host:>9} {1000 * priced.wire_seconds:>9.3f} {priced.bound:>5} "
            f"{'-' if nic is None else f'{100 * nic:.1f}':>6}")


TERMS = ("compute ms: the compute an iteration waits for (under BSP the slowest worker's, iteration by iteration: "
         "data, forward, backward, update, the loop's own work), on the trial's machines as that architecture's "
         "workers would share their cores, and a server's or a peer's serving of the model (of it serving: "
         "unpacking the pushes, adding them, the update); comm ms: the communication it waits for (the ring's: "
         "what backward did not hide); host ms and wire ms: what the exchange costs the busiest rank's CPU at its "
         "quota and the busiest node's NIC, bound: the longer, NIC %: that NIC's bits over what it carries in the "
         "iteration (docs/predict.md, Host or wire); within, 9 in 10 held-out: "
         "the |predicted/measured - 1| that 90% of the "
         "held-out predictions of this kind stayed within in bench/bench_predict_validation.py's recorded runs "
         "(across nodes: the recorded runs of Study 1 across nodes), and their median (docs/predict-validation.md)")


def headline(prediction: TrialPrediction) -> str:
    """One line: this trial's predicted and measured (median) iteration time, and the error (or why it is no
    prediction)."""
    said = f"{prediction.architecture}: predicted {1000 * prediction.own.iteration_seconds:.3f} ms"
    error = prediction.error  # None when nothing, or nothing but 0 s, was measured
    if prediction.measured_seconds is not None:
        said += f", measured {1000 * prediction.measured_seconds:.3f} ms (median)"
        if error is not None:
            said += f", error {100 * error:.1f}%"
    else:
        said += ", nothing measured to compare with"
    return said + (f" ({prediction.cannot_predict})" if prediction.cannot_predict else "")
