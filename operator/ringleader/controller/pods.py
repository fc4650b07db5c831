"""What a trial's pods say: scheduled or not, failed how, waiting on what, and the summary they left; used by `trials`.

Pods are the API server's JSON (dicts), read as is. Pure functions: no I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
import re
from typing import Any, Iterable

import pydantic

from ringleader.models import eta
from ringleader.api import constants
from ringleader.api.status import ReplicaStatus, Summary
from ringleader.contract import failures, keys, unpublished
from ringleader.controller import capacity, reasons

Pod = dict[str, Any]
FINISHED_PHASES = ("Succeeded", "Failed")
# A container waiting for one of these can never start as its pod is written: the image reference does not
# parse. Other waiting reasons (ErrImagePull, ImagePullBackOff, CreateContainerConfigError for a missing
# Secret, ...) may clear when someone fixes what is outside the pod, so they wait for the startup deadline.
NEVER_STARTS = ("InvalidImageName",)


def name(pod: Pod) -> str:
    return pod["metadata"]["name"]


def labels(pod: Pod) -> dict[str, str]:
    return pod["metadata"].get("labels") or {}


def role(pod: Pod) -> str:
    return labels(pod).get(constants.LABEL_ROLE, "")


def rank(pod: Pod) -> int:
    """The pod's first rank."""
    try:
        return int(labels(pod).get(constants.LABEL_RANK, ""))
    except ValueError:
        return 1 << 30  # unlabelled pods sort last


def ranks(pod: Pod) -> range:
    """Every rank the pod runs: `workers.ranksPerPod` of them from its first for a worker pod of several."""
    try:
        count = max(1, int(labels(pod).get(constants.LABEL_LOCAL_WORLD_SIZE, "1")))
    except ValueError:
        count = 1
    return range(rank(pod), rank(pod) + count)


def ranks_text(pod: Pod) -> str:
    """"rank 1", or "ranks 1-2" for a pod of several."""
    found = ranks(pod)
    return f"rank {found.start}" if len(found) == 1 else f"ranks {found.start}-{found[-1]}"


def phase(pod: Pod) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def is_terminating(pod: Pod) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def is_finished(pod: Pod) -> bool:
    return phase(pod) in FINISHED_PHASES


def _condition(pod: Pod, type_: str) -> dict[str, Any] | None:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") == type_), None)


def is_scheduled(pod: Pod) -> bool:
    """Bound to a node: spec.nodeName is set, or the scheduler reported PodScheduled=True."""
    if (pod.get("spec") or {}).get("nodeName"):
        return True
    condition = _condition(pod, "PodScheduled")
    return condition is not None and condition.get("status") == "True"


def is_ready(pod: Pod) -> bool:
    condition = _condition(pod, "Ready")
    return phase(pod) == "Running" and condition is not None and condition.get("status") == "True"


def _containers(pod: Pod) -> list[dict[str, Any]]:
    return list((pod.get("status") or {}).get("containerStatuses") or [])


def node(pod: Pod) -> str | None:
    return (pod.get("spec") or {}).get("nodeName")


def on_lost_node(pod: Pod) -> bool:
    """The pod's node stopped answering: Ready=False while every container still says ready and running.

    Only the node controller writes that contradiction (it marks a silent node's pods not ready, after its
    node-monitor grace period, and nothing else can update them), so no read of Node objects is needed. Ranks
    have no readiness probe: their containers are ready exactly while they run."""
    condition = _condition(pod, "Ready")
    containers = _containers(pod)
    return (phase(pod) == "Running" and node(pod) is not None and condition is not None
            and condition.get("status") == "False" and bool(containers)
            and all(c.get("ready") and "running" in (c.get("state") or {}) for c in containers))


@dataclasses.dataclass(frozen=True)
class PodFailure:
    """Why one pod failed, in the words `kubectl describe pod` would use."""

    pod: str
    rank: int
    """rank is the pod's rank that failed: the one its termination message names, else its first."""
    container: str | None = None
    exit_code: int | None = None
    reason: str | None = None  # OOMKilled, Error, Evicted, DeadlineExceeded, ...
    message: str | None = None
    finished_at: str = ""  # RFC 3339: sorts in time order

    def describe(self) -> str:
        if self.container is not None:
            text = f"pod {self.pod}: container {self.container} exited with code {self.exit_code}"
            if self.reason:
                text += f" ({self.reason})"
        else:
            text = f"pod {self.pod} failed: {self.reason or 'Failed'}"
        if self.message:
            text += f": {self.message}"
        return text


