"""Sweeps expanded into trials, and each trial's rank layout: the unit that topology/, launch/ and runtime/ share."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
from typing import Any

import pydantic

from ringleader.api import constants, variants
from ringleader.api.base import ApiModel
from ringleader.api.experiment import DistributedTrainingExperiment, SpecError, mlflow_experiment_name, problems_of
from ringleader.api.problems import Problem
from ringleader.api.rules import combination_problem
from ringleader.api.spec import ExperimentSpec, Placement, Resources
from ringleader.api.variants import Architecture, Paradigm

# Where each sweep axis lands in the spec (wire names).
AXIS_PATHS: dict[str, tuple[str, ...]] = {
    "architecture": ("architecture",),
    "paradigm": ("sync", "paradigm"),
    "workers": ("workers", "replicas"),
    "parameterServers": ("parameterServers", "replicas"),
    "staleness": ("sync", "staleness"),
    "batchSize": ("model", "batchSize"),
    "model": ("model", "name"),
    "bandwidth": ("network", "bandwidth"),
    "compression": ("compression", "method"),
    "placement": ("scheduling", "placement"),
}
# A trial's objects are named "<trial>-worker-<i>"; keep room for the longest suffix within 63.
MAX_TRIAL_NAME = constants.MAX_NAME_LENGTH - len("-worker-1023")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:6]


def bounded_name(name: str, limit: int) -> str:
    """`name` if it fits in `limit`, else a prefix plus a short hash, so distinct long names stay distinct."""
    if len(name) <= limit:
        return name
    return f"{name[: limit - 7].rstrip('-.')}-{_digest(name)}"


def trial_name(experiment: str, index: int) -> str:
    """`<experiment>-<index>`, made a DNS-1035 label of at most MAX_TRIAL_NAME characters.

    The trial's Service is named after it, and Service names must start with a letter and have no dots,
    while an experiment's name may be any DNS subdomain; a name that had to change gets a hash of the
    original, so "a.b" and "a-b" still get different trials."""
    label = experiment.replace(".", "-")
    if not label[0].isalpha():
        label = f"dte-{label}"
    if label != experiment:
        label = f"{label}-{_digest(experiment)}"
    return bounded_name(f"{label}-{index}", MAX_TRIAL_NAME)


@dataclasses.dataclass(frozen=True)
class Slot:
    """One rank of a trial: its role, place in the role, and what its pod gets."""

    role: str
    index: int
    rank: int
    resources: Resources
    group: str | None = None
    node_selector: dict[str, str] = dataclasses.field(default_factory=dict)
    slowdown_percent: int = 100
    pod: int = 0
    """pod is the index of the rank's pod among its role's pods (`workers.ranksPerPod` ranks to a worker pod)."""
    local_rank: int = 0
    """local_rank is the rank's place in its pod (torchrun's LOCAL_RANK): its GPU there, `cuda:local_rank`."""
    local_world_size: int = 1
    """local_world_size is how many ranks its pod runs (LOCAL_WORLD_SIZE)."""
    group_rank: int = 0
    """group_rank is the index of its pod among all the trial's pods, servers' first (GROUP_RANK, NODE_RANK)."""

    @property
    def hostname(self) -> str:
        """The pod's host name (one per pod: a pod's ranks share it)."""
        return f"{self.role}-{self.pod}"

    @property
    def label(self) -> str:
        """How messages name the rank: "worker-1", or "worker-0/1" (pod worker-0, local rank 1) in a pod of many."""
        return self.hostname if self.local_world_size == 1 else f"{self.hostname}/{self.local_rank}"


REPETITION = "repetition"
"""The parameter that numbers a combination's repetitions (with `sweep.repetitions` above 1)."""


