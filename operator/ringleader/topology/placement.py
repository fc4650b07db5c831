"""A trial's placement (`scheduling.placement`) as pod (anti-)affinity terms and as Kueue's topology request.

Python works out which of the trial's own pods each pod is drawn to or kept from; the templates write
the pod's `affinity` from these terms. Every term selects pods of this trial only (its experiment and
trial labels), so one trial's placement never constrains another's.

    ranks Spread    each pod keeps away from every other pod of the trial: one rank per domain
    ranks Pack      each pod is drawn to the others (with servers Apart: to the others of its role)
    servers Apart   workers keep away from the trial's servers' domains, and servers from the workers'

Required terms bind the scheduler (a pod waits rather than break them); Preferred terms weigh its choice.
Kueue's topology-aware scheduling can only keep pods together: Pack asks it for one domain per pod set
(both pod sets in one, as a group, when one of them is a single server and servers are not Apart);
Spread and Apart reach only the scheduler, through the pods' anti-affinity.
"""

from __future__ import annotations

from typing import Any

from ringleader.api import constants
from ringleader.api.spec import Placement, PlacementMode, PlacementRanks, PlacementServers

AFFINITY = "podAffinity"
ANTI_AFFINITY = "podAntiAffinity"
PREFERRED_WEIGHT = 100
"""The weight of a Preferred term, the most a term can have: placement outweighs the scheduler's spreading."""
KUEUE_POD_SET_GROUP = "trial"


def _term(selector: dict[str, str], topology_key: str) -> dict[str, Any]:
    return {"match_labels": selector, "topology_key": topology_key}


def affinity(placement: Placement, trial_selector: dict[str, str], role: str) -> dict[str, Any] | None:
    """The terms of one pod of role `role`, for the template: {"required": bool, "kinds": {kind: [term]}};
    None for placement Any, so the pod renders as it did before placement existed."""
    if placement.is_any():
        return None
    key = placement.topology_key
    other_role = constants.ROLE_WORKER if role == constants.ROLE_PS else constants.ROLE_PS
    kinds: dict[str, list[dict[str, Any]]] = {}
    if placement.ranks == PlacementRanks.SPREAD:
        kinds[ANTI_AFFINITY] = [_term(trial_selector, key)]
    elif placement.servers == PlacementServers.APART:
        kinds[ANTI_AFFINITY] = [_term({**trial_selector, constants.LABEL_ROLE: other_role}, key)]
    if placement.ranks == PlacementRanks.PACK:
        together = ({**trial_selector, constants.LABEL_ROLE: role}
                    if placement.servers == PlacementServers.APART else trial_selector)
        kinds[AFFINITY] = [_term(together, key)]
    return {"required": placement.mode == PlacementMode.REQUIRED, "weight": PREFERRED_WEIGHT,
            "kinds": dict(sorted(kinds.items()))}


def kueue_topology_requests(placement: Placement, pod_sets: list[dict[str, Any]]) -> list[dict[str, Any] | None]:
    """Kueue's `topologyRequest` for each pod set (None: none), for a trial queued through Kueue.

    Kueue groups at most two pod sets, one of them a single pod (a leader and its workers); a trial packed
    as a whole that has more pod sets asks for each pod set's own domain, and its pods' affinity keeps
    them together."""
    if placement.ranks != PlacementRanks.PACK:
        return [None] * len(pod_sets)
    level = "required" if placement.mode == PlacementMode.REQUIRED else "preferred"
    request: dict[str, Any] = {level: placement.topology_key}
    grouped = (placement.servers != PlacementServers.APART and len(pod_sets) == 2
               and any(s["count"] == 1 for s in pod_sets))
    if grouped:
        request["podSetGroupName"] = KUEUE_POD_SET_GROUP
    return [dict(request) for _ in pod_sets]