def failure_of(pod: Pod) -> PodFailure | None:
    """The failure of a pod (phase Failed, or a container that exited non-zero), or None if it has not failed.

    A pod-level reason (Evicted, DeadlineExceeded, NodeLost) names the cause better than the exit code of a
    container killed because of it, so it wins; the container is then mentioned in the message."""
    status = pod.get("status") or {}
    failed_containers: list[tuple[str | None, dict[str, Any]]] = []
    for container in _containers(pod):
        terminated = (container.get("state") or {}).get("terminated")
        if terminated and terminated.get("exitCode", 0) != 0:
            failed_containers.append((container.get("name"), terminated))
    if phase(pod) != "Failed" and not failed_containers:
        return None
    pod_reason = status.get("reason")
    if pod_reason or not failed_containers:
        detail = status.get("message") or ""
        if failed_containers:
            container_name, terminated = failed_containers[0]
            detail = f"{detail}; " if detail else ""
            detail += f"container {container_name} exited with code {terminated.get('exitCode')}"
        return PodFailure(pod=name(pod), rank=rank(pod), reason=pod_reason or "Failed",
                          message=failures.shorten_middle(detail) or None,
                          finished_at=_finished_at(failed_containers) or status.get("startTime") or "")
    container_name, terminated = failed_containers[0]
    message = terminated.get("message")
    # A pod of several ranks fails naming the one that died first (runtime/agent.py): blame weighs that rank.
    named = failures.rank_of([message or ""])
    return PodFailure(
        pod=name(pod), rank=named if named is not None and named in ranks(pod) else rank(pod), container=container_name,
        exit_code=terminated.get("exitCode"),
        reason=terminated.get("reason"), message=failures.shorten_middle(message) or None,
        finished_at=terminated.get("finishedAt") or "",
    )


def _finished_at(failed_containers: list[tuple[str | None, dict[str, Any]]]) -> str:
    return min((t.get("finishedAt") or "" for _, t in failed_containers), default="")


def exit_of(failure: PodFailure) -> failures.Exit:
    """A pod's failure as failures.blame() weighs it: a signal, an OOM kill or an eviction came from outside."""
    killed_by_signal = failure.exit_code is not None and failure.exit_code >= 128
    external = killed_by_signal or failure.container is None or failure.reason not in (None, "Error")
    said = [failure.message or ""]
    return failures.Exit(rank=failure.rank, external=external, reason=failures.reason_of(said),
                         permanent=not external and failures.is_permanent(said), order=seconds_of(failure.finished_at))


def seconds_of(timestamp: str) -> float:
    """An RFC 3339 time ("2026-11-22T10:00:01Z") in seconds since the epoch; +inf when unknown."""
    try:
        return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return math.inf


def created_at(pod: Pod) -> float:
    """When the pod was created, in seconds since the epoch; +inf when unknown."""
    return seconds_of(pod["metadata"].get("creationTimestamp") or "")


def is_started(pod: Pod) -> bool:
    """Scheduled and running (or already done): past everything that can keep a pod from starting."""
    return is_scheduled(pod) and phase(pod) in ("Running", "Succeeded")


def never_starts(pod: Pod) -> bool:
    """Whether a container of the pod waits for something its spec can never give (NEVER_STARTS)."""
    return any(((c.get("state") or {}).get("waiting") or {}).get("reason") in NEVER_STARTS for c in _containers(pod))


def blocked_by_affinity(pod: Pod) -> bool:
    """Whether the scheduler found no node for the pod because of pod (anti-)affinity: its Unschedulable message
    counts nodes that "didn't match pod affinity rules" or "pod anti-affinity rules" (the placement's terms), or
    "didn't satisfy existing pods anti-affinity rules"."""
    condition = _condition(pod, "PodScheduled")
    return (not is_scheduled(pod) and condition is not None and condition.get("reason") == "Unschedulable"
            and "affinity" in (condition.get("message") or ""))


_FITS_NO_NODE = re.compile(r"Insufficient [\w./-]+.*preemption: 0/(\d+) nodes are available: (\d+) Preemption is not "
                           r"helpful for scheduling", re.S)


def fits_no_node(pod: Pod) -> bool:
    """Whether the scheduler found that no node can ever hold the pod: short of a resource it requests and, on every
    node, "Preemption is not helpful" (evicting every other pod would not make room: the request exceeds what the
    node has at all). A cluster autoscaler adding a larger node is the one thing this does not foresee."""
    condition = _condition(pod, "PodScheduled")
    if is_scheduled(pod) or not condition or condition.get("reason") != "Unschedulable":
        return False
    verdict = _FITS_NO_NODE.search(condition.get("message") or "")
    return verdict is not None and verdict.group(1) == verdict.group(2) != "0"


def resources_field(role_: str) -> str:
    """The spec field whose resources a pod of `role_` takes: where a request is lowered."""
    return "workers" if role_ == constants.ROLE_WORKER else "parameterServers"


