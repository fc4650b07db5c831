"""How far apart two ranks of a trial are: in one pod, in two pods of one node, or on two nodes.

Read by the runtime, which counts each rank's bytes by level (runtime/ring.py, runtime/exchange/link.py) and lets
the emulated card (runtime/nic.py) carry only what leaves a pod, and by models/cross_node.py, which models the
same bytes. A pod's ranks (api/trial.py: a slot's `group_rank`) share its memory and its card; pods of one node
share its NIC; only bytes between nodes cross one. The nodes are those the ranks ran on (contract/environment.py
NODE_NAME), gathered once at the start (runtime/main.py); without them every rank is taken to share one node.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from ringleader.api.trial import Trial
from ringleader.contract import keys

POD = "pod"
"""POD: two ranks of one pod (shared memory, NVLink or PCIe in a real one; free of the emulated card)."""
NODE = "node"
"""NODE: two pods on one node (its bridge or loopback, not a NIC)."""
NETWORK = "network"
"""NETWORK: two nodes (a NIC each way)."""
LEVELS = (POD, NODE, NETWORK)
BYTES_KEYS = {POD: keys.BYTES_INSIDE_POD, NODE: keys.BYTES_INSIDE_NODE, NETWORK: keys.BYTES_ACROSS_NODES}
"""BYTES_KEYS: the record key of the bytes a rank sent to each level."""


@dataclasses.dataclass(frozen=True)
class Levels:
    """Each rank's pod and node."""

    pods: Mapping[int, int]
    """pods maps each rank to its pod (Slot.group_rank)."""
    nodes: Mapping[int, str]
    """nodes maps each rank to the node it ran on."""
    start: str = ""
    """start is the same on every rank of one start of the trial, and differs between starts: what names the files a
    pod's ranks share (runtime/nic.py), so that no start reads what an earlier one left."""

    @classmethod
    def of(cls, trial: Trial, nodes: Mapping[int, str] | None = None, start: str = "") -> Levels:
        """The trial's pods, on `nodes` ({rank: node}); None or a rank missing: every rank on one node."""
        slots = trial.slots()
        known = nodes or {}
        return cls({s.rank: s.group_rank for s in slots}, {s.rank: known.get(s.rank) or "" for s in slots}, start)

    def between(self, a: int, b: int) -> str:
        """POD, NODE or NETWORK: what bytes from rank `a` to rank `b` cross."""
        if self.pods[a] == self.pods[b]:
            return POD
        return NODE if self.nodes[a] == self.nodes[b] else NETWORK

    def leaves_pod(self, a: int, b: int) -> bool:
        """Whether bytes from `a` to `b` leave `a`'s pod, so its card carries them."""
        return self.pods[a] != self.pods[b]

    def pod(self, rank: int) -> list[int]:
        """The ranks of `rank`'s pod, itself included, in rank order."""
        return [r for r, p in sorted(self.pods.items()) if p == self.pods[rank]]


def empty() -> dict[str, float]:
    """{level: 0.0} for every level: what a rank's counters start from."""
    return {level: 0.0 for level in LEVELS}
