"""Every architecture's iteration at worker counts nobody has run yet, from a profile and a measured network.

Called by `ringleader predict --profile P --network N` (commands/plan.py). The same models as a trial's own
prediction (models/cost_models.py, models/overlap.py), priced on the network's measured curves rather than on a
trial's probe: each formula takes the latency and rate of the regime its own message size falls in
(network.Level.nic), and a ring's buckets cost the measured allreduce at their size (network.Level.allreduce_seconds),
replayed against the profile's backward so that what backward hides is not counted (the DAG model).

    N workers, k ranks to a node (P = N/k nodes), M the model's bytes, s servers on nodes of their own,
    C one worker's iteration from the profile (it computes the same batch at any N: weak scaling)

    kPS     C + max(2N*8M/(sB), 2k*8M/B) + 2a       the servers' NICs, or a node's, carrying its k ranks' pushes
    P2P     C + max(2k(N-k)/N * 8M/B, 2(k-1)/N * 8M/B_in) + 2a
    ring    C + what backward leaves of the buckets' allreduces among N (each step waits on a hop between nodes)
    hring   C + what backward leaves of: allreduce among k inside the node, then among P across
    kPSagg  C + 2(k-1)*8M/B_in + 2a_in + kPS of P workers

A server's NIC is priced as real TCP runs it, its replies sharing the link with the pushes in turn (2N transfers of
M/s): on the test cluster's NICs 1PS took that, not the (N+1) of a full-duplex card (docs/plan.md). Every
architecture runs BSP here (a planned cluster has no stragglers to measure). No band is stated for the cluster
asked about: a band is what held where predictions of its kind were checked against measurements, and plans were
checked only on the project's test cluster (CHECKED, docs/plan.md), whose band does not travel to another cluster;
the plan says what held there.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

from ringleader.models import collectives, cost_models, overlap
from ringleader.api import spec, variants
from ringleader.api.variants import Architecture
from ringleader.contract import environment as contract
from ringleader.planning import network as network_
from ringleader.planning import profiles

DEFAULT_SERVERS = (1, 4)
"""DEFAULT_SERVERS: the parameter-server counts planned, as a trial's prediction compares them (1PS and 4PS)."""
COMPUTE_BOUND_SHARE = 0.1
"""COMPUTE_BOUND_SHARE: an iteration whose communication left is under this share of it is compute-bound: a faster
network would change it by less than that."""
HOST_BOUND_SHARE = 0.7
"""HOST_BOUND_SHARE: a network whose measured rate stays below this share of its stated line rate is held back by the
hosts' stack (their CPU, copies, the protocol), not by the wire."""
NO_CODEC = ("+METHOD: planned compressed, each bucket in its method's rounds (FP16 and BF16: half the bytes); its "
            "codec's time is not priced: a trial that ran it measures it (`ringleader whatif` prices it from one)")


@dataclasses.dataclass(frozen=True)
class CheckedBand:
    """What held where plans were checked against measured trials: the |planned / measured - 1| within which 9 in 10
    fell (models/validation.fit), the median and worst, over how many pairs, at which worker counts, and where."""

    within: float | None
    """within is None where the pairs are too few for a 9-in-10 band (fewer than 9)."""
    median: float
    worst: float
    pairs: int
    workers: tuple[int, ...]
    where: str


CHECKED = CheckedBand(within=0.208, median=0.089, worst=0.208, pairs=12, workers=(2, 3),
                      where="the project's 3-node test cluster (NICs capped at 500 Mbit/s, pods of 150m CPU, one pod "
                            "to a node, the network its own ring's link probe)")
"""CHECKED: the plans of the test cluster's across-node trials from one worker's profile and the probed network
(`make study-plan`, its kept inputs in docs/studies/plan-nodes/; tests/unit/test_plan_on_the_cluster.py checks this is
what they plan)."""


