"""Communication cost models of a synchronous-SGD iteration: study 1's, and a fitted cost of one message.

Called by models/architectures.py (each architecture's T_comm and prediction), models/calibration.py (the fit),
report/scaling.py (the report's study-1 figure) and bench/bench_ps_vs_ring.py (models beside
measurements). Pure functions of typed inputs: seconds, bytes, bits per second; no torch, no I/O.
Overlap with backward (study 2's DAG model) is models/overlap.py's.

Study 1, standard models, N workers, k servers, M model bytes, link B, latency a:

    1PS / kPS  T_comm = max(2*N*M/(k*B), 2*M/B) + 2a      (k = 1: 2*N*M/B + 2a, the server's NIC)
               full duplex: max((N+1)*M/(k*B), 2*M/B) + 2a (BSP's round pipelined; docs/performance.md, section 3)
    P2P        T_comm = 2*(N-1)*M/(N*B) + 2a              (ideal; incast makes it worse in practice)
    RA         T_comm = 2*(N-1)*a + 2*(N-1)/N * M/B

Two levels (`Pods`: k ranks to a pod, P = N/k pods; B_in, a_in the link inside a pod, B and a a pod's NIC, which its
k ranks share; docs/predict.md, "The models", two levels):

    1PS / kPS  the worker side is its pod's: max(.., 2*k*M/B)       (k pushes and k replies through one NIC)
    P2P        max(2*k*(N-k)/N * M/B, 2*(k-1)/N * M/B_in) + 2a      (shards of the pod's own ranks stay inside)
    RA         ranks in pod order: only the P hops between pods cross a NIC, the slowest: the formula above
    HRA        2(k-1)/k * M/B_in + 2(k-1)a_in  +  2(P-1)/P * M/B + 2(P-1)a
               (reduce-scatter and allgather inside the pod; k rings of M/k across, one NIC)
    PS, pod aggregation   2(k-1) * M/B_in + 2a_in  +  1PS/kPS of P workers
               (the pod's first rank takes k-1 gradients in, later sends k-1 copies of the weights out)

With one rank per pod each two-level model is its flat one.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Sequence

BITS_PER_BYTE = 8.0


@dataclasses.dataclass(frozen=True)
class Nic:
    """One NIC of the cluster: what every node can send (and receive) per second, and per-message latency."""

    bandwidth_bits_per_second: float
    """bandwidth_bits_per_second is B, in bits per second (10 Gbit/s = 10e9); must be > 0."""
    latency_seconds: float = 0.0
    """latency_seconds is a, the fixed cost of one message (one step of the ring), in seconds."""
    cap_bits_per_second: float | None = None
    """cap_bits_per_second is an emulated cap (spec.network.bandwidth, runtime/nic.py): a message of S bytes lasts
    at least 8S/cap, its real transfer and latency hidden under that when shorter. None: no cap."""

    def __post_init__(self) -> None:
        if not self.bandwidth_bits_per_second > 0:
            raise ValueError(f"bandwidth_bits_per_second must be greater than 0, got {self.bandwidth_bits_per_second}")
        if self.latency_seconds < 0:
            raise ValueError(f"latency_seconds must be greater than or equal to 0, got {self.latency_seconds}")
        if self.cap_bits_per_second is not None and not self.cap_bits_per_second > 0:
            raise ValueError(f"cap_bits_per_second must be greater than 0, got {self.cap_bits_per_second}")

    @property
    def effective_bits_per_second(self) -> float:
        """B, or the cap where it is slower: the rate bytes cross at."""
        return min(self.bandwidth_bits_per_second, self.cap_bits_per_second or self.bandwidth_bits_per_second)

    def transfer_seconds(self, size_bytes: float) -> float:
        """M/B: seconds to push `size_bytes` through this link (at the cap, if slower), latency excluded."""
        return BITS_PER_BYTE * size_bytes / self.effective_bits_per_second

    def latency_for(self, size_bytes: float) -> float:
        """a, or 0 for a message of `size_bytes` an emulated cap paces for longer than a + 8S/B: the runtime's pacing
        hides the real transfer, latency included (runtime/nic.py)."""
        if self.cap_bits_per_second and BITS_PER_BYTE * size_bytes / self.cap_bits_per_second >= \
                self.latency_seconds + BITS_PER_BYTE * size_bytes / self.bandwidth_bits_per_second:
            return 0.0
        return self.latency_seconds


@dataclasses.dataclass(frozen=True)
class Pods:
    """How the workers sit: `ranks` (k) to a pod, talking over `inside`, sharing one NIC to the other pods."""

    ranks: int = 1
    """ranks is k, the ranks of each pod (`workers.ranksPerPod`); the workers' count is a multiple of it."""
    inside: Nic | None = None
    """inside is the link between ranks of one pod (shared memory, NVLink, PCIe); None: the link between pods,
    without its emulated cap (the cap is a pod's card: runtime/nic.py)."""

    def link(self, across: Nic) -> Nic:
        """The link inside a pod, given the one between pods."""
        return self.inside or Nic(across.bandwidth_bits_per_second, across.latency_seconds)

    def count(self, workers: int) -> int:
        """P, the pods of `workers` ranks."""
        if self.ranks < 1 or workers % self.ranks:
            raise ValueError(f"workers ({workers}) must be a multiple of the ranks per pod ({self.ranks})")
        return workers // self.ranks


