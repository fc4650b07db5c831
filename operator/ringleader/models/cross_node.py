"""Where a trial's ranks ran, and how much of its traffic crossed nodes: from the node each rank recorded.

The traffic pattern is the architecture's exchange (models/traffic.py, named per architecture in
models/architectures.py); `traffic` sums its phases for a trial.

`modelled_bytes` turns the pattern into each rank's bytes by level (inside its pod, inside its node, across nodes:
contract/levels.py), which the ranks record as they send them (runtime/ring.py, runtime/exchange/link.py).

Two ranks on one node exchange over that node's bridge or loopback, never its NIC: a trial whose bytes
stayed on one node measured no network, and two trials compare network-bound timings only when the same
share of their bytes crossed nodes (`caveat`).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ringleader.api import constants
from ringleader.api.trial import Trial
from ringleader.contract import keys
from ringleader.contract import levels as levels_
from ringleader.models.architectures import ARCHITECTURE_MODELS
from ringleader.models.traffic import Flow

# How close two cross-node shares must be to count as the same placement of the traffic.
SAME_SHARE_TOLERANCE = 0.05


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


def shared_node_note(summary: Mapping[str, Any] | None) -> str | None:
    """Words for a trial some of whose exchanging ranks shared a node (their link was a bridge, not a NIC), or
    None: none did, or the trial recorded no placement."""
    share = (summary or {}).get(keys.CROSS_NODE_BYTE_SHARE)
    if share is None or share >= 1.0:
        return None
    if share == 0.0:
        return "every rank ran on one node: its bytes crossed that node's bridge or loopback, not a NIC"
    return (f"{1 - share:.0%} of its bytes stayed within a node (ranks sharing a node exchange over its bridge, "
            f"not a NIC); {share:.0%} crossed nodes")


def link_note(summary: Mapping[str, Any] | None) -> str | None:
    """What `predict` and `whatif` say of a trial some of whose ranks shared a node: the link its probe and records
    measured was partly or wholly a bridge; None when every exchange crossed nodes, nothing was recorded, or every
    rank shared one host (`ringleader run`: the probed link says so itself, a loopback)."""
    shared = shared_node_note(summary)
    if shared is None or ((summary or {}).get(keys.LINK_PROBE) or {}).get(keys.PROBE_SHARED_HOST):
        return None
    partly = "partly " if (summary or {}).get(keys.CROSS_NODE_BYTE_SHARE) else ""
    return f"placement: {shared}; the link measured and priced here is {partly}a bridge, not a NIC between nodes"


def describe(summary: Mapping[str, Any] | None) -> str:
    """The placement a trial got, for a table cell: "3 nodes, 100% across"; "" when not recorded."""
    summary = summary or {}
    count, share = summary.get(keys.NODE_COUNT), summary.get(keys.CROSS_NODE_BYTE_SHARE)
    if count is None:
        return ""
    nodes = f"{int(count)} node{'' if count == 1 else 's'}"
    return nodes if share is None else f"{nodes}, {share:.0%} across"


def traffic_note(first: str, first_summaries: Sequence[Mapping[str, Any] | None], second: str,
                 second_summaries: Sequence[Mapping[str, Any] | None]) -> str | None:
    """What two setups sent across pods and across nodes per worker iteration, as their ranks recorded it, when that
    differs (by more than SAME_SHARE_TOLERANCE of the larger): the traffic behind a gap in network-bound timings, or
    None when either recorded none or they sent alike."""
    sent = []
    for summaries in (first_summaries, second_summaries):
        known = [s for s in summaries if s and s.get(keys.BYTES_INSIDE_NODE_PER_ITERATION) is not None]
        if not known:
            return None
        sent.append(tuple(sum(value(s) for s in known) / len(known) for value in (
            lambda s: s[keys.BYTES_INSIDE_NODE_PER_ITERATION] + (s.get(keys.BYTES_ACROSS_NODES_PER_ITERATION) or 0.0),
            lambda s: s.get(keys.BYTES_ACROSS_NODES_PER_ITERATION) or 0.0)))
    if all(abs(a - b) <= SAME_SHARE_TOLERANCE * max(a, b) for a, b in zip(*sent)):
        return None
    (pods_a, nodes_a), (pods_b, nodes_b) = sent
    return (f"{first} sent {pods_a / 1e6:.2f} MB per worker iteration across pods ({nodes_a / 1e6:.2f} MB across "
            f"nodes), {second} {pods_b / 1e6:.2f} MB ({nodes_b / 1e6:.2f} MB)")


def caveat(first: str, first_summaries: Sequence[Mapping[str, Any] | None], second: str,
           second_summaries: Sequence[Mapping[str, Any] | None]) -> str | None:
    """Why a timing comparison of two setups is also one of placements, or None: they put the same share of their
    bytes across nodes (within SAME_SHARE_TOLERANCE), or either recorded no placement."""
    shares = []
    for summaries in (first_summaries, second_summaries):
        known = [s[keys.CROSS_NODE_BYTE_SHARE] for s in summaries
                 if s and s.get(keys.CROSS_NODE_BYTE_SHARE) is not None]
        if not known:
            return None
        shares.append(sum(known) / len(known))
    if abs(shares[0] - shares[1]) <= SAME_SHARE_TOLERANCE:
        return None
    return (f"but they were placed differently: {shares[0]:.0%} of {first}'s bytes crossed nodes and {shares[1]:.0%} "
            f"of {second}'s, so part of the gap is placement (a node's bridge against a NIC), not the setup; "
            "set scheduling.placement (Spread or Pack) to compare them alike")
