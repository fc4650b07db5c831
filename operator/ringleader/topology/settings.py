"""The defaults rendering fills in where an experiment says nothing; the operator and `ringleader render` set them."""

from __future__ import annotations

import dataclasses
import pathlib

import ringleader


@dataclasses.dataclass(frozen=True)
class RenderSettings:
    """Cluster-wide choices an experiment does not make itself; one object, set once at startup."""

    image: str = f"ringleader:{ringleader.__version__}"
    """image of the training pods when `spec.image` is unset. The project's own image ships the runtime,
    so its version tracks the package's; the operator passes the image it was deployed with."""
    image_pull_policy: str = "IfNotPresent"
    """imagePullPolicy of the training pods. IfNotPresent: images imported straight into the nodes'
    container runtime (no registry) still start; use Always with a mutable tag in a registry."""
    gpu_resource_name: str = "nvidia.com/gpu"
    """The extended resource a pod requests for `resources.gpu`: NVIDIA's device plugin's name by default;
    "amd.com/gpu" for AMD's."""
    default_tracking_uri: str | None = None
    """MLFLOW_TRACKING_URI of pods whose experiment sets no `tracking.uri` (the in-cluster MLflow server of
    the Helm chart, say). None: pods get no URI and record under their output directory only."""
    templates_dir: pathlib.Path | None = None
    """A directory of templates replacing the packaged ones (same file names), for sites that must change
    pod shapes. None: the templates shipped in the package."""
    service_account_name: str | None = None
    """serviceAccountName of the training pods. None: the namespace's default account. Pods never talk to
    the API server, so no token is mounted either way."""
    run_as_user: int = 1000
    """UID and GID the training container runs as (and fsGroup of its volumes): the non-root user of the
    project's image."""
    shared_memory_limit: str = "1Gi"
    """Size of the memory-backed /dev/shm of GPU ring-allreduce pods, a quantity. NCCL keeps its proxy
    buffers there and fails with a container runtime's default 64Mi; counts against the memory limit."""
    scratch_limit: str = "1Gi"
    """Local disk a training pod may use, a quantity: the size limit of its /tmp emptyDir (records, traces,
    scratch files; the root filesystem is read-only) and its ephemeral-storage request and limit, which also
    cover its logs. A trial's records take kilobytes per hundred iterations and traces a few megabytes, so
    1Gi is ample; the bound keeps a runaway model factory from filling the node's disk and evicting others."""
    volcano_scheduler_name: str = "volcano"
    """schedulerName of pods in a Volcano PodGroup, unless `scheduling.schedulerName` says otherwise:
    the name Volcano's own chart installs."""
    scheduler_plugins_scheduler_name: str = "scheduler-plugins-scheduler"
    """schedulerName of pods in a scheduler-plugins (coscheduling) PodGroup, unless
    `scheduling.schedulerName` says otherwise: the second scheduler scheduler-plugins' chart installs."""
