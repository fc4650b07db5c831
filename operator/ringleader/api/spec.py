"""The desired state of a DistributedTrainingExperiment: the one source of truth for its CRD schema and rules.

Longer than other modules on purpose: it is the schema, read top to bottom in the order of the spec,
and most of its lines are the field docstrings that become the CRD's descriptions and docs/api.md.
"""

from __future__ import annotations

import enum
import json
import re
from typing import Annotated

import pydantic

from ringleader.api import base, labels, rules, uris, variants
from ringleader.api.base import ApiModel

# Kubernetes quantities, restricted to the forms people write for these fields.
CPU_PATTERN = r"^([0-9]+m|[0-9]+(\.[0-9]{1,3})?)$"
MEMORY_PATTERN = r"^[0-9]+(Ki|Mi|Gi|Ti|k|M|G|T)?$"
BANDWIDTH_PATTERN = r"^[1-9][0-9]*(Kbit|Mbit|Gbit|Tbit)$"
DNS_LABEL_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
BUILTIN_MODELS = ("mlp", "cnn", "resnet18", "resnet50", "vgg16", "transformer")
MODEL_PATTERN = r"^(" + "|".join(BUILTIN_MODELS) + r"|[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*)$"
MAX_TRIALS = 256
# A Kueue Workload holds at most 8 pod sets: one per worker group, and one for the parameter servers.
MAX_QUEUED_WORKER_GROUPS = 7
IMAGE_PATTERN = r"^[^\s]+$"
SECRET_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
FACTORY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$"
DATA_PATH_PATTERN = r"^\S+$"  # as IMAGE_PATTERN, written apart so each has its own hint
QUEUE_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"  # a DNS label, as Kueue checks the queue-name label
# What each pattern means, for error messages (`experiment.problems_of`).
PATTERN_HINTS = {
    CPU_PATTERN: 'a CPU quantity such as "500m", "1" or "2.5"',
    MEMORY_PATTERN: 'a memory quantity such as "512Mi" or "4Gi"',
    BANDWIDTH_PATTERN: 'a bandwidth such as "100Mbit", "1Gbit" or "10Gbit"',
    DNS_LABEL_PATTERN: "a DNS label: lower-case letters, digits and '-', starting with a letter",
    MODEL_PATTERN: f"a built-in model ({', '.join(BUILTIN_MODELS)}) or \"package.module:factory\"",
    IMAGE_PATTERN: "an image reference without spaces",
    SECRET_NAME_PATTERN: "the name of a Secret (or PersistentVolumeClaim): lower-case letters, digits, '-' and '.'",
    FACTORY_PATTERN: '"package.module:factory", a callable importable in the image',
    DATA_PATH_PATTERN: "a path without spaces",
    **labels.PATTERN_HINTS,
}

CpuQuantity = Annotated[str, pydantic.StringConstraints(pattern=CPU_PATTERN, max_length=16)]
MemoryQuantity = Annotated[str, pydantic.StringConstraints(pattern=MEMORY_PATTERN, max_length=16)]
Bandwidth = Annotated[str, pydantic.StringConstraints(pattern=BANDWIDTH_PATTERN, max_length=16)]
ModelName = Annotated[str, pydantic.StringConstraints(pattern=MODEL_PATTERN, max_length=253)]
MAX_NODE_SELECTOR_LABELS = 32


class SyncSpec(ApiModel):
    """sync is how workers are kept in step: the synchronization paradigm and its staleness bounds."""

    paradigm: variants.Paradigm = variants.Paradigm.BSP
    """paradigm is BSP (wait for every worker each iteration), ASP (never wait), SSP (the fastest worker
    may run at most `staleness` iterations ahead of the slowest) or DSSP (SSP whose threshold moves
    between `staleness` and `maxStaleness` from the workers' push intervals). Default BSP.
    RingAllReduce supports BSP only."""
    staleness: Annotated[base.Integer, pydantic.Field(ge=0, le=1000)] | None = None
    """staleness is SSP's bound s, or DSSP's lower bound s_L, in iterations. Required for SSP and DSSP,
    ignored by BSP and ASP. 0 makes SSP behave as BSP."""
    max_staleness: Annotated[base.Integer, pydantic.Field(ge=1, le=1000)] | None = None
    """maxStaleness is DSSP's upper bound s_U, in iterations; must be greater than `staleness`.
    Required for DSSP, ignored otherwise. The server grants a fast worker up to maxStaleness - staleness
    extra iterations."""

    rules = (
        rules.Rule(
            cel="!has(self.maxStaleness) || !has(self.staleness) || self.maxStaleness > self.staleness",
            message="`sync.maxStaleness` must be greater than `sync.staleness`: DSSP moves its threshold "
            "between the two; raise maxStaleness or lower staleness",
            holds=lambda s: s.max_staleness is None or s.staleness is None or s.max_staleness > s.staleness,
            field_path=".maxStaleness",
        ),
    )


class Resources(ApiModel):
    """resources are what each pod of a role requests (and is limited to)."""

    cpu: CpuQuantity = "1"
    """cpu is the CPU request and limit, a Kubernetes quantity ("500m", "2"). Default "1"."""
    memory: MemoryQuantity = "2Gi"
    """memory is the memory request and limit, a Kubernetes quantity ("512Mi", "4Gi"). Default "2Gi"."""
    gpu: Annotated[base.Integer, pydantic.Field(ge=0, le=16)] = 0
    """gpu is the number of GPUs per pod (requested as the operator's GPU resource name,
    nvidia.com/gpu by default). Default 0: CPU pods, gloo everywhere. With GPUs, tensors live on the
    GPU and ring allreduce uses NCCL."""


class ParameterServers(ApiModel):
    """parameterServers are the servers of a ParameterServer job, each holding a shard of the parameters."""

    replicas: Annotated[base.Integer, pydantic.Field(ge=1, le=64)] = 1
    """replicas is the number of parameter servers (k). Default 1. Each server holds 1/k of the parameters'
    bytes (large tensors are split into element ranges across servers). Ignored by PeerToPeer and
    RingAllReduce."""
    resources: Resources = Resources()
    """resources of each parameter-server pod. Default 1 CPU, 2Gi, no GPU."""