class Trial(ApiModel):
    """One runnable topology: an experiment's spec with one combination of the sweep applied."""

    experiment: str
    """experiment is the DistributedTrainingExperiment's name."""
    namespace: str = "default"
    """namespace of the experiment."""
    name: str
    """name of the trial, at most 51 characters: the prefix of its objects' names."""
    index: int
    """index of the trial in expansion order."""
    repetition: int = 0
    """repetition of this combination, from 0."""
    parameters: dict[str, str] = {}
    """parameters are the swept values that made this trial (wire names), and the repetition."""
    spec: ExperimentSpec
    """spec is resolved: no sweep, every swept value applied."""

    def mlflow_experiment_name(self) -> str:
        return mlflow_experiment_name(self.namespace, self.experiment, self.spec)

    def slots(self) -> list[Slot]:
        """Ranks in order: parameter servers first (rank 0 is ps-0 in a PS job), then workers by group."""
        spec = self.spec
        slots: list[Slot] = []
        if variants.ARCHITECTURES[spec.architecture].has_servers:
            for i in range(spec.parameter_servers.replicas):
                slots.append(Slot(constants.ROLE_PS, i, len(slots), spec.parameter_servers.resources,
                                  node_selector=dict(spec.scheduling.node_selector), pod=i, group_rank=i))
        servers = len(slots)
        k = spec.workers.pod_ranks
        groups = spec.workers.groups
        if not groups:
            for i in range(spec.workers.replicas):
                slots.append(Slot(constants.ROLE_WORKER, i, len(slots), spec.workers.resources,
                                  node_selector=dict(spec.scheduling.node_selector),
                                  pod=i // k, local_rank=i % k, local_world_size=k, group_rank=servers + i // k))
            return slots
        index = 0
        for group in groups:
            for _ in range(group.replicas):
                slots.append(Slot(
                    constants.ROLE_WORKER, index, len(slots), group.resources or spec.workers.resources,
                    group=group.name,
                    node_selector={**spec.scheduling.node_selector, **group.node_selector},
                    slowdown_percent=group.slowdown_percent,
                    pod=index // k, local_rank=index % k, local_world_size=k, group_rank=servers + index // k,
                ))
                index += 1
        return slots

    def worker_slots(self) -> list[Slot]:
        return [s for s in self.slots() if s.role == constants.ROLE_WORKER]

    def pods(self) -> list[list[Slot]]:
        """The trial's pods in order, servers' first, each the slots of its ranks in local-rank order."""
        pods: dict[int, list[Slot]] = {}
        for slot in self.slots():
            pods.setdefault(slot.group_rank, []).append(slot)
        return list(pods.values())

    def pod_of(self, rank: int) -> list[Slot]:
        """The slots of the ranks sharing `rank`'s pod, itself included."""
        group_rank = self.slots()[rank].group_rank
        return [s for s in self.slots() if s.group_rank == group_rank]

    @property
    def world_size(self) -> int:
        return len(self.slots())


@dataclasses.dataclass(frozen=True)
class Expansion:
    """A sweep's trials, and the combinations skipped as invalid with the reason for each."""

    trials: list[Trial]
    skipped: list[tuple[dict[str, str], str]]


def axis_wire(value: Any) -> Any:
    """A swept value as it sits in the spec document: an enum's value, an object's wire form (a placement)."""
    if isinstance(value, ApiModel):
        return value.wire()
    return getattr(value, "value", value)


def axis_text(value: Any) -> str:
    """A swept value as a trial parameter: an enum's value, a placement's label ("Spread", "Pack, servers Apart")."""
    if isinstance(value, Placement):
        return value.label()
    return str(getattr(value, "value", value))


def _set_path(document: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        document = document.setdefault(key, {})
    document[path[-1]] = value


def _repeats_another(document: dict[str, Any], chosen: dict[str, Any], axes: dict[str, list]) -> str | None:
    """Why a combination would run the same trial as another (it sets a value its topology ignores), or None.

    Sweeping parameterServers next to PeerToPeer, or staleness next to BSP, would otherwise run
    identical trials; only the combination with the axis's first value is kept."""
    architecture, paradigm = document["architecture"], document["sync"]["paradigm"]
    ignored = []
    if not variants.ARCHITECTURES[Architecture(architecture)].has_servers:
        ignored.append(("parameterServers", f"{architecture} has no parameter servers"))
    if Paradigm(paradigm) not in variants.STALE_PARADIGMS:
        ignored.append(("staleness", f"{paradigm} has no staleness bound"))
    for axis, why in ignored:
        if axis in chosen and chosen[axis] != axes[axis][0]:
            return f"{why}: the same trial as {axis}={axes[axis][0]}"
    return None


def expand(experiment: DistributedTrainingExperiment) -> Expansion:
    """Every trial of the experiment, in a stable order (matrix axes in declaration order, then repetition).

    Skipped, with the reason: RingAllReduce with a paradigm other than BSP, a compression method the architecture
    does not take, and combinations that
    would repeat another trial (a swept value that the combination's topology ignores).

    Raises SpecError if a combination is invalid for a reason other than ring allreduce's BSP-only rule,
    or if nothing is left to run."""
    spec = experiment.spec
    base = spec.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"sweep"})
    axes = spec.sweep.matrix.axes() if spec.sweep else {}
    repetitions = spec.sweep.repetitions if spec.sweep else 1
    trials: list[Trial] = []
    skipped: list[tuple[dict[str, str], str]] = []
    problems: list[Problem] = []
    for combination in itertools.product(*axes.values()):
        chosen = dict(zip(axes.keys(), combination))
        document = copy.deepcopy(base)
        for axis, value in chosen.items():
            _set_path(document, AXIS_PATHS[axis], axis_wire(value))
        parameters = {axis: axis_text(value) for axis, value in chosen.items()}
        reason = (combination_problem(document["architecture"], document["sync"]["paradigm"],
                                      document["compression"]["method"],
                                      document["scheduling"].get("placement", {}).get("servers", "Any"))
                  or _repeats_another(document, chosen, axes))
        if reason:
            skipped.append((parameters, reason))
            continue
        try:
            resolved = ExperimentSpec.model_validate(document)
        except pydantic.ValidationError as error:
            label = ", ".join(f"{k}={v}" for k, v in parameters.items()) or "the experiment"
            problems += [Problem(p.field and f"spec.{p.field}", f"trial ({label}): {p.message}",
                                 line=f"trial ({label}): {p}") for p in problems_of(error)]
            continue
        for repetition in range(repetitions):
            index = len(trials)
            name = trial_name(experiment.name, index)
            trials.append(Trial(
                experiment=experiment.name, namespace=experiment.namespace, name=name, index=index,
                repetition=repetition,
                parameters={**parameters, **({REPETITION: str(repetition)} if repetitions > 1 else {})},
                spec=resolved,
            ))
    if problems:
        raise SpecError(experiment.name, problems)
    if not trials:
        raise SpecError(experiment.name, ["`spec.sweep.matrix` leaves no valid trial: "
                                          + "; ".join(reason for _, reason in skipped)])
    return Expansion(trials, skipped)