ONE_PER_POD = Pods()


def _check(workers: int, model_bytes: float) -> None:
    if workers < 1:
        raise ValueError(f"workers must be greater than or equal to 1, got {workers}")
    if model_bytes < 0:
        raise ValueError(f"model_bytes must be greater than or equal to 0, got {model_bytes}")


# ---------------------------------------------------------------------------------------------
# Study 1: communication time per iteration


def parameter_server_comm_seconds(workers: int, model_bytes: float, link: Nic, servers: int = 1,
                                  full_duplex: bool = False, pods: Pods = ONE_PER_POD) -> float:
    """1PS (servers=1) and kPS: max(2*N*M/(k*B), 2*M/B) + 2a.

    The k servers' NICs carry N pushes and N pulls of M/k each; a worker's own NIC carries M each way.
    `full_duplex`: a server's NIC sends and receives at once, and under BSP the worker answered first pushes
    its next gradient while the other answers still leave: the last push ends (N+1)*M/(k*B) after the round
    was released (docs/performance.md, section 3), so max((N+1)*M/(k*B), 2*M/B) + 2a. Workers sharing a pod share
    its NIC: the worker side is then `pods.ranks` pushes and replies."""
    _check(workers, model_bytes)
    if servers < 1:
        raise ValueError(f"servers must be greater than or equal to 1, got {servers}")
    transfers = workers + 1.0 if full_duplex else 2.0 * workers
    server_side = transfers * link.transfer_seconds(model_bytes) / servers
    worker_side = 2.0 * min(pods.ranks, workers) * link.transfer_seconds(model_bytes)
    return max(server_side, worker_side) + 2.0 * link.latency_for(model_bytes / servers)


def peer_to_peer_comm_seconds(workers: int, model_bytes: float, link: Nic, pods: Pods = ONE_PER_POD) -> float:
    """P2P, ideal: 2*(N-1)*M/(N*B) + 2a. One peer owns every shard itself and sends nothing: 0. With k ranks to a pod,
    each pod's NIC carries its k peers' shards to and from the N-k outside; those inside go over the pod's own link."""
    _check(workers, model_bytes)
    if workers == 1:
        # Not the formula's 2a: ringleader's single peer pushes to its own shard without the network.
        return 0.0
    k = min(pods.ranks, workers)
    across = 2.0 * k * (workers - k) / workers * link.transfer_seconds(model_bytes)
    inside = 2.0 * (k - 1) / workers * pods.link(link).transfer_seconds(model_bytes)
    return max(across, inside) + 2.0 * link.latency_for(model_bytes / workers)


def ring_comm_seconds(workers: int, model_bytes: float, link: Nic, pods: Pods = ONE_PER_POD) -> float:
    """RA: 2*(N-1)*a + 2*(N-1)/N * M/B (reduce-scatter then allgather, N-1 steps each); 0 for one worker. Ranks in
    pod order: a ring of more than one pod waits on its hops between pods; of one pod, on the link inside it."""
    _check(workers, model_bytes)
    if pods.count(workers) == 1 and workers > 1:
        link = pods.link(link)
    steps = workers - 1
    return (2.0 * steps * link.latency_for(model_bytes / workers)
            + 2.0 * steps / workers * link.transfer_seconds(model_bytes))


def hierarchical_ring_comm_seconds(workers: int, model_bytes: float, link: Nic, pods: Pods = ONE_PER_POD) -> float:
    """HRA: a ring of the k ranks of each pod inside it (reduce-scatter, then allgather), and between, k rings of P
    pods each carrying M/k, all through the pod's NIC: 2(k-1)/k * M/B_in + 2(k-1)a_in + 2(P-1)/P * M/B + 2(P-1)a."""
    count = pods.count(workers)
    inside = ring_comm_seconds(pods.ranks, model_bytes, pods.link(link))
    return inside + ring_comm_seconds(count, model_bytes, link)