class WorkerGroup(ApiModel):
    """A group of workers with their own placement, size and speed, for heterogeneous clusters."""

    name: Annotated[str, pydantic.StringConstraints(pattern=DNS_LABEL_PATTERN, max_length=20)]
    """name identifies the group in pod labels and reports; a DNS label of at most 20 characters."""
    replicas: Annotated[base.Integer, pydantic.Field(ge=1, le=1024)]
    """replicas is the number of workers in this group. The groups' replicas add up to `workers.replicas`."""
    resources: Resources | None = None
    """resources of this group's pods. Default: `workers.resources`."""
    node_selector: labels.label_map("workers.groups[].nodeSelector", MAX_NODE_SELECTOR_LABELS) = {}
    """nodeSelector places this group's pods, merged over `scheduling.nodeSelector`; labels as in a pod's
    nodeSelector."""
    slowdown_percent: Annotated[base.Integer, pydantic.Field(ge=100, le=10000)] = 100
    """slowdownPercent stretches this group's compute to emulate stragglers: 300 makes every
    forward and backward pass take three times as long as measured. Default 100 (no slowdown)."""


class Workers(ApiModel):
    """workers compute gradients; in PeerToPeer they are also the servers of their own shard."""

    replicas: Annotated[base.Integer, pydantic.Field(ge=1, le=1024)] = 2
    """replicas is the number of workers (N): ranks, not pods. Default 2. With `ranksPerPod` k, N/k pods."""
    ranks_per_pod: Annotated[base.Integer, pydantic.Field(ge=1, le=16)] | None = None
    """ranksPerPod is how many worker ranks each worker pod runs (k), as torchrun's `--nproc-per-node`: ranks of
    one pod share its memory, its GPUs (one each, `cuda:LOCAL_RANK`) and its node, and split its whole CPUs (torch
    threads per rank: floor(cpu / k), at least 1). Each rank gets torchrun's environment (LOCAL_RANK,
    LOCAL_WORLD_SIZE, GROUP_RANK, NODE_RANK, RANK, WORLD_SIZE). A rank that dies ends its pod's other ranks, and
    the pod fails as that rank did, naming it, then restarts or fails as runPolicy says. Unset (default): one rank
    per GPU of `resources.gpu`, or 1 on CPU pods. `replicas` (and each group's) must be a multiple of it; on GPU
    pods it may not exceed `resources.gpu`. Parameter servers always run one rank per pod."""
    resources: Resources = Resources()
    """resources of each worker pod, unless its group sets its own, shared by its `ranksPerPod` ranks. Default 1
    CPU, 2Gi, no GPU."""
    groups: Annotated[list[WorkerGroup], pydantic.Field(max_length=16, json_schema_extra=base.list_map("name"))] = []
    """groups split the workers into heterogeneous groups (placement, resources, slowdown), in rank
    order. Empty (default): one homogeneous group. When set, their replicas add up to `replicas`."""

    @property
    def pod_ranks(self) -> int:
        """The ranks each worker pod runs: `ranksPerPod`, else one per GPU, else 1."""
        return self.ranks_per_pod or self.resources.gpu or 1

    rules = (
        rules.Rule(
            cel=f"self.replicas % {rules.POD_RANKS_CEL} == 0",
            message="`workers.replicas` must be a multiple of `workers.ranksPerPod` (unset: `workers.resources.gpu`, "
            "or 1 on CPU pods), since every worker pod runs that many ranks: change replicas or set ranksPerPod",
            holds=lambda w: w.replicas % w.pod_ranks == 0,
            field_path=".replicas",
        ),
        rules.Rule(
            cel=f"self.groups.all(g, g.replicas % {rules.POD_RANKS_CEL} == 0)",
            message="`workers.groups` replicas must each be a multiple of `workers.ranksPerPod` (unset: "
            "`workers.resources.gpu`, or 1): a pod's ranks belong to one group; change the group's replicas",
            holds=lambda w: all(g.replicas % w.pod_ranks == 0 for g in w.groups),
            field_path=".groups",
        ),
        rules.Rule(
            cel="!has(self.ranksPerPod) || self.resources.gpu == 0 || self.ranksPerPod <= self.resources.gpu",
            message="`workers.ranksPerPod` must not exceed `workers.resources.gpu` on GPU pods: each rank trains on "
            "a GPU of its own; lower ranksPerPod or request more GPUs per pod",
            holds=lambda w: w.ranks_per_pod is None or not w.resources.gpu or w.ranks_per_pod <= w.resources.gpu,
            field_path=".ranksPerPod",
        ),
        rules.Rule(
            cel="self.groups.all(g, !has(g.resources) || g.resources.gpu == 0 || "
            f"{rules.POD_RANKS_CEL} <= g.resources.gpu)",
            message="`workers.groups[].resources.gpu` must be at least the ranks per pod (`workers.ranksPerPod`, "
            "unset: `workers.resources.gpu`) on GPU pods: each rank trains on a GPU of its own; request more GPUs "
            "for the group or lower ranksPerPod",
            holds=lambda w: all(not g.resources or not g.resources.gpu or w.pod_ranks <= g.resources.gpu
                                for g in w.groups),
            field_path=".groups",
        ),
        rules.Rule(
            cel="size(self.groups) == 0 || self.groups.map(g, g.replicas).sum() == self.replicas",
            message="`workers.groups` replicas must add up to `workers.replicas`: change a group's replicas "
            "or workers.replicas so that the sums match",
            holds=lambda w: not w.groups or sum(g.replicas for g in w.groups) == w.replicas,
            field_path=".groups",
        ),
        rules.Rule(
            cel="self.groups.all(g, self.groups.exists_one(h, h.name == g.name))",
            message="`workers.groups` names must be unique: rename the repeated group",
            holds=lambda w: len({g.name for g in w.groups}) == len(w.groups),
            field_path=".groups",
        ),
    )


class OptimizerName(str, enum.Enum):
    SGD = "SGD"
    ADAM = "Adam"