def band_note() -> str:
    """Why the plan states no band for the cluster asked about, and what held where plans were checked."""
    spread = f"median |error| {100 * CHECKED.median:.1f} %, worst {100 * CHECKED.worst:.1f} %"
    held = (f"9 in 10 plans held within ±{100 * CHECKED.within:.1f} % ({CHECKED.pairs} pairs, {spread})"
            if CHECKED.within is not None else f"{CHECKED.pairs} pairs, too few for a 9-in-10 band ({spread})")
    workers = " and ".join(map(str, CHECKED.workers))
    return (f"no validated band for this cluster, since a band does not travel to a cluster it was not checked on. "
            f"Plans were checked only on {CHECKED.where}, at {workers} workers (docs/plan.md): {held}")


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The cluster asked about: worker counts, ranks to a node, and the parameter-server counts to compare."""

    workers: tuple[int, ...]
    ranks_per_node: int = 1
    servers: tuple[int, ...] = DEFAULT_SERVERS
    bucket_bytes: float = contract.DEFAULT_BUCKET_BYTES
    """bucket_bytes is the ring's bucket size (the runtime's default): what its allreduces are grouped by."""
    compressions: tuple[spec.Compression, ...] = ()
    """compressions are planned besides the uncompressed exchange, each for the architectures that take it; their
    codecs' time is not (a trial measures it: `ringleader whatif`)."""

    def __post_init__(self) -> None:
        if self.ranks_per_node < 1:
            raise ValueError(f"--ranks-per-node must be at least 1, got {self.ranks_per_node}")
        if not self.workers or any(n < 1 for n in self.workers):
            raise ValueError(f"--workers must be counts of at least 1, got {' '.join(map(str, self.workers))}")
        uneven = [n for n in self.workers if n % self.ranks_per_node]
        if uneven:
            raise ValueError(f"--workers {' '.join(map(str, uneven))}: not a multiple of --ranks-per-node "
                             f"{self.ranks_per_node} (a node holds that many ranks): give multiples of it")
        if not self.servers or any(s < 1 for s in self.servers):
            raise ValueError(f"--servers must be counts of at least 1, got {' '.join(map(str, self.servers))}")


@dataclasses.dataclass(frozen=True)
class Planned:
    """One architecture at one worker count."""

    label: str
    architecture: Architecture
    workers: int
    compute_seconds: float
    comm_seconds: float
    """comm_seconds is the communication the iteration waits for: all of it, a ring's what backward did not hide."""
    bound: str
    """bound is what holds the iteration back: compute (communication under COMPUTE_BOUND_SHARE of it), else what
    bounds the communication: inside node (the link between a node's ranks), NIC (the wire at its rate), host (the
    hosts' stack holding the network below its line rate) or network (no line rate to tell which)."""
    batch_size: int | None
    compression: str | None = None
    """compression is the method the exchange was planned with (its codec's time not priced); None uncompressed."""

    @property
    def iteration_seconds(self) -> float:
        return self.compute_seconds + self.comm_seconds

    @property
    def throughput(self) -> float:
        """Samples per second of all workers (worker iterations per second without a batch size)."""
        return self.workers * (self.batch_size or 1) / self.iteration_seconds

    @property
    def efficiency(self) -> float:
        """Scaling efficiency: the throughput over N times one worker's alone (C per iteration)."""
        return self.compute_seconds / self.iteration_seconds


@dataclasses.dataclass(frozen=True)
class _Priced:
    """One architecture's communication and, of it, the part inside a node (what the bound is told by)."""

    seconds: float
    inside_seconds: float = 0.0


@dataclasses.dataclass(frozen=True)
class _Case:
    """One architecture's exchange to price: the model, the network, N workers k to a node, and the rounds each
    bucket is sent in (one allreduce of all of it uncompressed; a compression's, models/collectives.py)."""

    model: profiles.ModelProfile
    network: network_.MeasuredNetwork
    workers: int
    k: int
    bucket_bytes: float
    rounds: tuple[collectives.RoundFractions, ...] = (collectives.RoundFractions(1.0),)

    @property
    def message_bytes(self) -> float:
        """M as a server's or a peer's messages carry it: the rounds' payloads of the whole model (FP16: half)."""
        return self.model.profile.total_bytes * sum(r.payload for r in self.rounds)

    @property
    def inside(self) -> network_.Level:
        return self.network.inside_or_across

    def bucketed(self, seconds: Callable[[float, collectives.RoundFractions], float]) -> float:
        """The buckets' first round sent as backward makes them ready, what is left of it when backward ends, and the
        later rounds of every bucket after it (they wait for every bucket's first: runtime/ring.py)."""
        first, *later = self.rounds
        replay = overlap.replay(self.model.profile, overlap.RuntimeBuckets(self.bucket_bytes),
                                lambda size: seconds(size, first))
        return replay.exposed_seconds + sum(seconds(b.size_bytes, r) for r in later for b in replay.buckets)


def _parameter_server(case: _Case, servers: int) -> _Priced:
    size = case.message_bytes
    pods = cost_models.Pods(case.k, case.inside.nic(size))
    return _Priced(cost_models.parameter_server_comm_seconds(case.workers, size,
                                                             case.network.across.nic(size / servers),
                                                             servers, pods=pods))


