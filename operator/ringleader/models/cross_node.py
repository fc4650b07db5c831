"""Where a trial's ranks ran, and how much of its traffic crossed nodes: from the node each rank recorded.

The traffic pattern is the architecture's exchange (models/traffic.py, named per architecture in
models/architectures.py); `traffic` sums its phases for a trial.

`modelled_bytes` turns the pattern into each rank's bytes by level (inside its pod, inside its node, across nodes:
contract/levels.py), which the ranks record as they send them (runtime/ring.py, runtime/exchange/link.py).

Two ranks on one node exchange over that node's bridge or loopback, never its NIC: a trial whose bytes
stayed on one node measured no network, and two trials compare network-bound timings only when the same
share of their bytes crossed nodes (models/placement_notes.py says so).
"""

from __future__ import annotations

from typing import Any, Mapping

from ringleader.api import constants
from ringleader.api.trial import Trial
from ringleader.contract import keys
from ringleader.contract import levels as levels_
from ringleader.models.architectures import ARCHITECTURE_MODELS
from ringleader.models.traffic import Flow

def traffic(trial: Trial) -> list[Flow]:
    """What each of a trial's ranks sends to which other per iteration, in bytes per byte of the model (M = 1): its
    architecture's phases, summed."""
    servers = [slot.rank for slot in trial.slots() if slot.role == constants.ROLE_PS]
    workers = [slot.rank for slot in trial.worker_slots()]
    sent: dict[tuple[int, int], float] = {}
    exchange = ARCHITECTURE_MODELS[trial.spec.architecture].phases
    for phase in exchange(servers, workers, 1.0, trial.spec.workers.pod_ranks):
        for flow in phase:
            sent[flow.source, flow.destination] = sent.get((flow.source, flow.destination), 0.0) + flow.size_bytes
    return [Flow(source, destination, size) for (source, destination), size in sent.items()]


def traffic_pairs(trial: Trial) -> list[tuple[int, int]]:
    """The pairs of ranks (lower rank first, in order) that exchange the trial's bytes."""
    return sorted({(min(f.source, f.destination), max(f.source, f.destination)) for f in traffic(trial)})


def modelled_bytes(trial: Trial, levels: levels_.Levels, model_bytes: float) -> dict[int, dict[str, float]]:
    """{rank: {level: bytes}}: what each rank sends per iteration by level (contract/levels.py), for M =
    `model_bytes`."""
    found = {slot.rank: levels_.empty() for slot in trial.slots()}
    for flow in traffic(trial):
        found[flow.source][levels.between(flow.source, flow.destination)] += flow.size_bytes * model_bytes
    return found


def placement(trial: Trial, nodes: Mapping[int, str]) -> dict[str, Any]:
    """The summary's placement values from {rank: node}: NODE_COUNT and CROSS_NODE_BYTE_SHARE (status keys, kept
    in a pod's termination message) and the PLACEMENT block; empty unless every rank's node is known (an older
    runtime's records, or a rank that recorded none: nothing beats a wrong placement)."""
    ranks = [slot.rank for slot in trial.slots()]
    if any(not nodes.get(rank) for rank in ranks):
        return {}
    per_node: dict[str, int] = {}
    for rank in ranks:
        per_node[nodes[rank]] = per_node.get(nodes[rank], 0) + 1
    flows = traffic(trial)
    crossing = [[a, b] for a, b in traffic_pairs(trial) if nodes[a] != nodes[b]]
    carried = sum(f.size_bytes for f in flows)
    return {
        keys.NODE_COUNT: len(per_node),
        keys.CROSS_NODE_BYTE_SHARE: (sum(f.size_bytes for f in flows if nodes[f.source] != nodes[f.destination])
                                     / carried)
        if carried else None,
        keys.PLACEMENT: {
            keys.PLACEMENT_REQUESTED: trial.spec.scheduling.placement.label(),
            keys.PLACEMENT_NODES: {str(rank): nodes[rank] for rank in ranks},
            keys.PLACEMENT_RANKS_PER_NODE: dict(sorted(per_node.items())),
            keys.PLACEMENT_CROSS_NODE_PAIRS: crossing,
        },
    }