class Optimizer(ApiModel):
    """optimizer applies aggregated gradients; on a parameter server it runs on the server."""

    name: OptimizerName = OptimizerName.SGD
    """name is SGD (with optional momentum) or Adam. Default SGD."""
    learning_rate: Annotated[base.Number, pydantic.Field(gt=0, le=10)] = 0.01
    """learningRate is the step size. Default 0.01."""
    momentum: Annotated[base.Number, pydantic.Field(ge=0, lt=1)] = 0.0
    """momentum is SGD's momentum factor, in [0, 1). Default 0 (plain SGD). Ignored by Adam."""
    weight_decay: Annotated[base.Number, pydantic.Field(ge=0, le=1)] = 0.0
    """weightDecay is L2 regularization. Default 0."""


class Evaluation(ApiModel):
    """evaluation measures the model on held-out data while it trains, for accuracy and time to accuracy."""

    every_iterations: Annotated[base.Integer, pydantic.Field(ge=1, le=10_000_000)]
    """everyIterations is K: after every K-th iteration (and after the last) the first worker evaluates the
    current global parameters on the held-out split (`data.heldOutPercent`, or CIFAR's test batch), recording
    eval/loss and eval/accuracy; its time is the iteration's time/eval. Required. Under ASP, SSP and DSSP the
    other workers do not wait for it; under BSP (and on a ring) they wait for the evaluating worker's next
    push, booked as their time/wait: keep K large enough that evaluation stays a small share of the time."""
    max_samples: Annotated[base.Integer, pydantic.Field(ge=1, le=10_000_000)] | None = None
    """maxSamples bounds each evaluation to the first maxSamples held-out samples (their order is seeded
    and fixed). Unset (default): the whole held-out split."""


class OnReached(str, enum.Enum):
    CONTINUE = "Continue"
    STOP = "Stop"


class Target(ApiModel):
    """target is the quality a trial is timed to: time and iterations to reach it go into the summary."""

    accuracy_percent: Annotated[base.Number, pydantic.Field(gt=0, le=100)] | None = None
    """accuracyPercent is reached when eval/accuracy is at least this, in percent (0, 100]. Exactly one of
    accuracyPercent and loss."""
    loss: Annotated[base.Number, pydantic.Field(gt=0, le=1_000_000)] | None = None
    """loss is reached when eval/loss is at most this (cross entropy, nats). Exactly one of accuracyPercent
    and loss."""
    on_reached: OnReached = OnReached.CONTINUE
    """onReached is Continue (default: run every iteration, the time to target is recorded) or Stop (the
    evaluating worker stops after the evaluation that reached the target and the others when they hear it, at
    their next exchange with a server or peer, without waiting for one another; a ring stops every worker at
    that iteration; the trial then has fewer iterations)."""

    rules = (
        rules.Rule(
            cel="has(self.accuracyPercent) != has(self.loss)",
            message="`model.target` must set exactly one of `accuracyPercent` and `loss`: keep the one the "
            "trial is timed to",
            holds=lambda t: (t.accuracy_percent is None) != (t.loss is None),
            field_path=".accuracyPercent",
        ),
    )


class ModelSpec(ApiModel):
    """model is what is trained, on what batch, for how long."""

    name: ModelName = "mlp"
    """name is a built-in model (mlp, cnn, resnet18, resnet50, vgg16, transformer) or the user's own
    as "package.module:factory", a callable returning a torch.nn.Module, importable in the image. Default mlp."""
    batch_size: Annotated[base.Integer, pydantic.Field(ge=1, le=65536)] = 32
    """batchSize is the per-worker minibatch, in samples. Default 32."""
    iterations: Annotated[base.Integer, pydantic.Field(ge=1, le=10_000_000)] = 100
    """iterations is the number of training iterations each worker runs. Default 100."""
    warmup_iterations: Annotated[base.Integer, pydantic.Field(ge=0, le=10_000_000)] = 5
    """warmupIterations are run first and left out of the summary timings; their records are kept, and in
    MLflow charted apart under `warmup/`. Default 5; must be less than `iterations`."""
    optimizer: Optimizer = Optimizer()
    """optimizer and its hyperparameters. Default SGD, learning rate 0.01."""
    evaluation: Evaluation | None = None
    """evaluation on held-out data every K iterations. Unset (default): none; needs real data (`data.format`
    other than Synthetic)."""
    target: Target | None = None
    """target accuracy or loss: time and iterations to reach it go into the summary, the status and MLflow,
    and onReached Stop ends training there. Unset (default): none; needs `evaluation`."""

    rules = (
        rules.Rule(
            cel="!has(self.target) || has(self.evaluation)",
            message="`model.target` needs `model.evaluation`: set evaluation.everyIterations, how often the "
            "target is checked",
            holds=lambda m: m.target is None or m.evaluation is not None,
            field_path=".target",
        ),
        rules.Rule(
            cel="self.warmupIterations < self.iterations",
            message="`model.warmupIterations` must be less than `model.iterations`: lower warmupIterations "
            "or raise iterations",
            holds=lambda m: m.warmup_iterations < m.iterations,
            field_path=".warmupIterations",
        ),
    )


class SyntheticData(ApiModel):
    """synthetic data: a fixed, seeded set of samples of the model's input shape, with learnable labels."""

    samples: Annotated[base.Integer, pydantic.Field(ge=1, le=10_000_000)] = 4096
    """samples is the size of the synthetic dataset; batches cycle through it. Default 4096."""
    num_classes: Annotated[base.Integer, pydantic.Field(ge=2, le=100_000)] = 10
    """numClasses is the number of label classes (vocabulary size for transformer). Default 10."""
    image_size: Annotated[base.Integer, pydantic.Field(ge=8, le=1024)] = 32
    """imageSize is the side of square RGB images, in pixels, for the convolutional models. Default 32."""
    sequence_length: Annotated[base.Integer, pydantic.Field(ge=2, le=8192)] = 64
    """sequenceLength is the number of tokens per sample, for transformer. Default 64."""
    seed: Annotated[base.Integer, pydantic.Field(ge=0, le=2**31 - 1)] = 0
    """seed makes the synthetic dataset, the order and split of real data, and the initial weights
    reproducible, whatever `data.format` is. Default 0."""


