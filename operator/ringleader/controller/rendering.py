"""A trial's objects as the operator creates them: topology.render with the operator's settings, owner references.

Also the cheap questions asked at every reconcile (which pods a trial should have, which label
selects an experiment's pods), answered from topology's naming rules without rendering templates.
"""

from __future__ import annotations

from typing import Any

import kopf

from ringleader import topology
from ringleader.api import constants
from ringleader.api.trial import Trial
from ringleader.controller import capacity, recording
from ringleader.controller.settings import Settings
from ringleader.controller import trials
from ringleader.topology import names
from ringleader.topology import workload as topology_workload


def pod_selector(experiment_name: str) -> str:
    return f"{constants.LABEL_EXPERIMENT}={names.label_value(experiment_name)}"


def expected_pods(trial: Trial) -> tuple[trials.ExpectedPod, ...]:
    """One per pod of the trial (a worker pod may run several ranks), by its first rank."""
    return tuple(trials.ExpectedPod(names.pod(trial, ranks[0]), ranks[0].role, ranks[0].rank, len(ranks))
                 for ranks in trial.pods())


def objects(trial: Trial, owner: dict[str, Any], settings: Settings,
            run_id: str | None, attempt: int = 1) -> list[dict[str, Any]]:
    """The trial's objects, owned by the experiment so that deleting it garbage-collects them. Without a run id
    (MLflow was away) the pods get the run's token, and log into the run once the operator has created it.
    `attempt` is 1 + the trial's restarts: the ranks name their runs by it."""
    found = topology.render(trial, settings.pods.render, run_id=run_id,
                            run_token=recording.trial_token(owner["metadata"]["uid"], trial.name), attempt=attempt)
    kopf.adopt(found, owner=owner)
    return found


def demands(trial: Trial, settings: Settings) -> tuple[capacity.Demand, ...] | None:
    """What each of the trial's pods requests and where it may go, as rendered; None when its templates do not
    render (creating it then fails it, saying why)."""
    try:
        found = topology.render(trial, settings.pods.render)
    except topology.TemplateError:
        return None
    return tuple(capacity.demand_of(o) for o in found if o["kind"] == "Pod")


def workload(trial: Trial, owner: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """The Kueue Workload that admits the trial, owned by the experiment like the trial's other objects."""
    found = topology_workload.workload(trial, topology.render(trial, settings.pods.render),
                                       trial.spec.scheduling.queue_name)
    kopf.adopt(found, owner=owner)
    return found
