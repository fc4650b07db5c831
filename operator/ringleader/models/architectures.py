"""What the models need of each architecture, one entry each: its cost model, its prediction, its exchange's phases.

api/variants.py says what an architecture is (roles, paradigms, label, the name of its cost model); this table says
how the models price it, so that a new architecture is one entry here (docs/architecture.md, "Where to change what"):

    comm_seconds         study 1's T_comm(workers, model bytes, link, servers, pods): models/cost_models.py
    prediction           its Model of an iteration from a trial's measurements: models/prediction_models.py, run by
                         models/prediction.py
    phases               its exchange, phase by phase, what each rank sends to which: models/traffic.py; the runtime's
                         bytes by level must match it (models/cross_node.py), the host and wire terms price it
                         (models/pricing.py)
    priced_comm_seconds  T_comm as `ringleader predict` prices it, where that differs from comm_seconds

The predictions' formulas, as docs/predict.md prints them:

    kps    C + max((N+1)*8M/(kB), 2*8M/B) + 2a     the server's full-duplex NIC, BSP's round pipelined
    p2p    C + 2(N-1)/N * 8M/B + 2a                each peer's NIC carries its pushes, then its shard's replies
    ring   C + t_c_no                              buckets allreduced (the probed collective) after backward
    hring  C + t_c_no                              buckets: a ring inside the pod, the probed collective moved to P
                                                   pods across (under a cap: the pod's card, 2(P-1)/P * 8S/cap)
    kpsagg C + 2(k-1)*8M/B_in + kps of P workers   the pod's first rank gathers and shares inside the pod

C is the compute the iteration waits for (profile.Compute.critical; the ring's: ring_compute): under BSP the
slowest worker of each iteration, which includes the loop's own work and the update; prediction.estimates() moves it
to the architecture's sharing of the cores and adds S/k (a server's serving) or S/N (a peer's) to it.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from ringleader.api import variants
from ringleader.api.variants import Architecture, Paradigm
from ringleader.models import cost_models, traffic
from ringleader.models.cost_models import ONE_PER_POD, Nic, Pods
from ringleader.models.prediction_models import (Model, hierarchical_comm, hierarchical_measured_seconds,
                                                 hierarchical_replay, message_bytes, paced_compute, ring_comm,
                                                 ring_compute, ring_replay)

CommSeconds = Callable[[int, float, Nic, int, Pods], float]
"""CommSeconds: T_comm(workers, model bytes, link, servers, pods), in seconds."""


@dataclasses.dataclass(frozen=True)
class ArchitectureModel:
    """How the models price one architecture."""

    comm_seconds: CommSeconds
    """comm_seconds is study 1's T_comm; servers counts only for an architecture with servers."""
    prediction: Model
    """prediction is its predicted iteration from a trial's measurements."""
    phases: traffic.Exchange
    """phases is its exchange of M model bytes among its servers' and workers' ranks, the workers in pods."""
    priced_comm_seconds: CommSeconds | None = None
    """priced_comm_seconds is T_comm with the server's NIC sending and receiving at once, as a real NIC does and
    `predict` prices it (the textbook 2NM/B counts the two directions in turn); None: comm_seconds."""


def _model_name(architecture: Architecture) -> str:
    return variants.ARCHITECTURES[architecture].cost_model


ARCHITECTURE_MODELS: dict[Architecture, ArchitectureModel] = {
    Architecture.PARAMETER_SERVER: ArchitectureModel(
        lambda workers, model_bytes, link, servers, pods: cost_models.parameter_server_comm_seconds(
            workers, model_bytes, link, servers, pods=pods),
        Model(_model_name(Architecture.PARAMETER_SERVER), lambda i, servers: cost_models.parameter_server_comm_seconds(
            i.workers, message_bytes(i, Architecture.PARAMETER_SERVER), i.calibration.link, servers, full_duplex=True,
            pods=i.pods)),
        traffic.parameter_server,
        lambda workers, model_bytes, link, servers, pods: cost_models.parameter_server_comm_seconds(
            workers, model_bytes, link, servers, full_duplex=True, pods=pods)),
    Architecture.PEER_TO_PEER: ArchitectureModel(
        lambda workers, model_bytes, link, _, pods: cost_models.peer_to_peer_comm_seconds(
            workers, model_bytes, link, pods),
        Model(_model_name(Architecture.PEER_TO_PEER), lambda i, _: cost_models.peer_to_peer_comm_seconds(
            i.workers, message_bytes(i, Architecture.PEER_TO_PEER), i.calibration.link, i.pods)),
        traffic.peer_to_peer),
    Architecture.RING_ALL_REDUCE: ArchitectureModel(
        lambda workers, model_bytes, link, _, pods: cost_models.ring_comm_seconds(workers, model_bytes, link, pods),
        Model(_model_name(Architecture.RING_ALL_REDUCE), lambda i, _: ring_comm(i), ring_compute, Paradigm.BSP,
              ring_replay),
        traffic.ring),
    Architecture.HIERARCHICAL_RING_ALL_REDUCE: ArchitectureModel(
        lambda workers, model_bytes, link, _, pods: cost_models.hierarchical_ring_comm_seconds(
            workers, model_bytes, link, pods),
        Model(_model_name(Architecture.HIERARCHICAL_RING_ALL_REDUCE), lambda i, _: hierarchical_comm(i),
              lambda i: paced_compute(i, hierarchical_replay(i), lambda size: hierarchical_measured_seconds(i, size)),
              Paradigm.BSP, hierarchical_replay),
        traffic.hierarchical_ring),
    Architecture.PARAMETER_SERVER_POD_AGGREGATION: ArchitectureModel(
        lambda workers, model_bytes, link, servers, pods: cost_models.pod_aggregation_comm_seconds(
            workers, model_bytes, link, servers, pods=pods),
        Model(_model_name(Architecture.PARAMETER_SERVER_POD_AGGREGATION),
              lambda i, servers: cost_models.pod_aggregation_comm_seconds(
                  i.workers, message_bytes(i, Architecture.PARAMETER_SERVER_POD_AGGREGATION), i.calibration.link,
                  servers, full_duplex=True, pods=i.pods)),
        traffic.pod_aggregation,
        lambda workers, model_bytes, link, servers, pods: cost_models.pod_aggregation_comm_seconds(
            workers, model_bytes, link, servers, full_duplex=True, pods=pods)),
}
"""ARCHITECTURE_MODELS: per architecture, how the models price it."""


def comm_seconds(architecture: Architecture | str, workers: int, model_bytes: float, link: Nic,
                 servers: int = 1, pods: Pods = ONE_PER_POD) -> float:
    """Study 1's T_comm of `architecture` (servers counts only for an architecture with servers)."""
    return ARCHITECTURE_MODELS[Architecture(architecture)].comm_seconds(workers, model_bytes, link, servers, pods)


def priced_comm_seconds(architecture: Architecture | str, workers: int, model_bytes: float, link: Nic,
                        servers: int = 1, pods: Pods = ONE_PER_POD) -> float:
    """T_comm as `ringleader predict` prices it (the Model's communication on study 1's inputs): what the report's
    communication figure draws, so that it and `predict` say the same."""
    model = ARCHITECTURE_MODELS[Architecture(architecture)]
    return (model.priced_comm_seconds or model.comm_seconds)(workers, model_bytes, link, servers, pods)