class DataFormat(str, enum.Enum):
    SYNTHETIC = "Synthetic"
    DIGITS = "Digits"
    CIFAR10 = "CIFAR10"
    CIFAR100 = "CIFAR100"
    IMAGE_FOLDER = "ImageFolder"
    FACTORY = "Factory"


FILE_FORMATS = (DataFormat.CIFAR10, DataFormat.CIFAR100, DataFormat.IMAGE_FOLDER)


class DataVolume(ApiModel):
    """volume is where a dataset's files live in a cluster: a claim mounted read-only into every pod."""

    claim_name: Annotated[str, pydantic.StringConstraints(pattern=SECRET_NAME_PATTERN, max_length=253)]
    """claimName of a PersistentVolumeClaim in the experiment's namespace, mounted read-only at /data in
    every pod of a trial (servers too: they build the model, whose shape the data decides). Pods on several
    nodes need a ReadOnlyMany (or ReadWriteMany) claim."""


class DataSpec(ApiModel):
    """data feeds the workers: synthetic (runs measure the system, not I/O), or a real dataset read from files.

    Real data is never downloaded: it ships in a package (Digits), or its files are on a volume. Each worker
    trains on its own shard, a disjoint slice of a seeded permutation, in an order reshuffled every epoch."""

    format: DataFormat = DataFormat.SYNTHETIC
    """format is Synthetic (default: `synthetic`), Digits (scikit-learn's 8x8 handwritten digits, 1797
    images in 10 classes, shipped inside the image), CIFAR10 or CIFAR100 (under `path`, the binary version's
    data_batch_1..5.bin and test_batch.bin, or train.bin and test.bin; or the Python version torchvision
    reads, data_batch_1..5 and test_batch, or train and test; the test files are the held-out split), ImageFolder
    (`path`/<class>/<image>, PNG or JPEG, one directory per class in sorted order, each image resized to the size of the
    first) or Factory (`factory`). Images are RGB; grey ones are repeated over three channels. Files are read within
    limits (an image at most 4096x4096 pixels, a worker's shard at most 512 MiB of pixels; docs/security.md)."""
    path: Annotated[str, pydantic.StringConstraints(pattern=DATA_PATH_PATTERN, max_length=1024)] | None = None
    """path is the dataset's directory, required for CIFAR10, CIFAR100 and ImageFolder. Relative: under the
    volume's root in a cluster (/data), and under `ringleader run --data-dir` (default: the current
    directory) locally, and must stay inside it: no `..` or symlink leading out. Absolute: used as it is
    (data baked into the image). A file whose path, symlinks resolved, leads out of that directory (or
    out of an absolute `path`) is refused."""
    volume: DataVolume | None = None
    """volume mounts a PersistentVolumeClaim read-only at /data in the pods. Unset (default): none; a
    relative `path` then needs one in a cluster. Ignored by `ringleader run`."""
    factory: Annotated[str, pydantic.StringConstraints(pattern=FACTORY_PATTERN, max_length=253)] | None = None
    """factory is "package.module:factory", a callable importable in the image returning the whole dataset:
    a pair (inputs, labels) of tensors, inputs (N, 3, H, W) floats or uint8 and labels (N,) integers.
    Required for Factory, ignored otherwise."""
    held_out_percent: Annotated[base.Integer, pydantic.Field(ge=1, le=50)] = 10
    """heldOutPercent of a real dataset is held out of training, for `model.evaluation`, where the format
    has no test split of its own (Digits, ImageFolder, Factory; CIFAR's test batch is its held-out split).
    Default 10."""
    synthetic: SyntheticData = SyntheticData()
    """synthetic data settings; its seed applies to every format."""

    rules = (
        rules.Rule(
            cel="!(self.format in ['CIFAR10', 'CIFAR100', 'ImageFolder']) || has(self.path)",
            message="`data.path` is required when `data.format` is CIFAR10, CIFAR100 or ImageFolder: set it to "
            "the dataset's directory",
            holds=lambda d: d.format not in FILE_FORMATS or d.path is not None,
            field_path=".path",
        ),
        rules.Rule(
            cel="self.format != 'Factory' || has(self.factory)",
            message="`data.factory` is required when `data.format` is Factory: set it to \"package.module:factory\"",
            holds=lambda d: d.format != DataFormat.FACTORY or d.factory is not None,
            field_path=".factory",
        ),
        rules.Rule(
            cel="!has(self.volume) || !has(self.path) || !self.path.startsWith('/')",
            message="`data.path` must be relative when `data.volume` is set: it is read under the volume's "
            "mount point, /data",
            holds=lambda d: d.volume is None or d.path is None or not d.path.startswith("/"),
            field_path=".path",
        ),
    )


class BandwidthEnforcement(str, enum.Enum):
    EMULATED = "Emulated"
    NETWORK = "Network"


class Network(ApiModel):
    """network shapes what workers see of the network, for what-if studies."""

    bandwidth: Bandwidth | None = None
    """bandwidth caps each rank's communication rate ("1Gbit", "10Gbit", "100Mbit"), as `enforcement`
    says. Unset (default): no cap."""
    enforcement: BandwidthEnforcement = BandwidthEnforcement.EMULATED
    """enforcement is who applies `bandwidth`. Emulated (default): the runtime, anywhere: a transfer of S
    bytes takes at least 8*S/bandwidth seconds (it sleeps the difference; latency and TCP are untouched).
    Network: the cluster's network, through the pod annotations kubernetes.io/ingress-bandwidth and
    kubernetes.io/egress-bandwidth, which a CNI chaining the bandwidth plugin turns into kernel traffic
    shaping of each pod's interface, both ways; on a CNI without it the annotations do nothing and the
    trial runs uncapped. Needs a cap (`bandwidth` or `sweep.matrix.bandwidth`); refused by `ringleader run`,
    whose local ranks share an unshaped loopback."""

    def bits_per_second(self) -> int | None:
        """The cap, whoever enforces it."""
        return None if self.bandwidth is None else parse_bandwidth(self.bandwidth)

    def emulated_bits_per_second(self) -> int | None:
        """The cap the runtime must emulate: None when the network enforces it (or there is none)."""
        return self.bits_per_second() if self.enforcement == BandwidthEnforcement.EMULATED else None

    def enforced_by(self) -> str:
        """What applied the cap, as records say it: Emulated, Network, or None without a cap."""
        return "None" if self.bandwidth is None else self.enforcement.value


