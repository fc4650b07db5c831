"""What a byte costs on two resources per placement, the host and the wire; priced by models/pricing.py.

On real NICs the network runs far below its capacity because the hosts' software, not the wire, sets the price
of a byte (docs/predict.md, "Host or wire"). So each architecture's exchange is priced twice:

    host   every rank's bytes in and out times the CPU seconds a byte cost (measured while training: keys.CPU_COMM
           over the bytes moved), at the rank's CPU quota: a pod of 150m spends 1/0.15 the wall time a whole CPU
           would; the busiest rank sets the term (a parameter server's 2NM, a peer's or a ring rank's 4(N-1)/N M)
    wire   each node's NIC shared by the flows that cross it, phase by phase: in each phase the busiest NIC's larger
           direction at B. Flows between ranks of one node cost no NIC time. 1PS: the pushes of r workers on other
           nodes than the server's arrive through its NIC, then its replies leave through it: 2*r*M/B

The exchange lasts the longer of the two (a stream's copies and its transfer overlap), which says whether the host
or the wire bounds it; the NIC's utilisation is the busiest NIC's bytes over what it could carry in an iteration.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Mapping, Sequence

from ringleader.models.recorded import nodes_of
from ringleader.models.traffic import Phases
from ringleader.api import constants
from ringleader.api.trial import Trial
from ringleader.contract import keys
from ringleader.contract import records as records_

HOST = "host"
WIRE = "wire"


def wire_bytes(phases: Phases, nodes: Mapping[int, str]) -> list[float]:
    """Per phase, the bytes of the busiest NIC's busier direction; a flow between ranks of one node crosses none."""
    found = []
    for phase in phases:
        sent: dict[str, float] = {}
        received: dict[str, float] = {}
        for flow in phase:
            source, destination = nodes[flow.source], nodes[flow.destination]
            if source != destination:
                sent[source] = sent.get(source, 0.0) + flow.size_bytes
                received[destination] = received.get(destination, 0.0) + flow.size_bytes
        found.append(max([*sent.values(), *received.values()], default=0.0))
    return found


def cross_node_share(phases: Phases, nodes: Mapping[int, str]) -> float:
    """The share of the exchange's bytes whose flow crosses nodes (1.0 with no bytes: nothing stays inside a node)."""
    flows = [flow for phase in phases for flow in phase]
    total = sum(flow.size_bytes for flow in flows)
    crossing = sum(flow.size_bytes for flow in flows if nodes[flow.source] != nodes[flow.destination])
    return crossing / total if total > 0 else 1.0


def rank_bytes(phases: Phases) -> dict[int, float]:
    """Every rank's bytes in and out over the exchange."""
    moved: dict[int, float] = {}
    for flow in (flow for phase in phases for flow in phase):
        moved[flow.source] = moved.get(flow.source, 0.0) + flow.size_bytes
        moved[flow.destination] = moved.get(flow.destination, 0.0) + flow.size_bytes
    return moved


@dataclasses.dataclass(frozen=True)
class HostCost:
    """What one byte in or out cost a worker's CPU while training."""

    cpu_seconds_per_byte: float

    def seconds(self, size_bytes: float, cpus: float) -> float:
        """Wall seconds to move `size_bytes` at a quota of `cpus`: a stream's work is serial, so one CPU at most."""
        return self.cpu_seconds_per_byte * size_bytes / min(1.0, cpus)


def host_cost(records_by_rank: Mapping[int, Sequence[Mapping[str, Any]]]) -> HostCost | None:
    """The median over worker iterations after warm-up of cpu/comm, less the update's time inside it (one thread
    computing), over the bytes sent and received; None where no record has cpu/comm (an older runtime's)."""
    per_byte = []
    for records in records_by_rank.values():
        for r in records:
            moved = (r.get(keys.BYTES_SENT) or 0.0) + (r.get(keys.BYTES_RECEIVED) or 0.0)
            if records_.is_worker_record(r) and not r.get(keys.WARMUP) and r.get(keys.CPU_COMM) is not None \
                    and moved > 0:
                per_byte.append(max(0.0, r[keys.CPU_COMM] - (r.get(keys.TIME_UPDATE) or 0.0)) / moved)
    return HostCost(statistics.median(per_byte)) if per_byte else None


