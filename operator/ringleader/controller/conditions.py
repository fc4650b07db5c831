"""Conditions as the Kubernetes API conventions keep them, and the phase summarized from them; used by `plan`.

Pure functions over api.status models: no clock reads (callers pass `now`), no I/O.
"""

from __future__ import annotations

import datetime

from ringleader.api.status import Condition, ConditionStatus, ConditionType, Phase, TrialStatus
from ringleader.controller import reasons


# Which condition, when True, names the phase; earlier entries win (a failed experiment that was
# suspended is Failed; a restarting one is not Running).
_PHASE_ORDER = (
    (ConditionType.FAILED, Phase.FAILED),
    (ConditionType.SUCCEEDED, Phase.SUCCEEDED),
    (ConditionType.SUSPENDED, Phase.SUSPENDED),
    (ConditionType.RESTARTING, Phase.RESTARTING),
    (ConditionType.RUNNING, Phase.RUNNING),
    (ConditionType.CREATED, Phase.CREATED),
)


def find(conditions: list[Condition], type_: ConditionType) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)


def is_true(conditions: list[Condition], type_: ConditionType) -> bool:
    condition = find(conditions, type_)
    return condition is not None and condition.status == ConditionStatus.TRUE


def set_condition(
    conditions: list[Condition],
    type_: ConditionType,
    status: bool | ConditionStatus,
    reason: str,
    message: str,
    *,
    now: datetime.datetime,
    generation: int | None,
) -> list[Condition]:
    """A new list with `type_` set; lastTransitionTime moves only when the status flips (as in metav1)."""
    if isinstance(status, bool):
        status = ConditionStatus.TRUE if status else ConditionStatus.FALSE
    old = find(conditions, type_)
    transition = now if old is None or old.status != status else old.last_transition_time
    new = Condition(
        type=type_, status=status, reason=reason, message=message,
        last_transition_time=transition, observed_generation=generation,
    )
    if old is not None and old.model_dump() == new.model_dump():
        return conditions
    others = [c for c in conditions if c.type != type_]
    # Keep the conventional order (the enum's), so `kubectl get -o yaml` reads the same every time.
    order = list(ConditionType)
    return sorted([*others, new], key=lambda c: order.index(c.type))


def phase_of(conditions: list[Condition]) -> Phase:
    """The one-word summary of the conditions, for printer columns: Queued while it waits for Kueue or capacity."""
    for type_, phase in _PHASE_ORDER:
        if is_true(conditions, type_):
            return phase
        if type_ == ConditionType.RUNNING and (found := find(conditions, type_)) is not None and \
                found.reason in (reasons.WAITING_FOR_ADMISSION, reasons.WAITING_FOR_CAPACITY):
            return Phase.QUEUED
    return Phase.PENDING


def became_true(old: list[Condition], new: list[Condition], type_: ConditionType) -> bool:
    return is_true(new, type_) and not is_true(old, type_)


# A trial's phase is decided by its pods (trials.step); its conditions follow the phase, so each state
# keeps the time the trial entered and left it.
_TRIAL_CONDITION_OF_PHASE = {
    Phase.RUNNING: ConditionType.RUNNING,
    Phase.RESTARTING: ConditionType.RESTARTING,
    Phase.SUCCEEDED: ConditionType.SUCCEEDED,
    Phase.FAILED: ConditionType.FAILED,
    Phase.SUSPENDED: ConditionType.SUSPENDED,
}


def of_trial(trial: TrialStatus, *, now: datetime.datetime, generation: int | None) -> TrialStatus:
    """The trial with its conditions brought in line with its phase: the phase's condition True with the
    trial's reason and message, conditions that held before False with the same (what ended them), Created True
    from the first pods on."""
    found = trial.conditions
    reason, message = trial.reason or trial.phase.value, trial.message or ""
    if trial.phase != Phase.PENDING and not is_true(found, ConditionType.CREATED):
        found = set_condition(found, ConditionType.CREATED, True, reason, message, now=now, generation=generation)
    current = _TRIAL_CONDITION_OF_PHASE.get(trial.phase)
    for type_ in _TRIAL_CONDITION_OF_PHASE.values():
        if type_ == current:
            found = set_condition(found, type_, True, reason, message, now=now, generation=generation)
        elif is_true(found, type_):
            # What ended it, in the trial's own words ("recreated 3 pods (restart 1); waiting ..."), not its phase.
            found = set_condition(found, type_, False, reason, message or f"the trial is {trial.phase.value}", now=now,
                                  generation=generation)
    return trial if found is trial.conditions else trial.model_copy(update={"conditions": found})