def cannot_start(pod: Pod, rooms: tuple[capacity.Room, ...] = ()) -> tuple[str, str] | None:
    """(reason, cause) when the pod can never start, whatever the wait: its image reference does not parse, or no
    node could ever hold what it requests (set against the largest node's allocatable when `rooms`, the nodes as
    the operator read them, are known); None otherwise."""
    if never_starts(pod):
        return reasons.INVALID_IMAGE, f"pod {name(pod)} can never start"
    if not fits_no_node(pod):
        return None
    asked: dict[str, list[str]] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for resource, value in (((container.get("resources") or {}).get("requests")) or {}).items():
            asked.setdefault(resource, []).append(str(value))
    field = resources_field(role(pod))
    requested = ", ".join(f"{resource} {' + '.join(values)}" for resource, values in asked.items())
    largest = capacity.largest(capacity.demand_of(pod), rooms)
    return reasons.REQUEST_FITS_NO_NODE, (f"pod {name(pod)} requests {requested}, more than any node has"
                                          f"{f' ({largest})' if largest else ''}: lower {field}.resources, or add "
                                          "a larger node")


def waiting_reason(pod: Pod) -> str:
    """Why a pod is not running yet, as a short phrase: "unschedulable (0/1 nodes are available: ...)"."""
    if not is_scheduled(pod):
        condition = _condition(pod, "PodScheduled")
        if condition and condition.get("reason") == "Unschedulable":
            message = condition.get("message")
            return f"unschedulable ({failures.shorten_middle(message)})" if message else "unschedulable"
        return "not scheduled yet"
    for container in _containers(pod):
        waiting = (container.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            detail = failures.shorten_middle(waiting.get("message"))
            return f"{waiting['reason']} ({detail})" if detail else waiting["reason"]
    return phase(pod)


_SUMMARY_KEYS = {
    key for name_, field in Summary.model_fields.items() for key in (name_, field.alias) if key
}
# Not a key of the runtime's summary: read from its prediction (models/eta.py).
_PREDICTED = Summary.model_fields["predicted_iteration_seconds"].alias


def ended_at(pod: Pod) -> float:
    """When the pod's last container ended, in seconds since the epoch; +inf while one has not (or says no time)."""
    ends = [((c.get("state") or {}).get("terminated") or {}).get("finishedAt") or "" for c in _containers(pod)]
    return max(map(seconds_of, ends)) if ends else math.inf


def holds_records(pod: Pod) -> bool:
    """Whether the pod's rank handed over records MLflow did not take, in its log (contract/unpublished.py): the
    pod is kept, whatever cleanPodPolicy says, since its log goes with it."""
    return any(unpublished.incomplete_of(((c.get("state") or {}).get("terminated") or {}).get("message"))
               for c in _containers(pod))


def ended_outside_runtime(pod: Pod) -> bool:
    """Whether a pod exited 0 without the termination message every rank the runtime ends leaves (its summary, or
    failures.ended_by_runtime): its process ended outside the training loop, os._exit(0) in user code."""
    terminated = [(c.get("state") or {}).get("terminated") for c in _containers(pod)]
    return phase(pod) == "Succeeded" and bool(terminated) and all(
        t is not None and t.get("exitCode") == 0 and not (t.get("message") or "").strip() for t in terminated)


def summary_of(pod: Pod) -> Summary | None:
    """The trial summary the aggregating worker wrote to its termination message, or None if it left none."""
    for container in _containers(pod):
        terminated = (container.get("state") or {}).get("terminated") or {}
        try:
            document = json.loads(terminated.get("message") or "")
        except (json.JSONDecodeError, TypeError):
            continue
        if not isinstance(document, dict):
            continue
        # The runtime may add keys of its own; the status keeps the ones its schema knows.
        known = {k: v for k, v in document.items() if k in _SUMMARY_KEYS}
        known[_PREDICTED] = eta.predictions(document.get(keys.PREDICTION)) or None
        try:
            return Summary.model_validate(known)
        except pydantic.ValidationError:
            continue
    return None


def replica_counts(pods: Iterable[Pod]) -> dict[str, ReplicaStatus]:
    """Pods per role, counted the way a Job counts them (terminating pods left out)."""
    counts: dict[str, dict[str, int]] = {}
    for pod in pods:
        if is_terminating(pod):
            continue
        entry = counts.setdefault(role(pod) or "unknown", {"active": 0, "ready": 0, "succeeded": 0, "failed": 0})
        current = phase(pod)
        if current == "Succeeded":
            entry["succeeded"] += 1
        elif current == "Failed":
            entry["failed"] += 1
        else:
            entry["active"] += 1
            entry["ready"] += int(is_ready(pod))
    return {role_: ReplicaStatus(**entry) for role_, entry in sorted(counts.items())}
