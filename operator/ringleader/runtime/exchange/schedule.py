"""The order in which a rank sends one message to each of many ranks: a rotation, so that senders do not collide.

Used by client.py (a worker's pushes to the owners) and server.py (an owner's replies to the workers).
A rank's NIC sends one message after another; if every rank sent in rank order, in the first slot
every peer would send to the same rank (rank 0, or rank 1 from rank 0), whose receiving side would
then take N-1 messages back to back while the others' idled (incast). With 4 peers that stretches
each phase of a step from 3 slots to 5. Starting each rank's round just past itself (peer i sends
to i+1, i+2, ...) makes every slot a permutation: each receiver hears from one sender at a time,
which is the schedule study 1's peer-to-peer model assumes (2(N-1)/N * M/B per step).
"""

from __future__ import annotations

from typing import Sequence, TypeVar

T = TypeVar("T")


def rotated(items: Sequence[T], first: int) -> list[T]:
    """`items` starting at index `first` (modulo their number), wrapping around."""
    if not items:
        return []
    first %= len(items)
    return list(items[first:]) + list(items[:first])


def push_order(owners: Sequence[int], rank: int) -> list[int]:
    """The owners' indices in the order worker `rank` pushes to them.

    A peer (one of the owners) starts just past itself, so its own shard, which skips the network,
    comes last. A parameter-server worker (not an owner) starts at owner rank % k: workers of
    consecutive ranks start at different servers."""
    start = owners.index(rank) + 1 if rank in owners else rank % len(owners)
    return rotated(range(len(owners)), start)


def reply_order(workers: Sequence[int], rank: int, owner: int, owners: int) -> list[int]:
    """The workers (ranks) in the order owner `owner` of `owners` (at `rank`) answers them when it releases them
    together.

    A peer starts just past itself, so its own worker, which skips the network, comes last (it then
    records bytes sent that include the replies just queued). Parameter server j starts at worker
    (j+1)*N/k, so the k servers start at different workers."""
    if rank in workers:
        return rotated(workers, workers.index(rank) + 1)
    return rotated(workers, (owner + 1) * len(workers) // owners)
