"""What a trial's recorded placement (models/cross_node.py, carried in its summary) means, in words: for a table
cell, for `predict` and `whatif` when the link they priced was partly a node's bridge, and for the report when two
setups put different shares of their bytes across nodes.
"""

from __future__ import annotations

from typing import Sequence

from ringleader.contract import keys
from ringleader.models.summary import TrialSummary

# How close two cross-node shares must be to count as the same placement of the traffic.
SAME_SHARE_TOLERANCE = 0.05


def shared_node_note(share: float | None) -> str | None:
    """Words for a trial some of whose exchanging ranks shared a node (their link was a bridge, not a NIC), from the
    share of its bytes that crossed nodes; None: none did, or the trial recorded no placement."""
    if share is None or share >= 1.0:
        return None
    if share == 0.0:
        return "every rank ran on one node: its bytes crossed that node's bridge or loopback, not a NIC"
    return (f"{1 - share:.0%} of its bytes stayed within a node (ranks sharing a node exchange over its bridge, "
            f"not a NIC); {share:.0%} crossed nodes")


def link_note(summary: TrialSummary | None) -> str | None:
    """What `predict` and `whatif` say of a trial some of whose ranks shared a node: the link its probe and records
    measured was partly or wholly a bridge; None when every exchange crossed nodes, nothing was recorded, or every
    rank shared one host (`ringleader run`: the probed link says so itself, a loopback)."""
    if summary is None:
        return None
    share = summary.placement.cross_node_byte_share
    shared = shared_node_note(share)
    if shared is None or (summary.link_probe or {}).get(keys.PROBE_SHARED_HOST):
        return None
    partly = "partly " if share else ""
    return f"placement: {shared}; the link measured and priced here is {partly}a bridge, not a NIC between nodes"


def describe(count: float | None, share: float | None) -> str:
    """The placement a trial got (its node count and share of bytes across nodes), for a table cell:
    "3 nodes, 100% across"; "" when not recorded."""
    if count is None:
        return ""
    nodes = f"{int(count)} node{'' if count == 1 else 's'}"
    return nodes if share is None else f"{nodes}, {share:.0%} across"


def traffic_note(first: str, first_summaries: Sequence[TrialSummary | None], second: str,
                 second_summaries: Sequence[TrialSummary | None]) -> str | None:
    """What two setups sent across pods and across nodes per worker iteration, as their ranks recorded it, when that
    differs (by more than SAME_SHARE_TOLERANCE of the larger): the traffic behind a gap in network-bound timings, or
    None when either recorded none or they sent alike."""
    sent = []
    for summaries in (first_summaries, second_summaries):
        known = [s.parts for s in summaries if s and s.parts.bytes_inside_node is not None]
        if not known:
            return None
        sent.append((sum((p.bytes_inside_node or 0.0) + (p.bytes_across_nodes or 0.0) for p in known) / len(known),
                     sum(p.bytes_across_nodes or 0.0 for p in known) / len(known)))
    if all(abs(a - b) <= SAME_SHARE_TOLERANCE * max(a, b) for a, b in zip(*sent)):
        return None
    (pods_a, nodes_a), (pods_b, nodes_b) = sent
    return (f"{first} sent {pods_a / 1e6:.2f} MB per worker iteration across pods ({nodes_a / 1e6:.2f} MB across "
            f"nodes), {second} {pods_b / 1e6:.2f} MB ({nodes_b / 1e6:.2f} MB)")


def caveat(first: str, first_summaries: Sequence[TrialSummary | None], second: str,
           second_summaries: Sequence[TrialSummary | None]) -> str | None:
    """Why a timing comparison of two setups is also one of placements, or None: they put the same share of their
    bytes across nodes (within SAME_SHARE_TOLERANCE), or either recorded no placement."""
    shares = []
    for summaries in (first_summaries, second_summaries):
        known = [s.placement.cross_node_byte_share for s in summaries
                 if s and s.placement.cross_node_byte_share is not None]
        if not known:
            return None
        shares.append(sum(known) / len(known))
    if abs(shares[0] - shares[1]) <= SAME_SHARE_TOLERANCE:
        return None
    return (f"but they were placed differently: {shares[0]:.0%} of {first}'s bytes crossed nodes and {shares[1]:.0%} "
            f"of {second}'s, so part of the gap is placement (a node's bridge against a NIC), not the setup; "
            "set scheduling.placement (Spread or Pack) to compare them alike")
