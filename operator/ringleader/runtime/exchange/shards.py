"""Which owner (parameter server, or peer in PeerToPeer) holds which parameter tensor; every rank computes the same.

Whole tensors, balanced by bytes: largest first, each to the owner holding the fewest bytes so far
(ties: the lowest owner, then the earliest tensor), the classic greedy that keeps the largest owner
within one tensor of the mean. Used by parameter_server.py, peer_to_peer.py and client.py.
"""

from __future__ import annotations

import dataclasses

import torch


def assign(sizes: list[int], owners: int) -> list[int]:
    """The owner of each tensor, given each tensor's size in bytes."""
    if owners < 1:
        raise ValueError(f"need at least one owner, got {owners}")
    loads = [0] * owners
    owner_of = [0] * len(sizes)
    for index in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        owner = loads.index(min(loads))
        owner_of[index] = owner
        loads[owner] += sizes[index]
    return owner_of


@dataclasses.dataclass(frozen=True)
class Plan:
    """The shards of a parameter list: `tensors[j]` are the indices (in model order) owner j holds."""

    tensors: list[list[int]]

    @classmethod
    def of(cls, parameters: list[torch.Tensor], owners: int) -> Plan:
        owner_of = assign([p.numel() * p.element_size() for p in parameters], owners)
        return cls([[i for i, o in enumerate(owner_of) if o == j] for j in range(owners)])

    @property
    def owners(self) -> int:
        return len(self.tensors)

    def shard(self, owner: int, parameters: list) -> list:
        """Owner `owner`'s part of `parameters` (or of any list in model order: gradients, names)."""
        return [parameters[i] for i in self.tensors[owner]]