class Compression(ApiModel):
    """compression shrinks what workers exchange: gradients (and a parameter server's weights) on the wire."""

    method: variants.CompressionMethod = variants.CompressionMethod.NONE
    """method is None (default: full-precision float32), FP16 or BF16 (each value sent as a 16-bit float; FP16 is
    scaled by a power of two so small gradients keep their precision), PowerSGD (each gradient matrix sent as two
    low-rank factors, `rank`) or TopK (the largest `ratio` of each bucket's values, with their indices).
    Every architecture takes None, FP16 and BF16 (ParameterServer and PeerToPeer compress pushes and replies);
    PowerSGD and TopK need RingAllReduce."""
    rank: Annotated[base.Integer, pydantic.Field(ge=1, le=64)] = 2
    """rank is PowerSGD's approximation rank r: a gradient of n x m values is sent as (n + m) * r values; tensors
    that would not shrink by at least half that way (biases, small layers) are sent whole. Default 2. Ignored by
    the other methods."""
    ratio: Annotated[base.Number, pydantic.Field(gt=0, le=1)] = 0.01
    """ratio is the fraction of each bucket's values TopK sends (the largest in magnitude, each with its index),
    in (0, 1]. Default 0.01. Ignored by the other methods."""
    error_feedback: base.Boolean = True
    """errorFeedback keeps what PowerSGD or TopK left out of a gradient and adds it to the next one, so nothing is
    lost, only delayed. Default true. Ignored by None, FP16 and BF16."""

    def compressing(self) -> bool:
        return self.method != variants.CompressionMethod.NONE


class SecretReference(ApiModel):
    """A Secret in the experiment's namespace."""

    name: Annotated[str, pydantic.StringConstraints(pattern=SECRET_NAME_PATTERN, max_length=253)]
    """name of the Secret."""


class Tracking(ApiModel):
    """tracking says where timings go: an MLflow tracking server."""

    uri: Annotated[str, pydantic.StringConstraints(max_length=2048)] | None = None
    """uri of the MLflow tracking server ("http://mlflow.ringleader:5000"), without credentials. Default: the
    operator's configured server in a cluster (another server only if the operator's admin allows it);
    `sqlite:///mlflow.db` (or $MLFLOW_TRACKING_URI) for `ringleader run`."""
    experiment_name: Annotated[str, pydantic.StringConstraints(min_length=1, max_length=256)] | None = None
    """experimentName is the MLflow experiment that holds this experiment's runs. Default: the
    namespace and name of the DistributedTrainingExperiment ("default/quickstart")."""
    credentials_secret: SecretReference | None = None
    """credentialsSecret names a Secret whose keys (MLFLOW_TRACKING_USERNAME, MLFLOW_TRACKING_PASSWORD or
    MLFLOW_TRACKING_TOKEN) are given to the pods as environment variables; never copied into specs or logs.
    The operator's own credentials never reach the pods, nor any server but the operator's."""
    records_wait_seconds: Annotated[base.Integer, pydantic.Field(ge=0, le=base.MAX_SECONDS)] = 900
    """recordsWaitSeconds is how long, in seconds, a rank in a pod that finished training keeps its pod and keeps
    trying while MLflow has not taken all its records (the server away, or the trial's run not made yet).
    Default 900 (15 minutes: a tracking server's restart, a node drain). Meanwhile the trial stays Running, reason
    RecordsPending, and no report is made; past it the rank prints its unpublished records into its pod's log
    and fails, reason RecordsIncomplete (`ringleader publish --from-log` publishes them later). 0: no wait. Pods
    only: `ringleader run` publishes after each trial and keeps what MLflow did not take on disk."""

    rules = (
        rules.Rule(
            cel=f"!has(self.uri) || !self.uri.matches({json.dumps(uris.CREDENTIALS_PATTERN)})",
            message="`tracking.uri` must not carry credentials (user:password@ or a password, token or key "
            "parameter): put them in a Secret named by `tracking.credentialsSecret`",
            holds=lambda t: t.uri is None or not uris.carries_credentials(t.uri),
            field_path=".uri",
        ),
    )


class CleanPodPolicy(str, enum.Enum):
    NONE = "None"
    RUNNING = "Running"
    ALL = "All"


class RunPolicy(ApiModel):
    """runPolicy governs retries, deadlines, clean-up and suspension."""

    backoff_limit: Annotated[base.Integer, pydantic.Field(ge=0, le=100)] = 3
    """backoffLimit is how many times a trial is restarted (all its pods) after a pod fails, before the
    trial fails. Default 3; 0 fails at the first pod failure."""
    active_deadline_seconds: Annotated[base.Integer, pydantic.Field(ge=1, le=base.MAX_SECONDS)] | None = None
    """activeDeadlineSeconds bounds each trial's running time, in seconds, from its start; past it the
    trial fails with reason DeadlineExceeded. At most 2147483647 (68 years). Unset (default): no deadline."""
    startup_deadline_seconds: Annotated[base.Integer, pydantic.Field(ge=1, le=base.MAX_SECONDS)] | None = None
    """startupDeadlineSeconds bounds how long each pod of a trial may take from its creation until it runs, in
    seconds; past it, a pod still not running (an image that cannot be pulled, a missing Secret or claim, a
    request no node fits) fails the trial with reason StartupDeadlineExceeded, naming the pod and the cause,
    without a restart. Waiting for Kueue admission does not count (no pod exists then). At most 2147483647.
    Unset (default): the operator's --startup-deadline (300 unless the chart's operator.startupDeadlineSeconds
    says otherwise)."""
    ttl_seconds_after_finished: Annotated[base.Integer, pydantic.Field(ge=0, le=base.MAX_SECONDS)] | None = None
    """ttlSecondsAfterFinished deletes the finished experiment this many seconds after it completes,
    at most 2147483647 (68 years). Unset (default): kept until deleted."""
    clean_pod_policy: CleanPodPolicy = CleanPodPolicy.RUNNING
    """cleanPodPolicy says which pods are deleted when a trial ends: None (keep all, for logs), Running
    (delete those still running, such as parameter servers; default) or All."""
    suspend: base.Boolean = False
    """suspend stops the experiment: running trials' pods are deleted and the trials restart from the
    beginning when suspend is set back to false. Default false."""