@dataclasses.dataclass(frozen=True)
class ExchangeResources:
    """One architecture's exchange on the two resources (seconds per iteration)."""

    host_seconds: float | None
    """host_seconds is the busiest rank's CPU time for its bytes at its quota; None: not measured (older records)."""
    wire_seconds: float
    """wire_seconds is the NICs' time, phase after phase the busiest NIC's."""
    nic_bytes: float
    """nic_bytes is what the busiest NIC carried in its busier direction, all phases together."""
    bits_per_second: float
    cross_node_share: float = 1.0
    """cross_node_share: the share of the exchange's bytes that cross nodes at this placement (validation.py's bands
    across nodes hold only where it is 1)."""

    @property
    def bound(self) -> str:
        """HOST or WIRE: which of the two lasts longer."""
        return HOST if self.host_seconds is not None and self.host_seconds > self.wire_seconds else WIRE

    @property
    def seconds(self) -> float:
        return max(self.wire_seconds, self.host_seconds or 0.0)

    def nic_utilization(self, iteration_seconds: float) -> float | None:
        """The busiest NIC's bits over what it could carry in `iteration_seconds` at its cap."""
        if not iteration_seconds > 0:
            return None
        return 8.0 * self.nic_bytes / (self.bits_per_second * iteration_seconds)


@dataclasses.dataclass(frozen=True)
class Where:
    """Where a trial's ranks ran and what CPU each had: what its predictions of every architecture are placed on."""

    worker_nodes: tuple[str, ...] = ()
    """worker_nodes: each worker's node, by worker index; () where not every rank recorded one (each rank is then
    taken as on a node of its own: every flow crosses a NIC)."""
    server_nodes: tuple[str, ...] = ()
    """server_nodes: the trial's servers' nodes, where it had servers; a predicted architecture's servers take them
    in turn, or where there are none, each a node of its own."""
    cpus: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """cpus: the fewest CPUs (quota) of a "worker" and of a "ps" rank, where recorded."""
    nic_bits_per_second: float | None = None
    """nic_bits_per_second: what a node's NIC carries (the probed link, or the cluster's cap where slower)."""

    @property
    def known(self) -> bool:
        return bool(self.worker_nodes)

    def ranks(self, servers: int, workers: int) -> tuple[list[int], list[int], dict[int, str], dict[int, float]]:
        """(server ranks, worker ranks, {rank: node}, {rank: CPUs}) of an architecture with `servers` servers (0: none)
        and `workers` workers, placed as the trial's ranks were."""
        server_ranks, worker_ranks = list(range(servers)), list(range(servers, servers + workers))
        nodes = {rank: (self.worker_nodes[index] if index < len(self.worker_nodes) else f"(worker {index})")
                 for index, rank in enumerate(worker_ranks)}
        for index, rank in enumerate(server_ranks):
            nodes[rank] = self.server_nodes[index % len(self.server_nodes)] if self.server_nodes \
                else f"(server {index})"
        worker = self.cpus.get(constants.ROLE_WORKER, 1.0)
        cpus = {rank: worker for rank in worker_ranks}
        cpus |= {rank: self.cpus.get(constants.ROLE_PS, worker) for rank in server_ranks}
        return server_ranks, worker_ranks, nodes, cpus


def where(trial: Trial, usage: Mapping[str, Any] | None, nic_bits_per_second: float | None) -> Where:
    """The Where of a trial from its summary's usage (each rank's node and CPUs)."""
    nodes = nodes_of(usage)
    slots = trial.slots()
    workers = [slot.rank for slot in slots if slot.role == constants.ROLE_WORKER]
    servers = [slot.rank for slot in slots if slot.role != constants.ROLE_WORKER]
    known = all(rank in nodes for rank in workers + servers)
    cpus: dict[str, float] = {}
    for rank, used in (usage or {}).items():
        quota = used.get(keys.CPUS) if isinstance(used, Mapping) else None
        role = constants.ROLE_WORKER if int(rank) in workers else constants.ROLE_PS
        if isinstance(quota, (int, float)) and quota > 0:
            cpus[role] = min(cpus.get(role, float(quota)), float(quota))
    return Where(tuple(nodes[r] for r in workers) if known else (), tuple(nodes[r] for r in servers) if known else (),
                 cpus, nic_bits_per_second)