def _peer_to_peer(case: _Case) -> _Priced:
    size = case.message_bytes
    shard = size / case.workers
    pods = cost_models.Pods(case.k, case.inside.nic(shard))
    total = cost_models.peer_to_peer_comm_seconds(case.workers, size, case.network.across.nic(shard), pods)
    inside = 2.0 * (case.k - 1) / case.workers * pods.link(case.network.across.nic(shard)).transfer_seconds(size)
    return _Priced(total, inside if case.workers > 1 else 0.0)


def _ring(case: _Case) -> _Priced:
    """Ranks in node order: every step of a ring over more than one node waits on the hop between two of them. A
    gathered round (TopK) is N-1 steps, each one rank's payload."""
    level = case.network.across if case.workers > case.k else case.inside

    def seconds(size: float, round_: collectives.RoundFractions) -> float:
        payload = round_.payload * size
        if round_.gather:
            return (case.workers - 1) * level.message_seconds(payload)
        return level.allreduce_seconds(payload, case.workers)

    exposed = case.bucketed(seconds)
    return _Priced(exposed, exposed if level is not case.network.across else 0.0)


def _hierarchical_ring(case: _Case) -> _Priced:
    """Inside the node among its k ranks, then the k rings of P nodes across, which share the node's NIC: one ring's
    bytes of the whole bucket through it."""
    nodes = case.workers // case.k

    def seconds(size: float, round_: collectives.RoundFractions) -> float:
        payload = round_.payload * size
        return case.inside.allreduce_seconds(payload, case.k) + case.network.across.allreduce_seconds(payload, nodes)

    exposed = case.bucketed(seconds)
    whole, one = case.model.profile.total_bytes, collectives.RoundFractions(1.0)
    return _Priced(exposed, exposed * case.inside.allreduce_seconds(whole, case.k) / (seconds(whole, one) or 1.0))


def _pod_aggregation(case: _Case, servers: int) -> _Priced:
    size = case.message_bytes
    pods = cost_models.Pods(case.k, case.inside.nic(size))
    total = cost_models.pod_aggregation_comm_seconds(case.workers, size, case.network.across.nic(size / servers),
                                                     servers, pods=pods)
    around = 2.0 * (case.k - 1) * pods.link(case.network.across.nic(size)).transfer_seconds(size)
    return _Priced(total, around)


def _bound(compute: float, priced: _Priced, network: network_.MeasuredNetwork, message_bytes: float) -> str:
    if priced.seconds < COMPUTE_BOUND_SHARE * (compute + priced.seconds):
        return "compute"
    if network.inside is not None and priced.inside_seconds > priced.seconds - priced.inside_seconds:
        return "inside node"  # with one level given, a node's ranks are priced on the NIC's curve: told as it is
    line = network.across.line_rate_bits_per_second
    if not line:
        return "network"
    return "NIC" if network.across.nic(message_bytes).bandwidth_bits_per_second >= HOST_BOUND_SHARE * line else "host"


def _priced(architecture: Architecture, servers: int, case: _Case) -> _Priced:
    if architecture == Architecture.PARAMETER_SERVER:
        return _parameter_server(case, servers)
    if architecture == Architecture.PARAMETER_SERVER_POD_AGGREGATION:
        return _pod_aggregation(case, servers)
    return {Architecture.PEER_TO_PEER: _peer_to_peer, Architecture.RING_ALL_REDUCE: _ring,
            Architecture.HIERARCHICAL_RING_ALL_REDUCE: _hierarchical_ring}[architecture](case)


def _architectures(cluster: Cluster) -> list[tuple[Architecture, int]]:
    """(architecture, servers) in the enum's order, kPS once per server count; at one rank to a node the two-level
    architectures are their flat ones and are left out."""
    servers = sorted(set(cluster.servers))
    return [(a, s) for a, traits in variants.ARCHITECTURES.items()
            if cluster.ranks_per_node > 1 or not (traits.hierarchical or traits.pod_pushes)
            for s in (servers if traits.has_servers else [1])]


def plan(model: profiles.ModelProfile, network: network_.MeasuredNetwork, cluster: Cluster) -> list[Planned]:
    """Every architecture at every worker count of `cluster`, uncompressed, then with each of its compressions where
    the architecture takes the method (labelled "ring+FP16")."""
    found = []
    wires = [(None, (collectives.RoundFractions(1.0),))] + [
        (c.method.value, collectives.ROUNDS[c.method](model.profile, c)) for c in cluster.compressions]
    for method, rounds in wires:
        for workers in sorted(set(cluster.workers)):
            for architecture, servers in _architectures(cluster):
                if method is not None and not variants.takes(architecture, method):
                    continue
                case = _Case(model, network, workers, cluster.ranks_per_node, cluster.bucket_bytes, tuple(rounds))
                priced = _priced(architecture, servers, case)
                comm = priced.seconds if workers > 1 else 0.0
                shard = case.message_bytes / (servers if variants.ARCHITECTURES[architecture].has_servers else workers)
                label = variants.label(architecture, servers) + (f"+{method}" if method else "")
                found.append(Planned(label, architecture, workers, model.iteration_seconds, comm,
                                     _bound(model.iteration_seconds, dataclasses.replace(priced, seconds=comm),
                                            network, shard), model.batch_size, method))
    return found


