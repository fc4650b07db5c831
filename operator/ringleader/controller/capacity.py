"""Whether a trial's pods fit the cluster's free capacity together: the operator's own admission without a gang
scheduler; `admitter` reads the view, `plan` and `trials` take verdicts from it, `pods` names the largest node.

Free capacity is what the scheduler counts: per schedulable Ready node, its allocatable minus the requests of
the pods bound there that have not ended. The trial's pods are placed on it first-fit-decreasing (largest pod
first, each on the first node with room that its nodeSelector and tolerations allow): a trial admitted so has a
place for every pod at once, so none of its pods waits, holding a node, while a peer cannot be scheduled.
Pods and nodes are the API server's JSON, read as is. Pure functions: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import decimal
import enum
from typing import Any, Iterable, Mapping

from kubernetes.utils import parse_quantity

Quantities = Mapping[str, decimal.Decimal]
PODS = "pods"  # the allocatable count of pods a node takes: every pod asks for one
ENDED = ("Succeeded", "Failed")
MAX_LISTED_NODES = 3  # nodes a waiting trial's message names, the freest first
_BINARY = (("Ti", 2 ** 40), ("Gi", 2 ** 30), ("Mi", 2 ** 20), ("Ki", 2 ** 10))


@dataclasses.dataclass(frozen=True)
class Demand:
    """One pod as admission weighs it: what it requests, and which nodes may take it."""

    pod: str
    requests: Quantities
    node_selector: Mapping[str, str] = dataclasses.field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()


@dataclasses.dataclass(frozen=True)
class Room:
    """One schedulable Ready node: what it has at all (allocatable), and what its bound pods leave free."""

    node: str
    allocatable: Quantities
    free: Quantities
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    taints: tuple[Mapping[str, Any], ...] = ()


class CapacityKind(str, enum.Enum):
    ADMIT = "Admit"
    """Every pod has a place now: create them."""
    WAIT = "Wait"
    """Some pod has no place now but would on an emptier cluster: the trial waits for capacity."""
    NEVER = "Never"
    """Some pod requests more than any node it may go to has at all: no wait can help."""


@dataclasses.dataclass(frozen=True)
class CapacityVerdict:
    kind: CapacityKind
    message: str = ""
    placed: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Pod name -> the node it was fitted on (ADMIT only)."""
    pod: str = ""
    """The pod no node can hold (NEVER only)."""


def _quantity(value: Any) -> decimal.Decimal:
    try:
        return decimal.Decimal(parse_quantity(value))
    except (ValueError, TypeError, decimal.InvalidOperation):
        return decimal.Decimal(0)  # a quantity the API server would have refused: nothing to count


def _add(into: dict[str, decimal.Decimal], quantities: Mapping[str, Any]) -> None:
    for resource, value in quantities.items():
        into[resource] = into.get(resource, decimal.Decimal(0)) + _quantity(value)


def requests_of(pod: Mapping[str, Any]) -> dict[str, decimal.Decimal]:
    """What a pod requests of its node, as the scheduler sums it: its containers' requests (a limit stands for a
    request it lacks, as the API server defaults it), at least each init container's, plus the pod's overhead and
    one of the node's pods."""
    spec = pod.get("spec") or {}

    def of(container: Mapping[str, Any]) -> dict[str, decimal.Decimal]:
        resources = container.get("resources") or {}
        found: dict[str, decimal.Decimal] = {}
        _add(found, {**(resources.get("limits") or {}), **(resources.get("requests") or {})})
        return found

    total: dict[str, decimal.Decimal] = {}
    for container in spec.get("containers") or []:
        _add(total, of(container))
    for container in spec.get("initContainers") or []:
        for resource, value in of(container).items():
            total[resource] = max(total.get(resource, decimal.Decimal(0)), value)
    _add(total, spec.get("overhead") or {})
    total[PODS] = total.get(PODS, decimal.Decimal(0)) + 1
    return total


def demand_of(pod: Mapping[str, Any]) -> Demand:
    spec = pod.get("spec") or {}
    return Demand(pod["metadata"]["name"], requests_of(pod), dict(spec.get("nodeSelector") or {}),
                  tuple(spec.get("tolerations") or ()))


