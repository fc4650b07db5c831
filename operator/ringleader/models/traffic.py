"""Who sends what to whom in each architecture's exchange, phase by phase: the traffic pattern, as its algorithm does.

Which rank sends which other how many of the model's M bytes per iteration (shards of equal size; k ranks to a pod,
P pods); models/architectures.py names each architecture's, models/cross_node.py sums them per trial and
models/pricing.py prices them on the host and the wire:

    ParameterServer   every worker to every server and back, M/S each way
    PeerToPeer        every worker to every other, 2M/N (its push to the other's shard, its shard's reply)
    RingAllReduce     each worker to its successor in rank order, 2(N-1)/N * M
    HierarchicalRing  each to its successor in its pod, 2(k-1)/k * M, and to its pod's successor's rank of its own
                      local index, 2(P-1)/P * M/k
    PS, pod aggregation  the pod's other ranks to its first and back, M each way; the first to every server and
                      back, M/S each way
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Sequence


@dataclasses.dataclass(frozen=True)
class Flow:
    """One message of a phase: `size_bytes` from rank `source` to rank `destination`."""

    source: int
    destination: int
    size_bytes: float


Phases = list[list[Flow]]
"""Phases: an exchange's phases in order, each the flows that cross at once (the next waits for them)."""


def parameter_server(servers: Sequence[int], workers: Sequence[int], model_bytes: float, _: int = 1) -> Phases:
    shard = model_bytes / len(servers)
    pushes = [Flow(w, s, shard) for w in workers for s in servers]
    return [pushes, [Flow(f.destination, f.source, shard) for f in pushes]]


def peer_to_peer(_: Sequence[int], workers: Sequence[int], model_bytes: float, __: int = 1) -> Phases:
    shard = model_bytes / len(workers)
    pushes = [Flow(i, j, shard) for i in workers for j in workers if i != j]
    return [pushes, [Flow(f.destination, f.source, shard) for f in pushes]]


def _ring_steps(ranks: Sequence[int], size_bytes: float) -> Phases:
    """A ring allreduce of `size_bytes` among `ranks`: 2(n-1) steps of size/n to the next rank."""
    if len(ranks) < 2:
        return []
    step = [Flow(a, b, size_bytes / len(ranks)) for a, b in zip(ranks, [*ranks[1:], ranks[0]])]
    return [step] * (2 * (len(ranks) - 1))  # reduce-scatter, then allgather


def ring(_: Sequence[int], workers: Sequence[int], model_bytes: float, __: int = 1) -> Phases:
    return _ring_steps(workers, model_bytes)


def _pods(workers: Sequence[int], pod_ranks: int) -> list[Sequence[int]]:
    return [workers[i:i + pod_ranks] for i in range(0, len(workers), pod_ranks)]


def hierarchical_ring(_: Sequence[int], workers: Sequence[int], model_bytes: float, pod_ranks: int = 1) -> Phases:
    """Reduce-scatter inside each pod (k-1 steps of M/k), an allreduce of each M/k across pods among the ranks of one
    local index, then the allgather inside the pod (k-1 steps of M/k); pods take each step together."""
    pods = _pods(workers, pod_ranks)
    inside = [_ring_steps(pod, model_bytes)[:len(pod) - 1] for pod in pods]
    inside_steps = [[flow for steps in inside for flow in steps[i]] for i in range(len(inside[0]))]
    across = [_ring_steps([pod[j] for pod in pods], model_bytes / len(pods[0])) for j in range(len(pods[0]))]
    across_steps = [[flow for steps in across for flow in steps[i]] for i in range(len(across[0]))]
    return inside_steps + across_steps + inside_steps


def pod_aggregation(servers: Sequence[int], workers: Sequence[int], model_bytes: float, pod_ranks: int = 1) -> Phases:
    """A pod's ranks send their gradients to its first rank, which alone exchanges with the servers (a parameter
    server's pushes and replies), then sends the new weights back to them."""
    pods = _pods(workers, pod_ranks)
    gather = [Flow(rank, pod[0], model_bytes) for pod in pods for rank in pod[1:]]
    exchange = parameter_server(servers, [pod[0] for pod in pods], model_bytes)
    scatter = [Flow(f.destination, f.source, f.size_bytes) for f in gather]
    return [phase for phase in [gather, *exchange, scatter] if phase]


Exchange = Callable[[Sequence[int], Sequence[int], float, int], Phases]
"""Exchange: an architecture's phases of M model bytes among its servers' and workers' ranks (the first two
arguments), the workers in pods of `ranksPerPod` (the last); models/architectures.py names each architecture's."""
