"""The CPU work a prediction adds to the link: a server's or a peer's serving of the model, and the wait for a core
when more workers compute at once than their machine has CPUs.

Called by models/prediction.py. Why (docs/predict.md, the models; the numbers are the recorded run of
docs/predict-validation.md): a parameter server, and under PeerToPeer every peer for its shard, unpacks the round's
pushes, adds them and applies the update before it replies, on the path every worker waits on; the link-only models
predicted every 1PS and P2P trial low (P2P at 3 workers by 2 to 4 %). And where a trial's workers outnumber their
CPUs, workers that compute at the same moment (a ring's and the peers' all get the step's result together; a
parameter server replies one worker after another, so its workers compute staggered) share the cores: the ring's
and P2P's compute at 3 workers on 2 CPUs was about 1.5 times a parameter server trial's, P2P's a peer's serving more.
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Mapping, Sequence

from ringleader.models import contention
from ringleader.models.profile import Compute
from ringleader.api import constants
from ringleader.api.variants import ARCHITECTURES, Architecture
from ringleader.contract import keys
from ringleader.contract import records as records_

@dataclasses.dataclass(frozen=True)
class Cores:
    """How crowded a trial's machines were, from the usage in its summary (runtime/usage.py); 0: not recorded."""

    workers_per_cpu: float = 0.0
    """workers_per_cpu: on the most crowded machine (a node), its worker ranks per CPU it has."""
    threads_per_cpu: float = 0.0
    """threads_per_cpu: on the most crowded machine, every rank's threads per CPU (what contention.crowded reads)."""
    load_per_cpu: float | None = None
    """load_per_cpu: the busiest machine's 1-minute load per CPU when its ranks ended, other work's included
    (keys.LOAD_PER_CPU); None: not recorded."""

    def factor(self, architecture: Architecture) -> float:
        """How much longer a worker's compute takes under `architecture` than alone on its cores: workers per CPU
        where they compute at once (api/variants.py `computes_together`) and outnumber the CPUs, else 1."""
        return max(1.0, self.workers_per_cpu) if ARCHITECTURES[architecture].computes_together else 1.0


def cores(usage: Mapping[str, Any] | None, worker_ranks: Sequence[int]) -> Cores:
    """The Cores of a trial's summary `usage` ({rank: {host, node, cpus, threads, ...}}), per node
    (contention.ranks_by_machine); Cores() where it has none."""
    machines = contention.ranks_by_machine(usage)
    loads = [float(u[keys.LOAD_PER_CPU]) for ranks in machines.values() for _, u in ranks
             if isinstance(u.get(keys.LOAD_PER_CPU), (int, float))]
    if not machines:
        return Cores()
    workers = max(sum(rank in worker_ranks for rank, _ in ranks) / contention.supply(ranks)
                  for ranks in machines.values())
    threads = max(sum(int(u.get(keys.THREADS) or 1) for _, u in ranks) / contention.supply(ranks)
                  for ranks in machines.values())
    return Cores(workers, threads, max(loads, default=None))


@dataclasses.dataclass(frozen=True)
class Serving:
    """The work of serving the whole model to the trial's workers for one iteration: unpacking their pushes, adding
    them, the update (a parameter server's server/aggregation; a peer does 1/N of it, its shard's)."""

    model_seconds: float = 0.0
    source: str = "not priced"

    def seconds(self, architecture: Architecture, workers: int, servers: int = 1) -> float:
        """What one server (of `servers`) or one peer (of `workers`) spends serving per iteration; 0 where no rank
        serves (the ring)."""
        role = ARCHITECTURES[architecture].serving_role
        if role is None:
            return 0.0
        return self.model_seconds / (servers if role == constants.ROLE_PS else workers)


def _median_aggregation(records: Sequence[Mapping[str, Any]], role: str) -> float | None:
    values = [float(r[keys.SERVER_AGGREGATION]) for r in records
              if r.get(keys.ROLE, constants.ROLE_WORKER) == role and not r.get(keys.WARMUP)
              and isinstance(r.get(keys.SERVER_AGGREGATION), (int, float))]
    return statistics.median(values) if values else None


def serving(architecture: Architecture, records_by_rank: Mapping[int, Sequence[Mapping[str, Any]]], workers: int,
            servers: int) -> Serving:
    """The trial's Serving: measured by its servers (the slowest's median, times the servers) or its peers (the
    slowest peer's median, times the peers) where it has them, else from its workers' update of the whole model U:
    unpacking and adding N pushes of the model costs about N more passes like it, (N+1) U."""
    traits = ARCHITECTURES[architecture]
    if traits.serving_role is not None:
        measured = [m for m in (_median_aggregation(r, traits.serving_role) for r in records_by_rank.values())
                    if m is not None]
        if measured:
            share = servers if traits.has_servers else workers
            return Serving(share * max(measured), f"measured by the trial's {traits.serving}")
    updates = [float(r[keys.TIME_UPDATE]) for records in records_by_rank.values() for r in records
               if records_.is_worker_record(r) and not r.get(keys.WARMUP)
               and isinstance(r.get(keys.TIME_UPDATE), (int, float))]
    if not updates:
        return Serving()
    return Serving((workers + 1) * statistics.median(updates), "(N+1) times the workers' update")


def moved(compute: Compute, serving_: Serving, cores_: Cores, workers: int, source: Architecture | None,
          target: Architecture) -> Compute:
    """The trial's compute as `target`'s workers would have it on the same machines: each step less what sharing the
    cores added under the trial's own architecture (`source`; None: taken as is), plus what it adds under `target`.
    A crowded peer also shares its cores with its own shard server."""
    if source is None or source == target:
        return compute

    def added(architecture: Architecture) -> tuple[float, float]:
        factor = cores_.factor(architecture)
        workers_serve = ARCHITECTURES[architecture].serving_role == constants.ROLE_WORKER
        beside = serving_.seconds(architecture, workers) if workers_serve and factor > 1 else 0.0
        return factor, beside

    (f_from, beside_from), (f_to, beside_to) = added(source), added(target)
    return Compute({rank: {step: max(0.0, (seconds - beside_from) / f_from * f_to + beside_to)
                                    for step, seconds in steps.items()}
                             for rank, steps in compute.by_rank.items()})
