"""What a trial's Kueue Workload says (admitted, waiting and why, evicted, finished), and what to do to it; used by
`trials`.

Workloads are the API server's JSON (dicts), read as is. Pure functions: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

Workload = dict[str, Any]


class State(str, enum.Enum):
    WAITING = "Waiting"
    """Queued: Kueue has not admitted it (no quota yet, no such LocalQueue, or not looked at yet)."""
    ADMITTED = "Admitted"
    """Kueue reserved quota for every pod set and its admission checks passed: the pods may exist."""
    EVICTED = "Evicted"
    """Kueue took the admission back (preemption, a stopped queue, deactivation): the pods must go."""
    FINISHED = "Finished"
    """The operator marked it finished when the trial ended; its quota is released."""


class Action(str, enum.Enum):
    CREATE = "Create"
    FINISH = "Finish"
    DELETE = "Delete"


@dataclasses.dataclass(frozen=True)
class Admission:
    """A trial's Workload as Kueue left it."""

    name: str
    state: State
    message: str = ""


def _condition(workload: Workload, type_: str) -> dict[str, Any] | None:
    found = (workload.get("status") or {}).get("conditions") or []
    return next((c for c in found if c.get("type") == type_), None)


def _is_true(workload: Workload, type_: str) -> bool:
    condition = _condition(workload, type_)
    return condition is not None and condition.get("status") == "True"


def of(workload: Workload) -> Admission:
    """The admission a Workload records, in Kueue's order: finished, evicted, admitted, else waiting."""
    name = workload["metadata"]["name"]
    if _is_true(workload, "Finished"):
        return Admission(name, State.FINISHED, (_condition(workload, "Finished") or {}).get("message") or "")
    if _is_true(workload, "Evicted"):
        evicted = _condition(workload, "Evicted") or {}
        return Admission(name, State.EVICTED,
                         f"{evicted.get('reason') or 'Evicted'}: {evicted.get('message') or ''}".rstrip(": "))
    if _is_true(workload, "Admitted"):
        queue = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue")
        return Admission(name, State.ADMITTED, f"admitted by ClusterQueue {queue}" if queue else "admitted")
    # Kueue explains a wait on QuotaReserved ("couldn't assign flavors to pod set worker: insufficient
    # unused quota for cpu in flavor default, 1 more needed"; "LocalQueue team-a doesn't exist").
    reserved = _condition(workload, "QuotaReserved") or {}
    if _is_true(workload, "QuotaReserved"):
        return Admission(name, State.WAITING, "quota reserved; waiting for its admission checks")
    return Admission(name, State.WAITING, reserved.get("message") or "not looked at by Kueue yet")