class TolerationOperator(str, enum.Enum):
    EXISTS = "Exists"
    EQUAL = "Equal"


class TaintEffect(str, enum.Enum):
    NO_SCHEDULE = "NoSchedule"
    PREFER_NO_SCHEDULE = "PreferNoSchedule"
    NO_EXECUTE = "NoExecute"


class Toleration(ApiModel):
    """A toleration of a node taint, as in a pod spec."""

    key: labels.label_key("scheduling.tolerations[].key") | None = None
    """key of the taint, a label key; unset with operator Exists tolerates every taint."""
    operator: TolerationOperator = TolerationOperator.EQUAL
    """operator is Equal (default) or Exists."""
    value: labels.LabelValue | None = None
    """value of the taint, a label value, for operator Equal."""
    effect: TaintEffect | None = None
    """effect to tolerate; unset tolerates every effect."""
    toleration_seconds: Annotated[base.Integer, pydantic.Field(ge=0, le=base.MAX_SECONDS)] | None = None
    """tolerationSeconds bounds how long a NoExecute taint is tolerated, in seconds, at most 2147483647."""

    rules = (
        rules.Rule(
            cel="self.operator != 'Exists' || !has(self.value)",
            message="`value` must be empty when a toleration's `operator` is Exists: remove value or use Equal",
            holds=lambda t: t.operator != TolerationOperator.EXISTS or t.value is None,
            field_path=".value",
        ),
    )


class Gang(str, enum.Enum):
    OPERATOR = "Operator"
    VOLCANO = "Volcano"
    SCHEDULER_PLUGINS = "SchedulerPlugins"


class PlacementRanks(str, enum.Enum):
    ANY = "Any"
    SPREAD = "Spread"
    PACK = "Pack"


class PlacementServers(str, enum.Enum):
    ANY = "Any"
    APART = "Apart"


class PlacementMode(str, enum.Enum):
    REQUIRED = "Required"
    PREFERRED = "Preferred"


HOSTNAME_TOPOLOGY_KEY = "kubernetes.io/hostname"


class Placement(ApiModel):
    """placement says where a trial's ranks run relative to each other, so it is part of what a trial
    measures: ranks that share a node exchange over a bridge, ranks on different nodes over their NICs.
    Rendered as pod (anti-)affinity over the trial's own pods; with `scheduling.queueName`, Pack also
    reaches Kueue as its topology request. A sweep axis (`sweep.matrix.placement`)."""

    ranks: PlacementRanks = PlacementRanks.ANY
    """ranks: Any (default: wherever the scheduler puts them), Spread (each rank, workers and parameter
    servers, on its own topology domain: more ranks than domains cannot all start) or Pack (on as few
    domains as possible: with servers Apart, the workers together and the servers together)."""
    servers: PlacementServers = PlacementServers.ANY
    """servers: Any (default) or Apart (ParameterServer only: no worker on a domain that holds one of the
    trial's parameter servers, so a server's fan-in crosses the network)."""
    topology_key: labels.label_key("scheduling.placement.topologyKey") = HOSTNAME_TOPOLOGY_KEY
    """topologyKey is the node label whose values are the domains: kubernetes.io/hostname (default: one
    domain per node), or a zone or rack label. A node without the label is no domain: Spread and Pack
    pods cannot run there."""
    mode: PlacementMode = PlacementMode.REQUIRED
    """mode: Required (default: a pod waits rather than break the placement; a trial that cannot be placed
    fails at `runPolicy.startupDeadlineSeconds` with reason PlacementUnsatisfiable) or Preferred (the
    scheduler tries, and places the pod anyway; the placement recorded per rank says what it got)."""

    def is_any(self) -> bool:
        """No constraint: the pods render as they did before placement existed."""
        return self.ranks == PlacementRanks.ANY and self.servers == PlacementServers.ANY

    def label(self) -> str:
        """The placement in a few words, for trial parameters, run names and tables ("Spread", "servers Apart",
        "Pack, servers Apart, Preferred by topology.kubernetes.io/zone")."""
        if self.is_any():
            return PlacementRanks.ANY.value
        parts = [self.ranks.value] if self.ranks != PlacementRanks.ANY else []
        if self.servers == PlacementServers.APART:
            parts.append("servers Apart")
        if self.mode == PlacementMode.PREFERRED:
            parts.append("Preferred")
        text = ", ".join(parts)
        return text if self.topology_key == HOSTNAME_TOPOLOGY_KEY else f"{text} by {self.topology_key}"


def _without_default(schema: dict) -> None:
    """No default in the CRD: an experiment without placement stays without it on the server, as in a dump."""
    schema.pop("default", None)


