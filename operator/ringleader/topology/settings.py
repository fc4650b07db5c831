"""The defaults rendering fills in where an experiment says nothing, and the one set of flags that sets them.

The operator (`ringleader operator`, whose flags also read RINGLEADER_* variables) and
`ringleader render` declare the same flags through `add_arguments`, so a render with the operator's
flags prints exactly the objects the operator creates.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
from typing import Any, Mapping

import ringleader

DEFAULT_IMAGE = f"localhost/ringleader/ringleader:{ringleader.__version__}"
PULL_POLICIES = ("Always", "IfNotPresent", "Never")


@dataclasses.dataclass(frozen=True)
class RenderSettings:
    """Cluster-wide choices an experiment does not make itself; one object, set once at startup."""

    image: str = DEFAULT_IMAGE
    """image of the training pods when `spec.image` is unset. The project's own image ships the runtime,
    so its version tracks the package's; the chart passes the image the operator was deployed with."""
    image_pull_policy: str = "IfNotPresent"
    """imagePullPolicy of the training pods. IfNotPresent: images imported straight into the nodes'
    container runtime (no registry) still start; use Always with a mutable tag in a registry."""
    gpu_resource_name: str = "nvidia.com/gpu"
    """The extended resource a pod requests for `resources.gpu`: NVIDIA's device plugin's name by default;
    "amd.com/gpu" for AMD's."""
    gpu_tolerations: tuple[dict[str, Any], ...] = ()
    """Tolerations of pods that request GPUs, after the experiment's own, so they land on tainted GPU nodes:
    a property of the cluster, not of the experiment. None by default: untainted clusters need none."""
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


def _tolerations(text: str) -> tuple[dict[str, Any], ...]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"--gpu-tolerations must be a JSON list of tolerations: {error}") from None
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise argparse.ArgumentTypeError("--gpu-tolerations must be a JSON list of toleration objects")
    return tuple(value)


def add_arguments(parser: argparse.ArgumentParser, environ: Mapping[str, str] | None = None) -> None:
    """Declare the render flags; with `environ` (the operator's), each defaults to its RINGLEADER_* variable
    there, then to RenderSettings'."""
    defaults = RenderSettings()

    def flag(name: str, variable: str, help_text: str, default: Any, **options: Any) -> None:
        value = (environ or {}).get(f"RINGLEADER_{variable}") or None
        kind = options.get("type")
        where = f"RINGLEADER_{variable}; " if environ is not None else ""
        parser.add_argument(*name.split("|"), default=(kind(value) if kind else value) if value else default,
                            help=f"{help_text} ({where}default: {default})", **options)

    flag("--default-image|--image", "DEFAULT_IMAGE", "image of training pods whose experiment sets none",
         defaults.image)
    flag("--image-pull-policy", "IMAGE_PULL_POLICY", "imagePullPolicy of training pods", defaults.image_pull_policy,
         choices=PULL_POLICIES)
    flag("--gpu-resource-name", "GPU_RESOURCE_NAME", "extended resource requested for GPUs",
         defaults.gpu_resource_name)
    flag("--gpu-tolerations", "GPU_TOLERATIONS", "JSON list of tolerations added to pods that request GPUs",
         defaults.gpu_tolerations, type=_tolerations)
    flag("--pod-scratch-limit", "POD_SCRATCH_LIMIT", "local disk of each training pod: /tmp sizeLimit and "
         "ephemeral-storage", defaults.scratch_limit)
    flag("--pod-shm-limit", "POD_SHM_LIMIT", "memory-backed /dev/shm of GPU ring-allreduce pods",
         defaults.shared_memory_limit)
    flag("--pod-service-account", "POD_SERVICE_ACCOUNT", "serviceAccountName of training pods",
         defaults.service_account_name)
    flag("--pod-run-as-user", "POD_RUN_AS_USER", "UID and GID of the training container", defaults.run_as_user,
         type=int)
    flag("--templates-dir", "TEMPLATES_DIR", "directory of templates replacing the packaged ones",
         defaults.templates_dir, type=pathlib.Path)
    flag("--volcano-scheduler-name", "VOLCANO_SCHEDULER_NAME", "schedulerName of Volcano-ganged pods",
         defaults.volcano_scheduler_name)
    flag("--scheduler-plugins-scheduler-name", "SCHEDULER_PLUGINS_SCHEDULER_NAME",
         "schedulerName of SchedulerPlugins-ganged pods", defaults.scheduler_plugins_scheduler_name)


def from_args(args: argparse.Namespace, default_tracking_uri: str | None) -> RenderSettings:
    return RenderSettings(
        image=args.default_image, image_pull_policy=args.image_pull_policy, gpu_resource_name=args.gpu_resource_name,
        gpu_tolerations=tuple(args.gpu_tolerations), default_tracking_uri=default_tracking_uri,
        templates_dir=args.templates_dir, service_account_name=args.pod_service_account or None,
        run_as_user=args.pod_run_as_user, shared_memory_limit=args.pod_shm_limit, scratch_limit=args.pod_scratch_limit,
        volcano_scheduler_name=args.volcano_scheduler_name,
        scheduler_plugins_scheduler_name=args.scheduler_plugins_scheduler_name,
    )
