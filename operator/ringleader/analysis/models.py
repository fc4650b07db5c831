"""Performance models of a synchronous-SGD iteration: study 1's cost models and study 2's DAG model.

Called by bench/bench_ps_vs_ring.py (predictions next to measurements), by analysis/whatif.py's
neighbours in reports, and by anyone comparing a trial's records with what the network should allow.
Pure functions of typed inputs: seconds, bytes, bits per second; no torch, no I/O.

Study 1, standard models, N workers, k servers, M model bytes, link B, latency a:

    1PS / kPS  T_comm = max(2*N*M/(k*B), 2*M/B) + 2a      (k = 1: 2*N*M/B + 2a, the server's NIC)
    P2P        T_comm = 2*(N-1)*M/(N*B) + 2a              (ideal; incast makes it worse in practice)
    RA         T_comm = 2*(N-1)*a + 2*(N-1)/N * M/B
    T_iter     T_comp + T_comm; RA: T_comp + max(0, T_comm - T_overlap)

Study 2, the DAG model with wait-free backprop and one FIFO channel, layers 1..L
(forward order; backward runs L..1), t_c(M) = a + b*M fitted from measured (bytes, seconds) pairs.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from ringleader.api.spec import Architecture

BITS_PER_BYTE = 8.0


@dataclasses.dataclass(frozen=True)
class Link:
    """One NIC of the cluster: what every node can send (and receive) per second, and per-message latency."""

    bandwidth_bits_per_second: float
    """bandwidth_bits_per_second is B, in bits per second (10 Gbit/s = 10e9); must be > 0."""
    latency_seconds: float = 0.0
    """latency_seconds is a, the fixed cost of one message (one step of the ring), in seconds."""

    def __post_init__(self) -> None:
        if not self.bandwidth_bits_per_second > 0:
            raise ValueError(f"bandwidth_bits_per_second must be greater than 0, got {self.bandwidth_bits_per_second}")
        if self.latency_seconds < 0:
            raise ValueError(f"latency_seconds must be greater than or equal to 0, got {self.latency_seconds}")

    def transfer_seconds(self, size_bytes: float) -> float:
        """M/B: seconds to push `size_bytes` through this link, latency excluded."""
        return BITS_PER_BYTE * size_bytes / self.bandwidth_bits_per_second


def _check(workers: int, model_bytes: float) -> None:
    if workers < 1:
        raise ValueError(f"workers must be greater than or equal to 1, got {workers}")
    if model_bytes < 0:
        raise ValueError(f"model_bytes must be greater than or equal to 0, got {model_bytes}")


# ---------------------------------------------------------------------------------------------
# Study 1: communication time per iteration


def parameter_server_comm_seconds(workers: int, model_bytes: float, link: Link, servers: int = 1) -> float:
    """1PS (servers=1) and kPS: max(2*N*M/(k*B), 2*M/B) + 2a.

    The k servers' NICs carry N pushes and N pulls of M/k each; a worker's own NIC carries M each way."""
    _check(workers, model_bytes)
    if servers < 1:
        raise ValueError(f"servers must be greater than or equal to 1, got {servers}")
    server_side = 2.0 * workers * link.transfer_seconds(model_bytes) / servers
    worker_side = 2.0 * link.transfer_seconds(model_bytes)
    return max(server_side, worker_side) + 2.0 * link.latency_seconds


def peer_to_peer_comm_seconds(workers: int, model_bytes: float, link: Link) -> float:
    """P2P, ideal: 2*(N-1)*M/(N*B) + 2a. One peer owns every shard itself and sends nothing: 0."""
    _check(workers, model_bytes)
    if workers == 1:
        # Not the formula's 2a: ringleader's single peer pushes to its own shard without the network.
        return 0.0
    return 2.0 * (workers - 1) / workers * link.transfer_seconds(model_bytes) + 2.0 * link.latency_seconds


def ring_comm_seconds(workers: int, model_bytes: float, link: Link) -> float:
    """RA: 2*(N-1)*a + 2*(N-1)/N * M/B (reduce-scatter then allgather, N-1 steps each); 0 for one worker."""
    _check(workers, model_bytes)
    steps = workers - 1
    return 2.0 * steps * link.latency_seconds + 2.0 * steps / workers * link.transfer_seconds(model_bytes)


def comm_seconds(architecture: Architecture | str, workers: int, model_bytes: float, link: Link,
                 servers: int = 1) -> float:
    """T_comm of `architecture` (servers counts only for ParameterServer)."""
    architecture = Architecture(architecture)
    if architecture == Architecture.PARAMETER_SERVER:
        return parameter_server_comm_seconds(workers, model_bytes, link, servers)
    if architecture == Architecture.PEER_TO_PEER:
        return peer_to_peer_comm_seconds(workers, model_bytes, link)
    return ring_comm_seconds(workers, model_bytes, link)


def iteration_seconds(architecture: Architecture | str, compute_seconds: float, communication_seconds: float,
                      overlap_seconds: float = 0.0) -> float:
    """T_iter: T_comp + T_comm for PS and P2P; RA hides up to `overlap_seconds` of its communication
    behind backward: T_comp + max(0, T_comm - T_overlap). `overlap_seconds` is ignored for PS and P2P,
    which (in study 1) start communicating only after backward ends."""
    if compute_seconds < 0 or communication_seconds < 0 or overlap_seconds < 0:
        raise ValueError("compute_seconds, communication_seconds and overlap_seconds must be greater than or equal to 0")
    if Architecture(architecture) == Architecture.RING_ALL_REDUCE:
        return compute_seconds + max(0.0, communication_seconds - overlap_seconds)
    return compute_seconds + communication_seconds


# ---------------------------------------------------------------------------------------------
# Study 2: the DAG model


@dataclasses.dataclass(frozen=True)
class CommCost:
    """t_c(M) = a + b*M: one collective's seconds for M bytes."""

    a_seconds: float
    """a_seconds is the startup cost of a collective, in seconds."""
    b_seconds_per_byte: float
    """b_seconds_per_byte is the cost of each byte, in seconds per byte."""

    def seconds(self, size_bytes: float) -> float:
        return self.a_seconds + self.b_seconds_per_byte * size_bytes


