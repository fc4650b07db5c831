"""The Kubernetes Events an experiment's status change deserves: one per trial transition and per experiment milestone,
and the operator log's line per phase change.

Pure: `reconciler` computes them from the old and new status and posts them with kopf.event (and logs the line),
so every transition is announced exactly once, whichever handler or restart caused it.
"""

from __future__ import annotations

import dataclasses

from ringleader.api.status import ConditionType, ExperimentStatus, Phase
from ringleader.contract import failures
from ringleader.controller import conditions, reasons

Type = ConditionType
NORMAL, WARNING = "Normal", "Warning"
# Pending trials announce nothing until they wait on something unusual: a 256-trial sweep would
# otherwise open with 256 identical events.
_QUIET_PENDING = (None, reasons.WAITING_FOR_SLOT, reasons.RESUMED)
_WARNING_PHASES = (Phase.FAILED, Phase.RESTARTING)
_WARNING_REASONS = (reasons.EVICTED, reasons.WAITING_FOR_PLACEMENT)


@dataclasses.dataclass(frozen=True)
class Event:
    type: str
    reason: str
    message: str


def _trial_events(old: ExperimentStatus, new: ExperimentStatus) -> list[Event]:
    before = {t.name: t for t in old.trials}
    found = []
    for trial in new.trials:
        previous = before.get(trial.name)
        if previous is not None and (previous.phase, previous.reason) == (trial.phase, trial.reason):
            continue
        if trial.phase == Phase.PENDING and trial.reason in _QUIET_PENDING:
            continue
        kind = WARNING if trial.phase in _WARNING_PHASES or trial.reason in _WARNING_REASONS else NORMAL
        reason = trial.reason or f"Trial{trial.phase.value}"
        found.append(Event(kind, reason, f"trial {trial.name}: {trial.message or trial.phase.value}"))
    return found


def _condition_events(old: ExperimentStatus, new: ExperimentStatus) -> list[Event]:
    found = []
    for type_, kind in ((Type.CREATED, NORMAL), (Type.SUSPENDED, NORMAL), (Type.SUCCEEDED, NORMAL),
                        (Type.FAILED, WARNING)):
        condition = conditions.find(new.conditions, type_)
        if condition is not None and conditions.became_true(old.conditions, new.conditions, type_):
            found.append(Event(kind, condition.reason, condition.message))
    resumed = (conditions.is_true(old.conditions, Type.SUSPENDED)
               and not conditions.is_true(new.conditions, Type.SUSPENDED))
    if resumed:
        condition = conditions.find(new.conditions, Type.SUSPENDED)
        found.append(Event(NORMAL, condition.reason if condition else reasons.RESUMED,
                           condition.message if condition else "resumed"))
    return found


# The condition that says why an experiment is in each phase (Created and Queued: why it does not run yet).
_WHY = {Phase.FAILED: Type.FAILED, Phase.SUCCEEDED: Type.SUCCEEDED, Phase.SUSPENDED: Type.SUSPENDED,
        Phase.RESTARTING: Type.RESTARTING, Phase.RUNNING: Type.RUNNING, Phase.QUEUED: Type.RUNNING,
        Phase.CREATED: Type.RUNNING}
LOG_MESSAGE_CHARACTERS = 300  # of the condition's message in a log line: the Event and the condition hold it whole


def log_line(old: ExperimentStatus, new: ExperimentStatus) -> str | None:
    """The operator log's line for an experiment whose phase changed, at its default level, so that its log tells
    each experiment's story: "Created -> Running (TrialRunning: trial q-0: all 3 pods ... are running)"."""
    if old.phase == new.phase:
        return None
    condition = conditions.find(new.conditions, _WHY[new.phase]) if new.phase in _WHY else None
    shown = failures.shorten_middle(condition.message, LOG_MESSAGE_CHARACTERS) if condition else ""
    why = f" ({condition.reason}: {shown})" if condition else ""
    return f"{old.phase.value} -> {new.phase.value}{why}"


def transitions(old: ExperimentStatus, new: ExperimentStatus) -> list[Event]:
    """Events for what changed between two statuses, experiment milestones after the trial transitions behind them.
    A milestone that says what a trial's event just said (a one-trial experiment failing with its trial's reason
    and message) is not said twice."""
    trial_events = _trial_events(old, new)
    return trial_events + [e for e in _condition_events(old, new) if e not in trial_events]