class Scheduling(ApiModel):
    """scheduling places the pods and keeps a trial from half-running."""

    gang: Gang = Gang.OPERATOR
    """gang says who starts a trial's pods together. Operator (default): no rank trains before all have
    joined, and the trial is Running only once every pod runs; the operator creates the pods only once all fit
    the nodes' free capacity together (where it may read nodes: its cluster-wide install), but the scheduler
    still binds them one by one. Volcano or SchedulerPlugins (coscheduling): a
    PodGroup (minMember = all pods of the trial) makes that gang scheduler bind all the pods or none;
    the operator must be installed with PodGroups enabled."""
    scheduler_name: labels.DnsSubdomain | None = None
    """schedulerName of the pods, a DNS subdomain. Default: the cluster's default scheduler; "volcano" when
    gang is Volcano, and the operator's scheduler-plugins scheduler name ("scheduler-plugins-scheduler" unless
    configured) when gang is SchedulerPlugins."""
    priority_class_name: labels.DnsSubdomain | None = None
    """priorityClassName of the pods: the name of a PriorityClass, a DNS subdomain."""
    node_selector: labels.label_map("scheduling.nodeSelector", MAX_NODE_SELECTOR_LABELS) = {}
    """nodeSelector of every pod of the experiment: label keys and values, as in a pod's nodeSelector."""
    tolerations: Annotated[list[Toleration], pydantic.Field(max_length=32)] = []
    """tolerations of every pod of the experiment (GPU taints, dedicated nodes)."""
    queue_name: Annotated[str, pydantic.StringConstraints(pattern=QUEUE_NAME_PATTERN, max_length=63)] | None = None
    """queueName of the Kueue LocalQueue, in the experiment's namespace, that admits each trial. Unset
    (default): trials start as soon as `sweep.maxParallel` allows. Set: each trial is one Kueue Workload
    whose pod sets are all its pods (each role's count and resource requests); none of its pods exists until
    Kueue admits the whole Workload within its ClusterQueue's quota, and the quota is released when the
    trial ends. The operator must be installed with Kueue enabled."""
    placement: Annotated[Placement, pydantic.Field(json_schema_extra=_without_default)] = Placement()
    """placement of the trial's ranks relative to each other: spread, packed, servers apart. Default: Any
    (no constraint). Does not apply to `ringleader run`, where every rank shares one machine."""

    @pydantic.model_serializer(mode="wrap")
    def _without_any_placement(self, handler: pydantic.SerializerFunctionWrapHandler) -> dict:
        """Placement Any is left out of a dumped spec, so a trial without placement is the same document
        (ConfigMap, MLflow params, rendered objects) as before placement existed."""
        document = handler(self)
        if self.placement.is_any():
            document.pop("placement", None)
        return document


def _axis(item, max_items: int = 16):
    return Annotated[list[item], pydantic.Field(min_length=1, max_length=max_items)] | None


class SweepMatrix(ApiModel):
    """matrix lists values per field; the trials are every combination (the cartesian product).

    Skipped, and reported as skipped: a BSP-only architecture (RingAllReduce, HierarchicalRingAllReduce,
    ParameterServerPodAggregation) with another paradigm, a compression method the architecture does not take
    (PowerSGD or TopK without RingAllReduce), and combinations that would repeat another trial (parameterServers
    values beyond the first for an architecture without servers, staleness values beyond the first for BSP and ASP)."""

    architecture: _axis(variants.Architecture, len(variants.Architecture)) = None
    """architecture values to sweep; replaces `architecture`."""
    paradigm: _axis(variants.Paradigm, len(variants.Paradigm)) = None
    """paradigm values to sweep; replaces `sync.paradigm`."""
    workers: _axis(Annotated[base.Integer, pydantic.Field(ge=1, le=1024)]) = None
    """workers values (worker counts) to sweep; replaces `workers.replicas`. Cannot be combined with
    `workers.groups`."""
    parameter_servers: _axis(Annotated[base.Integer, pydantic.Field(ge=1, le=64)]) = None
    """parameterServers values (server counts) to sweep; replaces `parameterServers.replicas`."""
    staleness: _axis(Annotated[base.Integer, pydantic.Field(ge=0, le=1000)]) = None
    """staleness values to sweep; replaces `sync.staleness`."""
    batch_size: _axis(Annotated[base.Integer, pydantic.Field(ge=1, le=65536)]) = None
    """batchSize values to sweep; replaces `model.batchSize`."""
    model: _axis(ModelName) = None
    """model names to sweep; replaces `model.name`."""
    bandwidth: _axis(Bandwidth) = None
    """bandwidth caps to sweep; replaces `network.bandwidth`."""
    compression: _axis(variants.CompressionMethod, 5) = None
    """compression methods to sweep; replaces `compression.method`."""
    placement: _axis(Placement, 8) = None
    """placement values to sweep (e.g. [{ranks: Spread}, {ranks: Pack}]); replaces `scheduling.placement`.
    Combinations of servers Apart with an architecture other than ParameterServer are skipped."""

    def axes(self) -> dict[str, list]:
        """The swept fields (wire names) with their values, in declaration order: the order of trials."""
        return {
            self.wire_name(name): list(getattr(self, name))
            for name in type(self).model_fields
            if getattr(self, name) is not None
        }


class Sweep(ApiModel):
    """sweep runs one trial per combination of the matrix, each `repetitions` times."""

    matrix: SweepMatrix = SweepMatrix()
    """matrix of values to combine. Empty: the experiment's own spec, repeated."""
    repetitions: Annotated[base.Integer, pydantic.Field(ge=1, le=100)] = 1
    """repetitions runs every combination this many times, for error bars. Default 1."""
    max_parallel: Annotated[base.Integer, pydantic.Field(ge=1, le=64)] = 1
    """maxParallel is how many trials run at once. Default 1, so trials do not disturb each other's timings."""

    rules = (
        rules.Rule(
            cel=" * ".join(rules.axis_size(SweepMatrix.wire_name(name)) for name in SweepMatrix.model_fields)
            + f" * self.repetitions <= {MAX_TRIALS}",
            message=f"`sweep` must expand to at most {MAX_TRIALS} trials (values per axis multiplied, times "
            "repetitions): drop values from the matrix or lower repetitions",
            holds=lambda s: s.trial_count() <= MAX_TRIALS,
            field_path=".matrix",
        ),
    )

    def trial_count(self) -> int:
        count = self.repetitions
        for values in self.matrix.axes().values():
            count *= len(values)
        return count