def labels(plans: Sequence[Planned]) -> list[str]:
    """The architectures' labels in the order planned."""
    return list(dict.fromkeys(p.label for p in plans))


def table(plans: Sequence[Planned]) -> str:
    """Per architecture, a row per worker count: iteration, compute, comm, throughput, efficiency, bound."""
    unit = "samples/s" if plans and plans[0].batch_size else "iter/s x N"
    lines = [f"{'architecture':<13} {'workers':>7} {'iteration ms':>12} {'compute ms':>10} {'comm ms':>9} "
             f"{unit:>11} {'efficiency':>10}  bound"]
    for label in labels(plans):
        for p in (p for p in plans if p.label == label):
            lines.append(f"{p.label:<13} {p.workers:>7} {1000 * p.iteration_seconds:>12.3f} "
                         f"{1000 * p.compute_seconds:>10.3f} {1000 * p.comm_seconds:>9.3f} {p.throughput:>11.1f} "
                         f"{100 * p.efficiency:>9.1f}%  {p.bound}")
    return "\n".join(lines)


def best(plans: Sequence[Planned]) -> dict[int, Planned]:
    """The fastest at each worker count: of the uncompressed exchanges, where the plan has them (a compression's
    codec is not priced, so it would win on time it was not charged)."""
    fastest: dict[int, Planned] = {}
    uncompressed = [p for p in plans if p.compression is None] or list(plans)
    for p in uncompressed:
        if p.workers not in fastest or p.iteration_seconds < fastest[p.workers].iteration_seconds:
            fastest[p.workers] = p
    return fastest


def answer(plans: Sequence[Planned]) -> str:
    """One line per worker count: the fastest architecture, its efficiency and what bounds it, the runner-up, and the
    fastest compressed exchange, said without its codec."""
    lines = []
    for workers, fastest in sorted(best(plans).items()):
        at = sorted((p for p in plans if p.workers == workers and p.label != fastest.label),
                    key=lambda p: p.iteration_seconds)
        others = [p for p in at if p.compression is None]
        compressed = [p for p in at if p.compression is not None]
        said = (f"{workers} workers: {fastest.label} fastest, {1000 * fastest.iteration_seconds:.1f} ms an iteration, "
                f"scaling efficiency {100 * fastest.efficiency:.0f} % ({_held_back(fastest)})")
        if others:
            said += (f"; then {others[0].label} at {others[0].iteration_seconds / fastest.iteration_seconds:.2f}x "
                     "its time")
        if compressed:
            said += (f"; compressed, {compressed[0].label} {1000 * compressed[0].iteration_seconds:.1f} ms before its "
                     "codec's time")
        lines.append(said)
    return "\n".join(lines)


def _held_back(planned: Planned) -> str:
    if planned.bound == "compute":
        return "compute-bound: a faster network would change it by under a tenth"
    return f"communication {100 * planned.comm_seconds / planned.iteration_seconds:.0f} % of it, {planned.bound}-bound"


def document(plans: Sequence[Planned], model: profiles.ModelProfile, network: network_.MeasuredNetwork,
             cluster: Cluster) -> dict[str, Any]:
    """The plan as JSON: what it was planned from, and per architecture and worker count the prediction, in seconds."""
    return {
        "profile": model.source,
        "network": network.said(),
        "ranksPerNode": cluster.ranks_per_node,
        "paradigm": "BSP",
        "band": None,
        "bandNote": band_note(),
        "checked": dataclasses.asdict(CHECKED),
        "codecNote": NO_CODEC if any(p.compression for p in plans) else None,
        "architectures": {
            label: [{"workers": p.workers, "iterationSeconds": p.iteration_seconds,
                     "computeSeconds": p.compute_seconds, "commSeconds": p.comm_seconds,
                     "throughput": p.throughput, "throughputUnit": "samples/s" if p.batch_size else "iterations/s",
                     "efficiency": p.efficiency, "bound": p.bound, "compression": p.compression}
                    for p in plans if p.label == label]
            for label in labels(plans)},
    }