def _is_ready(node: Mapping[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def rooms(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> tuple[Room, ...]:
    """The schedulable Ready nodes (cordoned and not-Ready ones take no new pods) that report allocatable
    resources, each with what the pods bound there and not ended (terminating ones included: they hold their
    requests until gone) leave free."""
    used: dict[str, dict[str, decimal.Decimal]] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and ((pod.get("status") or {}).get("phase") not in ENDED):
            _add(used.setdefault(node, {}), requests_of(pod))
    found = []
    for node in nodes:
        allocatable = {r: _quantity(v) for r, v in ((node.get("status") or {}).get("allocatable") or {}).items()}
        if not allocatable or (node.get("spec") or {}).get("unschedulable") or not _is_ready(node):
            continue
        name = node["metadata"]["name"]
        taken = used.get(name, {})
        found.append(Room(name, allocatable, {r: v - taken.get(r, decimal.Decimal(0)) for r, v in allocatable.items()},
                          dict(node["metadata"].get("labels") or {}),
                          tuple((node.get("spec") or {}).get("taints") or ())))
    return tuple(found)


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint.get("key")
    return toleration.get("key") == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def may_hold(room: Room, demand: Demand) -> bool:
    """Whether the node's labels match the pod's nodeSelector and the pod tolerates its NoSchedule and NoExecute
    taints. Node affinity and the trial's placement terms are not weighed: the scheduler still has the last word."""
    if any(room.labels.get(k) != v for k, v in demand.node_selector.items()):
        return False
    return all(any(_tolerates(t, taint) for t in demand.tolerations) for taint in room.taints
               if taint.get("effect") in ("NoSchedule", "NoExecute"))


def _short(requests: Quantities, have: Quantities) -> list[str]:
    """The resources a pod requests more of than `have` holds (a resource `have` lacks counts as none)."""
    return [r for r, v in requests.items() if v > 0 and v > have.get(r, decimal.Decimal(0))]


def _size(demand: Demand) -> tuple[decimal.Decimal, ...]:
    requests = demand.requests
    return (requests.get("nvidia.com/gpu", decimal.Decimal(0)), requests.get("cpu", decimal.Decimal(0)),
            requests.get("memory", decimal.Decimal(0)))


def fit(demands: Iterable[Demand], found: Iterable[Room]) -> dict[str, str] | None:
    """Pod -> node for every pod, first-fit-decreasing on the nodes' free capacity; None when some pod finds no
    room. Decreasing by (GPUs, CPU, memory): the largest pods are placed while the most room is left."""
    free = {room.node: dict(room.free) for room in found}
    by_node = {room.node: room for room in found}
    placed: dict[str, str] = {}
    for demand in sorted(demands, key=_size, reverse=True):
        node = next((n for n, left in free.items()
                     if may_hold(by_node[n], demand) and not _short(demand.requests, left)),
                    None)
        if node is None:
            return None
        for resource, value in demand.requests.items():
            free[node][resource] = free[node].get(resource, decimal.Decimal(0)) - value
        placed[demand.pod] = node
    return placed


def quantity_text(resource: str, value: decimal.Decimal) -> str:
    """A quantity as people write it: cpu 2, 500m; memory 1Gi, 1.5Gi; counts as integers."""
    if resource == "cpu":
        return f"{value.normalize():f}" if value == value.to_integral_value() else f"{(value * 1000).normalize():f}m"
    if resource == "memory" or resource.startswith(("ephemeral-storage", "hugepages-")):
        for suffix, size in _BINARY:
            if abs(value) >= size:
                return f"{(value / size).quantize(decimal.Decimal('0.1')).normalize():f}{suffix}"
    return f"{value.normalize():f}"


def describe(quantities: Quantities, resources: Iterable[str]) -> str:
    """'cpu 2, memory 1Gi': the named resources of `quantities` (the ones it lacks as 0)."""
    return ", ".join(f"{r} {quantity_text(r, quantities.get(r, decimal.Decimal(0)))}" for r in resources)


def _resources(demand: Demand) -> list[str]:
    return [r for r, v in demand.requests.items() if r != PODS and v > 0]


def largest(demand: Demand, found: Iterable[Room]) -> str | None:
    """'the largest node, n1, has cpu 2 allocatable': the node with the most allocatable of the resource the pod
    is shortest of everywhere, or None when no node is known."""
    candidates = [room for room in found if may_hold(room, demand)] or list(found)
    if not candidates:
        return None
    short = [r for r in _resources(demand)
             if all(r in _short(demand.requests, room.allocatable) for room in candidates)]
    resource = (short or _resources(demand) or ["cpu"])[0]
    room = max(candidates, key=lambda r: r.allocatable.get(resource, decimal.Decimal(0)))
    return f"the largest node, {room.node}, has {describe(room.allocatable, [resource])} allocatable"


def judge(demands: tuple[Demand, ...], found: tuple[Room, ...]) -> CapacityVerdict:
    """Whether the trial's pods may be created now (ADMIT), must wait for capacity (WAIT), or can never be held
    (NEVER). No node known (a cluster whose nodes report nothing): ADMIT, the scheduler decides as before. A pod
    no known node may take (by selector or taints) is left to the scheduler too: it waits for such a node."""
    if not found or not demands:
        return CapacityVerdict(CapacityKind.ADMIT)
    for demand in demands:
        allowed = [room for room in found if may_hold(room, demand)]
        if allowed and all(_short(demand.requests, room.allocatable) for room in allowed):
            return CapacityVerdict(CapacityKind.NEVER,
                                   f"pod {demand.pod} requests {describe(demand.requests, _resources(demand))}, "
                                   f"more than any node has: {largest(demand, allowed)}", pod=demand.pod)
    judged = [d for d in demands if any(may_hold(room, d) for room in found)]
    placed = fit(judged, found)
    if placed is not None:
        return CapacityVerdict(CapacityKind.ADMIT, placed=placed)
    return CapacityVerdict(CapacityKind.WAIT, f"needs {_needs(demands)}; free: {_free(found, demands)}")


def _needs(demands: tuple[Demand, ...]) -> str:
    shapes: dict[str, int] = {}
    for demand in demands:
        text = describe(demand.requests, _resources(demand)) or "no resources"
        shapes[text] = shapes.get(text, 0) + 1
    return ", ".join(f"{count} pod{'s' * (count != 1)} of {text}" for text, count in shapes.items())



def _free(found: tuple[Room, ...], demands: tuple[Demand, ...]) -> str:
    resources = list(dict.fromkeys(r for d in demands for r in _resources(d)))
    ordered = sorted(found, key=lambda room: [-room.free.get(r, decimal.Decimal(0)) for r in resources])
    listed = "; ".join(f"{room.node} {describe(room.free, resources)}" for room in ordered[:MAX_LISTED_NODES])
    more = len(ordered) - MAX_LISTED_NODES
    return listed + (f"; and {more} more node{'s' * (more != 1)}" if more > 0 else "")


def taken(found: tuple[Room, ...], demands: Iterable[Demand], placed: Mapping[str, str]) -> tuple[Room, ...]:
    """The rooms once the placed pods hold their requests: what the next trial may fit into."""
    used: dict[str, dict[str, decimal.Decimal]] = {}
    for demand in demands:
        if demand.pod in placed:
            _add(used.setdefault(placed[demand.pod], {}), demand.requests)
    return tuple(dataclasses.replace(room, free={r: v - used.get(room.node, {}).get(r, decimal.Decimal(0))
                                                 for r, v in room.free.items()}) for room in found)


@dataclasses.dataclass(frozen=True)
class Capacity:
    """What one pass over one experiment may admit its trials into; `plan.decide` takes from it trial by trial."""

    rooms: tuple[Room, ...]
    """The free capacity the operator's earlier admissions (pods created, not yet bound) left."""
    demands: Mapping[str, tuple[Demand, ...]] = dataclasses.field(default_factory=dict)
    """Each trial's pods as rendered, by trial name, for the trials that may start."""
    admit: bool = True
    """False where a gang scheduler or Kueue admits the pods: the rooms then only name capacity in messages."""
    ahead: str | None = None
    """A trial created earlier that waits for capacity: later trials queue behind it, in creation order."""

    def take(self, trial: str) -> tuple[CapacityVerdict | None, Capacity]:
        """The trial's verdict (None: not judged here), and what is left for the next trial."""
        if not self.admit or trial not in self.demands:
            return None, self
        demands = self.demands[trial]
        verdict = judge(demands, self.rooms)
        if verdict.kind == CapacityKind.ADMIT and self.ahead is not None:
            verdict = CapacityVerdict(CapacityKind.WAIT,
                                      f"queued behind trial {self.ahead}, created earlier and waiting for capacity")
        if verdict.kind == CapacityKind.WAIT:
            return verdict, dataclasses.replace(self, ahead=self.ahead or trial)
        return verdict, dataclasses.replace(self, rooms=taken(self.rooms, demands, verdict.placed))