class Profiling(ApiModel):
    """profiling records a window of iterations of every rank with PyTorch's profiler: operators on the CPU,
    and on a GPU its kernels, copies and NCCL collectives, as a trace Perfetto and Holistic Trace Analysis
    open, beside ringleader's own trace. The profiler slows what it records: profiled iterations are
    recorded as warm-up, left out of the summary timings."""

    iterations: Annotated[base.Integer, pydantic.Field(ge=1, le=100)] = 3
    """iterations profiled, from startIteration (fewer when training ends first). Default 3."""
    start_iteration: Annotated[base.Integer, pydantic.Field(ge=0, le=10_000_000)] | None = None
    """startIteration is the first profiled iteration, counted from 0. Default: the first after warm-up."""


class ExperimentSpec(ApiModel):
    """spec of a DistributedTrainingExperiment: one topology, or a sweep of them."""

    architecture: variants.Architecture = variants.Architecture.PARAMETER_SERVER
    """architecture is ParameterServer (servers hold parameter shards; workers pull, compute, push),
    PeerToPeer (every worker is also the server of a 1/N shard) or RingAllReduce (workers allreduce
    gradients, overlapping backward and communication; BSP only). Default ParameterServer."""
    sync: SyncSpec = SyncSpec()
    """sync is the synchronization paradigm. Default BSP."""
    parameter_servers: ParameterServers = ParameterServers()
    """parameterServers of a ParameterServer job. Default one server."""
    workers: Workers = Workers()
    """workers of the job. Default two homogeneous workers."""
    model: ModelSpec = ModelSpec()
    """model, batch size, iterations and optimizer. Default mlp, batch 32, 100 iterations, SGD."""
    data: DataSpec = DataSpec()
    """data the workers train on: synthetic (default), or a real dataset from a package, a volume or a factory."""
    network: Network = Network()
    """network shaping for what-if studies: a bandwidth cap, emulated or enforced by the network. Default: none."""
    compression: Compression = Compression()
    """compression of what workers exchange: FP16, BF16, PowerSGD or TopK. Default: none."""
    image: Annotated[str, pydantic.StringConstraints(pattern=IMAGE_PATTERN, max_length=512)] | None = None
    """image of the training pods. Default: the operator's configured worker image."""
    tracking: Tracking = Tracking()
    """tracking is where timings are recorded (MLflow)."""
    profiling: Profiling | None = None
    """profiling turns on PyTorch's profiler for a window of iterations per rank. Unset (default): off."""
    run_policy: RunPolicy = RunPolicy()
    """runPolicy: retries, deadline, clean-up, suspension."""
    scheduling: Scheduling = Scheduling()
    """scheduling: gang semantics, scheduler, priority, placement."""
    sweep: Sweep | None = None
    """sweep turns the experiment into several trials. Unset (default): a single trial."""

    rules = (
        *(rules.paradigm_rule(architecture) for architecture in variants.COLLECTIVES),
        rules.staleness_rule(),
        rules.max_staleness_rule(),
        rules.Rule(
            cel=f"!{rules.swept_cel('staleness')} || !has(self.sync.maxStaleness) || "
            "self.sweep.matrix.staleness.all(v, v < self.sync.maxStaleness)",
            message="`sweep.matrix.staleness` values must be less than `sync.maxStaleness`: drop the larger "
            "values or raise maxStaleness",
            holds=lambda s: not rules.swept(s, "staleness")
            or s.sync.max_staleness is None
            or all(v < s.sync.max_staleness for v in s.sweep.matrix.staleness),
            field_path=".sweep.matrix.staleness",
        ),
        rules.Rule(
            cel=f"!has(self.scheduling.queueName) || size(self.workers.groups) <= {MAX_QUEUED_WORKER_GROUPS}",
            message=f"`workers.groups` can have at most {MAX_QUEUED_WORKER_GROUPS} groups when `scheduling.queueName` "
            "is set: a Kueue Workload holds at most 8 pod sets, one per group plus one for the parameter servers; "
            "merge groups or remove queueName",
            holds=lambda s: s.scheduling.queue_name is None or len(s.workers.groups) <= MAX_QUEUED_WORKER_GROUPS,
            field_path=".workers.groups",
        ),
        rules.Rule(
            cel="!has(self.network) || !has(self.network.enforcement) || self.network.enforcement != 'Network' || "
            f"has(self.network.bandwidth) || {rules.swept_cel('bandwidth')}",
            message="`network.enforcement` Network needs a cap: set `network.bandwidth` (e.g. \"100Mbit\") or "
            "sweep `sweep.matrix.bandwidth`, or drop `network.enforcement`",
            holds=lambda s: s.network.enforcement != BandwidthEnforcement.NETWORK
            or s.network.bandwidth is not None
            or rules.swept(s, "bandwidth"),
            field_path=".network.enforcement",
        ),
        rules.Rule(
            cel=f"!{rules.swept_cel('workers')} || size(self.workers.groups) == 0",
            message="`sweep.matrix.workers` cannot be combined with `workers.groups`: sweep without groups, or "
            "write one experiment per group layout",
            holds=lambda s: not rules.swept(s, "workers") or not s.workers.groups,
            field_path=".sweep.matrix.workers",
        ),
        rules.sweep_runs_rule(),
        rules.compression_rule(),
        rules.servers_apart_rule(),
        rules.Rule(
            cel="!has(self.model.evaluation) || self.data.format != 'Synthetic'",
            message="`model.evaluation` needs real data: set `data.format` to Digits, CIFAR10, CIFAR100, "
            "ImageFolder or Factory (synthetic data has no held-out split to measure accuracy on)",
            holds=lambda s: s.model.evaluation is None or s.data.format != DataFormat.SYNTHETIC,
            field_path=".model.evaluation",
        ),
    )

_BANDWIDTH_UNITS = {"Kbit": 10**3, "Mbit": 10**6, "Gbit": 10**9, "Tbit": 10**12}


def parse_bandwidth(text: str) -> int:
    """'10Gbit' -> 10_000_000_000 bits per second."""
    match = re.fullmatch(BANDWIDTH_PATTERN, text)
    if match is None:
        raise ValueError(f"bandwidth {text!r} must look like 100Mbit, 1Gbit or 10Gbit")
    unit = match.group(1)
    return int(text[: -len(unit)]) * _BANDWIDTH_UNITS[unit]