def pod_aggregation_comm_seconds(workers: int, model_bytes: float, link: Nic, servers: int = 1,
                                 full_duplex: bool = False, pods: Pods = ONE_PER_POD) -> float:
    """PS with pod aggregation: the pod's first rank takes in k-1 gradients and sends k-1 copies of the weights out,
    over the link inside the pod, 2(k-1) M/B_in + 2a_in; in between, the servers see P workers (1PS / kPS)."""
    count = pods.count(workers)
    inside = pods.link(link)
    around = 2.0 * (pods.ranks - 1) * inside.transfer_seconds(model_bytes) + \
        (2.0 * inside.latency_for(model_bytes) if pods.ranks > 1 else 0.0)
    return around + parameter_server_comm_seconds(count, model_bytes, link, servers, full_duplex)


# ---------------------------------------------------------------------------------------------
# A fitted cost of one message or collective


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
    """t_c(M) = a + b*M through measured (bytes, seconds) pairs, by Theil-Sen: b the median slope between pairs of
    different sizes, a the median of t - b*M. On a loaded machine a message now and then waits for a core; a
    median moves less for it than a least-squares line does.

    Needs at least two distinct sizes; a and b are returned as fitted (a slightly negative a from noisy small
    messages is the data's, not clamped)."""
    if len(samples) < 2:
        raise ValueError(f"fit_comm_cost needs at least 2 (bytes, seconds) samples, got {len(samples)}")
    slopes = [(t2 - t1) / (m2 - m1) for i, (m1, t1) in enumerate(samples) for m2, t2 in samples[i + 1:] if m2 != m1]
    if not slopes:
        raise ValueError("fit_comm_cost needs at least 2 distinct sizes: with one size, a and b cannot be told apart")
    b = statistics.median(slopes)
    return CommCost(a_seconds=statistics.median(t - b * m for m, t in samples), b_seconds_per_byte=b)


KNEE = 0.5
"""KNEE: a step between two sizes whose seconds per byte are at least this share of the largest sizes' is past any
burst; below it, the smaller size still rode a shaper's token bucket (or a cache) at a rate training will not see."""


@dataclasses.dataclass(frozen=True)
class SustainedFit:
    """A fit that a token bucket's burst cannot bend: the cost, and how many of the smallest sizes it left out."""

    cost: CommCost
    inside_burst: int
    """inside_burst counts the smallest sizes left out of the slope: they crossed faster per byte than the largest."""


def fit_sustained(samples: Sequence[tuple[float, float]]) -> SustainedFit:
    """t(M) = a + b*M for messages streamed through a shaper or a CPU quota: b from the sizes beyond any burst, a from
    those inside it.

    A token bucket lets its burst through at line rate, then the cap: seconds grow slowly with size up to the burst,
    at the cap's 8/B per byte beyond (a convex curve; a cache gives the same shape). A line through every size, or
    its refit through the origin when its intercept falls below 0, mixes the two rates. Here the sizes are walked
    down from the two largest (the most sustained), keeping each whose step up from the next smaller size costs at
    least KNEE of the largest step's seconds per byte; b is the median of slopes among those (Theil-Sen, as
    fit_comm_cost), a the median of t - b*M among them (at least 0), or with a burst left out the fastest time among
    the sizes inside it: a burst carries them at line rate, so their time is mostly latency."""
    pairs = sorted(_median_per_size(samples))
    if len(pairs) < 2:
        raise ValueError("fit_sustained needs at least 2 distinct sizes: with one size, a and b cannot be told apart")
    step = [(t2 - t1) / (m2 - m1) for (m1, t1), (m2, t2) in zip(pairs, pairs[1:])]
    steep = [slope >= KNEE * step[-1] > 0 for slope in step]
    # A size is past the burst when the step up to it from the next smaller is steep: a step that spans the burst's
    # end is steep enough, but its smaller end rode the burst.
    start = len(pairs) - 2
    while start >= 2 and steep[start - 2]:
        start -= 1
    if (start == 1 and steep[0]) or not step[-1] > 0:
        start = 0  # steep all the way down, or the largest step lost in noise: no burst to tell, every size counts
    beyond, inside = pairs[start:], pairs[:start]
    slope = fit_comm_cost(beyond).b_seconds_per_byte
    if not inside:
        return SustainedFit(CommCost(max(0.0, statistics.median(t - slope * m for m, t in beyond)), slope), 0)
    return SustainedFit(CommCost(min(t for _, t in inside), slope), len(inside))


def _median_per_size(samples: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    by_size: dict[float, list[float]] = {}
    for size, seconds in samples:
        by_size.setdefault(float(size), []).append(float(seconds))
    return [(size, statistics.median(times)) for size, times in by_size.items()]
