"""The operator's own admission by free capacity, across experiments: a shared view of the nodes and their pods, the
pods it admitted that are not bound yet, and the trials waiting for capacity in creation order; used by `reconciler`.

Without Kueue or a gang scheduler, pods are scheduled one by one: in a burst, one pod of a trial holds a node while
its peer cannot be scheduled, and the trial waits on itself. So before a trial's pods are created, a pass asks
`room()` what is free and `plan.decide` creates them only when all fit (`capacity.Capacity.take`); `settle()`
then holds what it admitted until the scheduler has bound it, so passes of other experiments, which read the same
view a moment later, do not admit into the same room. The check and the hold run with no await between them (one
event loop): no two passes admit into the same room.

Reading nodes needs cluster-wide RBAC (list on nodes): in namespace mode, or where the API server refuses it, there
is no admission and pods are created as before (docs/operator.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any, Callable

from ringleader.api.spec import Gang
from ringleader.api.status import ExperimentStatus, Phase
from ringleader.api.trial import Expansion
from ringleader.controller import capacity, kube, plan, reasons, rendering
from ringleader.controller.settings import Settings

logger = logging.getLogger(__name__)
SNAPSHOT_SECONDS = 1.0
"""How long one read of the nodes and their pods serves every pass: two cluster-wide LISTs a second at most, and only
while trials wait to start. Staleness costs nothing: what the operator admitted meanwhile is held apart (`settle`)."""
HOLD_SECONDS = 60.0
"""Longest hold of an admitted pod's room while the scheduler has not bound it: it binds a pod that fits in well under
a second; one the fit misjudged (affinity, a node filling meanwhile) stops blocking others after this."""
WAITER_SECONDS = 60.0
"""A trial that waits for capacity keeps its place in the queue while its experiment's passes come (every
`capacity_retry_seconds`); one not seen for this long (its experiment deleted, or suspended) gives it up."""
TrialKey = tuple[str, str, str, int]  # (experiment creationTimestamp, namespace, experiment name, trial index)


@dataclasses.dataclass(frozen=True)
class _Hold:
    node: str
    requests: capacity.Quantities
    until: float


class Admitter:
    """The capacity view and the queue that passes of every experiment share."""

    def __init__(self, kube_: kube.Kube, settings: Settings, clock: Callable[[], float] = time.monotonic) -> None:
        self._kube = kube_
        self._settings = settings
        self._clock = clock
        self.enabled = not settings.scope.namespaces and settings.pods.admit_by_capacity
        self._lock = asyncio.Lock()
        self._read_at: float | None = None
        self._rooms: tuple[capacity.Room, ...] = ()
        self._bound: set[tuple[str, str]] = set()
        self._holds: dict[tuple[str, str], _Hold] = {}
        self._waiting: dict[TrialKey, tuple[str, float]] = {}
        """Trials waiting for capacity: their name ('namespace/trial') and when a pass last said so."""

    async def room(self, body: dict[str, Any], experiment, expansion: Expansion,
                       old: ExperimentStatus) -> capacity.Capacity | None:
        """What a pass over this experiment may admit into; None when nothing of it is judged (admission off, no
        trial about to start or waiting for pods). Call `settle` with the decision, with no await in between."""
        if not self.enabled:
            return None
        recorded = {t.name: t.phase for t in old.trials}
        pending = [t for t in expansion.trials if recorded.get(t.name, Phase.PENDING) == Phase.PENDING]
        spec = experiment.spec
        admit = spec.scheduling.queue_name is None and all(
            t.spec.scheduling.gang == Gang.OPERATOR for t in expansion.trials)
        # Trials whose pods are starting get the nodes too: a request no node holds is set against the largest.
        if not (admit and pending) and Phase.CREATED not in recorded.values():
            return None
        slots = spec.sweep.max_parallel if spec.sweep else 1
        demands = {}
        if admit:
            for trial in pending[:slots]:  # more cannot start in one pass
                found = rendering.demands(trial, self._settings)
                if found is not None:
                    demands[trial.name] = found
        if not await self._read():
            return None
        # No await from here to `settle`: the view, the holds and the queue are read and changed in one step.
        now = self._clock()
        self._holds = {pod: h for pod, h in self._holds.items() if pod not in self._bound and h.until > now}
        self._waiting = {k: v for k, v in self._waiting.items() if v[1] > now - WAITER_SECONDS}
        held = [capacity.Demand(f"{ns}/{pod}", h.requests) for (ns, pod), h in self._holds.items()]
        rooms = capacity.taken(self._rooms, held, {f"{ns}/{pod}": h.node for (ns, pod), h in self._holds.items()})
        own = (body["metadata"].get("creationTimestamp") or "", *_key(body))
        ahead = min((k for k in self._waiting if k[:3] < own), default=None)
        return capacity.Capacity(rooms, demands, admit, None if ahead is None else self._waiting[ahead][0])

    def settle(self, body: dict[str, Any], decision: plan.Plan, found: capacity.Capacity | None) -> None:
        """Hold the room of the pods `decision` admitted until they are bound, and keep the trials that wait for
        capacity in the queue (others leave it)."""
        if found is None:
            return
        namespace, name = _key(body)
        created, now = body["metadata"].get("creationTimestamp") or "", self._clock()
        requests = {d.pod: d.requests for demands in found.demands.values() for d in demands}
        for pod, node in decision.placed.items():
            self._holds[namespace, pod] = _Hold(node, requests[pod], now + HOLD_SECONDS)
        for trial in decision.status.trials:
            key = (created, namespace, name, trial.index)
            if trial.phase == Phase.PENDING and trial.reason == reasons.WAITING_FOR_CAPACITY:
                self._waiting[key] = (f"{namespace}/{trial.name}", now)
            else:
                self._waiting.pop(key, None)

    def forget(self, namespace: str, name: str) -> None:
        """An experiment is gone: its trials leave the queue at once."""
        self._waiting = {k: v for k, v in self._waiting.items() if k[1:3] != (namespace, name)}

    async def _read(self) -> bool:
        """Refresh the view of nodes and bound pods if older than SNAPSHOT_SECONDS; False once reading nodes is
        forbidden (admission then stays off: pods are created as before)."""
        async with self._lock:
            if self._read_at is not None and self._clock() - self._read_at < SNAPSHOT_SECONDS:
                return self.enabled
            try:
                nodes = await self._kube.list_nodes()
                # Nodes that report no allocatable are not judged: then no pod needs reading.
                pods = await self._kube.list_bound_pods() if capacity.rooms(nodes, ()) else []
            except kube.Forbidden as error:
                logger.warning("admission by free capacity is off: %s (the chart's cluster-wide ClusterRole grants "
                               "list on nodes)", error)
                self.enabled = False
                return False
            self._rooms = capacity.rooms(nodes, pods)
            self._bound = {(p["metadata"].get("namespace", ""), p["metadata"]["name"]) for p in pods}
            self._read_at = self._clock()
            return True


def _key(body: dict[str, Any]) -> tuple[str, str]:
    return body["metadata"]["namespace"], body["metadata"]["name"]
