"""An architecture's exchange priced on the host and the wire at a placement; called by models/prediction.py.

Its phases (models/architectures.py, models/traffic.py) placed on the ranks `where` says, each flow costing its
ranks' CPUs and the NICs it crosses (models/resources.py says what each term is).
"""

from __future__ import annotations

from ringleader.api.variants import Architecture
from ringleader.models import resources
from ringleader.models.architectures import ARCHITECTURE_MODELS


def price(architecture: Architecture, servers: int, workers: int, model_bytes: float, where: resources.Where,
          bits_per_second: float, host: resources.HostCost | None, pod_ranks: int = 1) -> resources.ExchangeResources:
    """`architecture`'s exchange of `model_bytes` among `servers` servers (0: none) and `workers` workers placed as
    `where` says, `pod_ranks` to a pod (the two-level architectures' first level), on NICs of `bits_per_second`, each
    rank's CPU at its quota."""
    server_ranks, worker_ranks, nodes, cpus = where.ranks(servers, workers)
    phases = ARCHITECTURE_MODELS[architecture].phases(server_ranks, worker_ranks, model_bytes, pod_ranks)
    per_phase = resources.wire_bytes(phases, nodes)
    host_seconds = None if host is None else max(
        (host.seconds(moved, cpus[rank]) for rank, moved in resources.rank_bytes(phases).items()), default=0.0)
    return resources.ExchangeResources(host_seconds, 8.0 * sum(per_phase) / bits_per_second, sum(per_phase),
                                       bits_per_second, resources.cross_node_share(phases, nodes))
