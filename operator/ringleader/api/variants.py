"""What makes each architecture, sync paradigm and compression method what it is: one table each, no torch.

Every package that treats variants differently reads these tables instead of comparing with an enum member:
the spec's CEL and pydantic rules and a sweep's skipped combinations (rules.py, trial.py), the MLflow params a
trial leaves out (tracking/schema.py), which backend and GPUs a rank needs (runtime/main.py, launch/devices.py),
the pods' shared memory (topology/rendering.py), the compute an iteration waits for (models/profile.py) and the
names of architectures in predictions (models/architectures.py). Each layer keeps its implementations in one table
keyed by the same enums (runtime: synchronizers, gates, codecs; models: each architecture's entry, rounds; topology:
templates), and tests/unit/test_variants.py fails when any table lacks a member.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Mapping

from ringleader.api import constants


class Architecture(str, enum.Enum):
    PARAMETER_SERVER = "ParameterServer"
    PEER_TO_PEER = "PeerToPeer"
    RING_ALL_REDUCE = "RingAllReduce"
    HIERARCHICAL_RING_ALL_REDUCE = "HierarchicalRingAllReduce"
    PARAMETER_SERVER_POD_AGGREGATION = "ParameterServerPodAggregation"


class Paradigm(str, enum.Enum):
    BSP = "BSP"
    ASP = "ASP"
    SSP = "SSP"
    DSSP = "DSSP"


class CompressionMethod(str, enum.Enum):
    NONE = "None"
    FP16 = "FP16"
    BF16 = "BF16"
    POWER_SGD = "PowerSGD"
    TOP_K = "TopK"


class Waits(str, enum.Enum):
    """What compute an iteration waits for under a paradigm (models/profile.Compute.critical)."""

    EVERY_WORKER = "the slowest worker of each iteration"
    SLOWEST_PACE = "the slowest worker's pace"
    OWN = "each worker's own"


CPU, CUDA = "cpu", "cuda"  # torch's device types


@dataclasses.dataclass(frozen=True)
class ArchitectureTraits:
    label: str
    """label is the short name in tables and metric names (p2p, ring); with servers it follows their count (1ps)."""
    roles: tuple[str, ...]
    """roles of its ranks, in rank order (api/constants.py ROLE_*): parameter servers first where it has them."""
    paradigms: tuple[Paradigm, ...]
    """paradigms it runs; fewer than all for a collective, in which every worker waits for all."""
    backends: Mapping[str, str]
    """backends: torch.distributed's backend per device type of the rank's tensors."""
    cost_model: str
    """cost_model is the name of its prediction's model (models/architectures.py ARCHITECTURE_MODELS), as tables print
    it."""
    paradigms_why: str = ""
    """paradigms_why says why it runs only `paradigms`, for error messages; empty when it runs them all."""
    serving: str = ""
    """serving names, in prose, the ranks that serve the model's shards to the workers (unpack their pushes, add them,
    apply the update, reply) on the path every worker waits on; empty where no rank serves (a collective)."""
    computes_together: bool = False
    """computes_together: its workers all start computing at one moment (the step's result reaches them together), so
    they compete for their machine's cores; a parameter server's replies reach its workers one after another."""
    buckets: bool = False
    """buckets: its gradients go in the ring's buckets, each sent from backward's hooks (runtime/ring.py), which its
    trials record and the DAG model, `whatif` and the overlap figure replay."""
    hierarchical: bool = False
    """hierarchical: its collective sums inside each pod first and across pods second (what `whatif` replays)."""
    pod_pushes: bool = False
    """pod_pushes: a pod's ranks add their gradients up first and one of them, the pod's first, exchanges with the
    servers for all (BytePS): the servers hear one worker per pod."""

    @property
    def collective(self) -> bool:
        """Every worker waits for all each iteration: it runs fewer than all paradigms."""
        return len(self.paradigms) < len(Paradigm)

    @property
    def has_servers(self) -> bool:
        return constants.ROLE_PS in self.roles

    @property
    def nccl(self) -> bool:
        """Its GPU ranks talk NCCL, which needs a GPU of its own per rank and a memory-backed /dev/shm beyond the
        container runtime's default 64Mi."""
        return "nccl" in self.backends[CUDA]

    @property
    def serving_role(self) -> str | None:
        """The role whose ranks serve: the servers where it has them, else its workers (each peer its shard)."""
        if not self.serving:
            return None
        return constants.ROLE_PS if self.has_servers else constants.ROLE_WORKER

    def backend(self, device_type: str) -> str:
        return self.backends.get(device_type, self.backends[CPU])


GLOO = {CPU: "gloo", CUDA: "gloo"}
NCCL_ON_CUDA = {CPU: "gloo", CUDA: "cpu:gloo,cuda:nccl"}

ARCHITECTURES: dict[Architecture, ArchitectureTraits] = {
    Architecture.PARAMETER_SERVER: ArchitectureTraits(
        "ps", (constants.ROLE_PS, constants.ROLE_WORKER), tuple(Paradigm), GLOO, "full-duplex server",
        serving="server"),
    Architecture.PEER_TO_PEER: ArchitectureTraits(
        "p2p", (constants.ROLE_WORKER,), tuple(Paradigm), GLOO, "study 1", serving="peers' shard servers",
        computes_together=True),
    # NCCL only where it helps: allreduce of CUDA tensors. Everything on CPU tensors stays on gloo.
    Architecture.RING_ALL_REDUCE: ArchitectureTraits(
        "ring", (constants.ROLE_WORKER,), (Paradigm.BSP,), NCCL_ON_CUDA, "DAG",
        paradigms_why="allreduce is a collective in which every worker waits for all", computes_together=True,
        buckets=True),
    # Horovod's hierarchical allreduce: reduce-scatter inside the pod, allreduce across pods, allgather inside.
    Architecture.HIERARCHICAL_RING_ALL_REDUCE: ArchitectureTraits(
        "hring", (constants.ROLE_WORKER,), (Paradigm.BSP,), NCCL_ON_CUDA, "DAG, two levels",
        paradigms_why="the hierarchical allreduce is a collective in which every worker waits for all",
        computes_together=True, buckets=True, hierarchical=True),
    # BytePS: the pod's ranks add their gradients (NCCL on GPU), its first rank pushes them once and shares the reply.
    Architecture.PARAMETER_SERVER_POD_AGGREGATION: ArchitectureTraits(
        "psagg", (constants.ROLE_PS, constants.ROLE_WORKER), (Paradigm.BSP,), NCCL_ON_CUDA, "server, two levels",
        paradigms_why="a pod's ranks add their gradients together before its one push, so they wait for each other "
        "every iteration and no staleness bound between them can hold", serving="server", pod_pushes=True),
}


@dataclasses.dataclass(frozen=True)
class ParadigmTraits:
    staleness_fields: tuple[str, ...]
    """staleness_fields are the `sync` fields (wire names) it requires; the others it ignores."""
    waits: Waits
    """waits says what compute an iteration waits for under it."""


STALENESS_FIELDS = ("staleness", "maxStaleness")
"""STALENESS_FIELDS: every `sync` field a paradigm may read besides `paradigm`."""

PARADIGMS: dict[Paradigm, ParadigmTraits] = {
    Paradigm.BSP: ParadigmTraits((), Waits.EVERY_WORKER),
    Paradigm.ASP: ParadigmTraits((), Waits.OWN),
    Paradigm.SSP: ParadigmTraits(("staleness",), Waits.SLOWEST_PACE),
    Paradigm.DSSP: ParadigmTraits(("staleness", "maxStaleness"), Waits.SLOWEST_PACE),
}


@dataclasses.dataclass(frozen=True)
class CodecTraits:
    architectures: tuple[Architecture, ...]
    """architectures that take it."""
    parameters: tuple[str, ...] = ()
    """parameters are the `compression` fields (wire names) it reads besides `method`; the others it ignores."""
    sends: str = ""
    """sends is what it exchanges that only `architectures` can combine, for error messages; empty for all."""


COMPRESSION_FIELDS = ("rank", "ratio", "errorFeedback")
"""COMPRESSION_FIELDS: every `compression` field a method may read besides `method`."""

# PowerSGD and TopK exchange what only collectives can combine (low-rank factors summed, chosen elements gathered).
CODECS: dict[CompressionMethod, CodecTraits] = {
    CompressionMethod.NONE: CodecTraits(tuple(Architecture)),
    CompressionMethod.FP16: CodecTraits(tuple(Architecture)),
    CompressionMethod.BF16: CodecTraits(tuple(Architecture)),
    CompressionMethod.POWER_SGD: CodecTraits((Architecture.RING_ALL_REDUCE,), ("rank", "errorFeedback"),
                                             sends="low-rank factors"),
    CompressionMethod.TOP_K: CodecTraits((Architecture.RING_ALL_REDUCE,), ("ratio", "errorFeedback"),
                                         sends="chosen elements"),
}

def requiring(field: str) -> tuple[Paradigm, ...]:
    """The paradigms that require the `sync` field `field` (a wire name of STALENESS_FIELDS)."""
    return tuple(p for p, traits in PARADIGMS.items() if field in traits.staleness_fields)


# Derived views, for the rules and messages that name them.
STALE_PARADIGMS = requiring("staleness")
COLLECTIVES = tuple(a for a, traits in ARCHITECTURES.items() if traits.collective)
"""COLLECTIVES are the architectures that run fewer than all paradigms."""
RESTRICTED_METHODS = tuple(m for m, traits in CODECS.items() if len(traits.architectures) < len(Architecture))
"""RESTRICTED_METHODS are the compression methods some architecture does not take."""
SERVER_ARCHITECTURES = tuple(a for a, traits in ARCHITECTURES.items() if traits.has_servers)


def takes(architecture: Architecture | str, method: CompressionMethod | str) -> bool:
    return Architecture(architecture) in CODECS[CompressionMethod(method)].architectures


def runs(architecture: Architecture | str, paradigm: Paradigm | str) -> bool:
    return Paradigm(paradigm) in ARCHITECTURES[Architecture(architecture)].paradigms


def label(architecture: Architecture | str, servers: int = 1) -> str:
    """The short name of an architecture in tables and metric names: 1ps, 4ps, p2p, ring."""
    traits = ARCHITECTURES[Architecture(architecture)]
    return f"{servers}{traits.label}" if traits.has_servers else traits.label


def either(names: list[str], word: str = "or") -> str:
    """'A', 'A or B', 'A, B or C' (with `word` "and": 'A, B and C'), for messages."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {word} {names[-1]}"

