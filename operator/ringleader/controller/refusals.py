"""Why an experiment cannot run on this operator as installed (a feature it was installed without, a tracking
server it may not call); pure, used by `reconciler` before it observes anything."""

from __future__ import annotations

from ringleader.api.spec import Gang
from ringleader.api.trial import Expansion
from ringleader.controller import reasons
from ringleader.controller.settings import PodSettings


def refusal_condition(experiment, expansion: Expansion, pods: PodSettings,
                      tracking_refusal: str | None) -> tuple[str, str] | None:
    """(reason, message) of the first refusal, or None when the experiment may run. `tracking_refusal` is the
    recorder's word on the experiment's `tracking.uri`."""
    if not pods.pod_groups and any(t.spec.scheduling.gang != Gang.OPERATOR for t in expansion.trials):
        return reasons.PODGROUPS_DISABLED, (
            "`scheduling.gang` Volcano or SchedulerPlugins needs PodGroups, which this operator was installed "
            "without: install the chart with podGroups.enabled=true (and a gang scheduler), or set gang to Operator")
    if experiment.spec.scheduling.queue_name and not pods.kueue:
        return reasons.KUEUE_DISABLED, (
            "`scheduling.queueName` needs Kueue Workloads, which this operator was installed without: "
            "install the chart with kueue.enabled=true (and Kueue), or remove queueName")
    if tracking_refusal is not None:
        # Failing is better than running unrecorded: the pods could not record without the runs the operator opens.
        return reasons.TRACKING_URI_NOT_ALLOWED, tracking_refusal
    return None
