"""Which pods of a finished trial to delete under cleanPodPolicy; used by `trials` at a trial's end and at every pass
after it (idempotent, so a clean-up an operator restart interrupted completes). Pure."""

from __future__ import annotations

from ringleader.api import constants
from ringleader.api.spec import CleanPodPolicy
from ringleader.controller import pods as pods_


def pods_to_delete(pods: list[pods_.Pod], policy: CleanPodPolicy, *, workers_done: bool,
                   stop_running: bool) -> tuple[str, ...]:
    """Pods of a finished trial to delete under cleanPodPolicy.

    Parameter servers are stopped once the workers are done whatever the policy: nothing is left for them
    to serve. `stop_running` (a deadline) stops every running pod, as a Job's deadline does."""
    # Terminating pods are going already; a pod whose log holds records MLflow lacks is kept.
    live = [p for p in pods if not pods_.is_terminating(p) and not pods_.holds_records(p)]
    if policy == CleanPodPolicy.ALL:
        chosen = live
    else:
        # A pod whose container has exited is finished even before the kubelet marks its phase: keep it for its logs.
        running = [p for p in live if not pods_.is_finished(p) and pods_.failure_of(p) is None]
        if policy == CleanPodPolicy.RUNNING or stop_running:
            chosen = running
        elif workers_done:
            chosen = [p for p in running if pods_.role(p) == constants.ROLE_PS]
        else:
            chosen = []
    return tuple(sorted(pods_.name(p) for p in chosen))