def fit_comm_cost(samples: Sequence[tuple[float, float]]) -> CommCost:
    """Least-squares fit of t_c(M) = a + b*M to measured (bytes, seconds) pairs.

    Needs at least two distinct sizes; a and b are returned as fitted (a slightly negative a from
    noisy small messages is the data's, not clamped)."""
    if len(samples) < 2:
        raise ValueError(f"fit_comm_cost needs at least 2 (bytes, seconds) samples, got {len(samples)}")
    n = float(len(samples))
    mean_m = sum(m for m, _ in samples) / n
    mean_t = sum(t for _, t in samples) / n
    var_m = sum((m - mean_m) ** 2 for m, _ in samples)
    if var_m == 0:
        raise ValueError("fit_comm_cost needs at least 2 distinct sizes: with one size, a and b cannot be told apart")
    cov = sum((m - mean_m) * (t - mean_t) for m, t in samples)
    b = cov / var_m
    return CommCost(a_seconds=mean_t - b * mean_m, b_seconds_per_byte=b)


@dataclasses.dataclass(frozen=True)
class DagIteration:
    """The DAG model's answer for one iteration (all in seconds, backward starting at 0)."""

    t_c_no: float
    """t_c_no is the communication not hidden by backward: from the end of backward to the end of the last layer's
    aggregation."""
    t_iter: float
    """t_iter is the iteration time: t_io (if not prefetched) + t_f + t_b + t_c_no + t_u."""
    backward_starts: tuple[float, ...]
    """backward_starts[l] is tau_b of layer l (forward order), from the start of backward."""
    comm_starts: tuple[float, ...]
    """comm_starts[l] is tau_c of layer l: when its aggregation starts on the FIFO channel."""


def dag_iteration(backward_seconds: Sequence[float], layer_comm_seconds: Sequence[float], forward_seconds: float = 0.0,
                  update_seconds: float = 0.0, io_seconds: float = 0.0, prefetched: bool = True) -> DagIteration:
    """Study 2's critical path with wait-free backprop and one FIFO channel.

    `backward_seconds[l]` and `layer_comm_seconds[l]` are t_b and t_c of layer l in FORWARD order (layer 1 first);
    backward produces the last layer's gradient first, and the channel aggregates in that order."""
    layers = len(backward_seconds)
    if layers == 0 or len(layer_comm_seconds) != layers:
        raise ValueError(f"backward_seconds and layer_comm_seconds must be non-empty and of equal length, "
                         f"got {layers} and {len(layer_comm_seconds)}")
    t_b, t_c = list(backward_seconds), list(layer_comm_seconds)
    tau_b = [0.0] * layers
    tau_c = [0.0] * layers
    last = layers - 1
    # tau_b[L] = 0; tau_b[l] = tau_b[l+1] + t_b[l+1]
    for layer in range(last - 1, -1, -1):
        tau_b[layer] = tau_b[layer + 1] + t_b[layer + 1]
    # tau_c[L] = tau_b[L] + t_b[L]; tau_c[l] = max(tau_c[l+1] + t_c[l+1], tau_b[l] + t_b[l])
    tau_c[last] = tau_b[last] + t_b[last]
    for layer in range(last - 1, -1, -1):
        tau_c[layer] = max(tau_c[layer + 1] + t_c[layer + 1], tau_b[layer] + t_b[layer])
    backward_end = tau_b[0] + t_b[0]
    t_c_no = tau_c[0] + t_c[0] - backward_end
    t_iter = (0.0 if prefetched else io_seconds) + forward_seconds + sum(t_b) + t_c_no + update_seconds
    return DagIteration(t_c_no=t_c_no, t_iter=t_iter, backward_starts=tuple(tau_b), comm_starts=tuple(tau_c))


def dag_iteration_from_bytes(backward_seconds: Sequence[float], layer_bytes: Sequence[float], cost: CommCost,
                             forward_seconds: float = 0.0, update_seconds: float = 0.0, io_seconds: float = 0.0,
                             prefetched: bool = True) -> DagIteration:
    """`dag_iteration` with each layer's t_c from the fitted `cost` (t_c(M) = a + b*M)."""
    return dag_iteration(backward_seconds, [cost.seconds(size) for size in layer_bytes], forward_seconds,
                         update_seconds, io_seconds, prefetched)
