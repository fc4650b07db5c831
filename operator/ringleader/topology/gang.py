"""The PodGroup that makes a gang scheduler start a trial's pods all together; rendering.py calls it."""

from __future__ import annotations

import dataclasses

from ringleader.api.spec import Gang
from ringleader.api.trial import Trial
from ringleader.topology import names
from ringleader.topology.settings import RenderSettings

VOLCANO_API_VERSION = "scheduling.volcano.sh/v1beta1"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
SCHEDULER_PLUGINS_API_VERSION = "scheduling.x-k8s.io/v1alpha1"
SCHEDULER_PLUGINS_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


@dataclasses.dataclass(frozen=True)
class PodGroup:
    """A PodGroup object and how each pod joins it (Volcano reads an annotation, coscheduling a label)."""

    api_version: str
    name: str
    min_member: int
    pod_labels: dict[str, str]
    pod_annotations: dict[str, str]
    scheduler_name: str


def pod_group(trial: Trial, pod_count: int, settings: RenderSettings) -> PodGroup | None:
    """The trial's PodGroup, with minMember = every pod (`pod_count`, not ranks: a pod may run several), or None
    when `scheduling.gang` is Operator."""
    scheduling = trial.spec.scheduling
    name = names.pod_group(trial)
    if scheduling.gang == Gang.VOLCANO:
        return PodGroup(VOLCANO_API_VERSION, name, pod_count, {}, {VOLCANO_GROUP_ANNOTATION: name},
                        scheduling.scheduler_name or settings.volcano_scheduler_name)
    if scheduling.gang == Gang.SCHEDULER_PLUGINS:
        return PodGroup(SCHEDULER_PLUGINS_API_VERSION, name, pod_count, {SCHEDULER_PLUGINS_GROUP_LABEL: name}, {},
                        scheduling.scheduler_name or settings.scheduler_plugins_scheduler_name)
    return None
