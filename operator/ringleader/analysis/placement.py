"""Where a trial's ranks ran, and how much of its traffic crossed nodes: from the node each rank recorded.

The traffic pattern is the architecture's, each pair of ranks that exchange carrying an equal share of the
bytes (shards of equal size):

    ParameterServer   every worker with every server (a 1/S shard each way)
    PeerToPeer        every pair of workers (each serves the others a 1/N shard)
    RingAllReduce     each worker with its successor in rank order (every link of a ring moves as much)

Two ranks on one node exchange over that node's bridge or loopback, never its NIC: a trial whose bytes
stayed on one node measured no network, and two trials compare network-bound timings only when the same
share of their bytes crossed nodes (`caveat`).
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Mapping, Sequence

from ringleader.api.spec import Architecture
from ringleader.api.trial import Trial
from ringleader.contract import keys

# How close two cross-node shares must be to count as the same placement of the traffic.
SAME_SHARE_TOLERANCE = 0.05


def _server_pairs(servers: list[int], workers: list[int]) -> list[tuple[int, int]]:
    return [(min(s, w), max(s, w)) for w in workers for s in servers]


def _neighbour_pairs(_: list[int], workers: list[int]) -> list[tuple[int, int]]:
    ring = {tuple(sorted((a, b))) for a, b in zip(workers, workers[1:] + workers[:1]) if a != b}
    return sorted((a, b) for a, b in ring)


TRAFFIC: dict[Architecture, Callable[[list[int], list[int]], list[tuple[int, int]]]] = {
    Architecture.PARAMETER_SERVER: _server_pairs,
    Architecture.PEER_TO_PEER: lambda _, workers: list(itertools.combinations(workers, 2)),
    Architecture.RING_ALL_REDUCE: _neighbour_pairs,
}
"""TRAFFIC: per architecture, the pairs of ranks that exchange its bytes, from its servers' and workers' ranks."""


def traffic_pairs(trial: Trial) -> list[tuple[int, int]]:
    """The pairs of ranks (lower rank first) that exchange the trial's bytes, each carrying an equal share."""
    workers = [slot.rank for slot in trial.worker_slots()]
    servers = [slot.rank for slot in trial.slots() if slot.rank not in workers]
    return TRAFFIC[trial.spec.architecture](servers, workers)


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
    pairs = traffic_pairs(trial)
    crossing = [[a, b] for a, b in pairs if nodes[a] != nodes[b]]
    return {
        keys.NODE_COUNT: len(per_node),
        keys.CROSS_NODE_BYTE_SHARE: len(crossing) / len(pairs) if pairs else None,
        keys.PLACEMENT: {
            keys.PLACEMENT_REQUESTED: trial.spec.scheduling.placement.label(),
            keys.PLACEMENT_NODES: {str(rank): nodes[rank] for rank in ranks},
            keys.PLACEMENT_RANKS_PER_NODE: dict(sorted(per_node.items())),
            keys.PLACEMENT_CROSS_NODE_PAIRS: crossing,
        },
    }


def nodes_of(usage_by_rank: Mapping[Any, Mapping[str, Any]] | None) -> dict[int, str]:
    """{rank: node} from what each rank recorded of itself (its usage, keys.NODE)."""
    return {int(rank): used[keys.NODE] for rank, used in (usage_by_rank or {}).items()
            if isinstance(used, Mapping) and isinstance(used.get(keys.NODE), str)}


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


def caveat(first: str, first_summaries: Sequence[Mapping[str, Any] | None], second: str,
           second_summaries: Sequence[Mapping[str, Any] | None]) -> str | None:
    """Why a timing comparison of two setups is also one of placements, or None: they put the same share of their
    bytes across nodes (within SAME_SHARE_TOLERANCE), or either recorded no placement."""
    shares = []
    for summaries in (first_summaries, second_summaries):
        known = [s[keys.CROSS_NODE_BYTE_SHARE] for s in summaries if s and s.get(keys.CROSS_NODE_BYTE_SHARE) is not None]
        if not known:
            return None
        shares.append(sum(known) / len(known))
    if abs(shares[0] - shares[1]) <= SAME_SHARE_TOLERANCE:
        return None
    return (f"but they were placed differently: {shares[0]:.0%} of {first}'s bytes crossed nodes and {shares[1]:.0%} "
            f"of {second}'s, so part of the gap is placement (a node's bridge against a NIC), not the setup; "
            "set scheduling.placement (Spread or Pack) to compare them alike")
