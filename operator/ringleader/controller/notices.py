"""What a failing reconcile tells the experiment's users: a Warning Event and the ReconcileFailed condition; used by
`reconciler`.

Pure: `reconciler` hands over the work queue's `PassFailure` and posts what comes back. The operator log
alone is no place for an error: nobody reading `kubectl describe dte` would learn that the operator
lacks a verb, or that it stopped looking at the experiment for good.
"""

from __future__ import annotations

import dataclasses

import kopf

from ringleader.controller import kube, reasons, statuses, workqueue

MESSAGE_CHARACTERS = 1024  # of an error quoted in an Event and a condition: enough for any API server message


@dataclasses.dataclass(frozen=True)
class Notice:
    reason: str
    message: str


def reason_of(error: BaseException) -> str:
    if isinstance(error, kube.Forbidden):
        return reasons.FORBIDDEN
    if isinstance(error, statuses.Unreadable):
        return reasons.STATUS_UNREADABLE
    if isinstance(error, kopf.TemporaryError):
        return reasons.API_ERROR
    return reasons.RECONCILE_FAILING


def needs_a_person(error: BaseException) -> bool:
    """Errors no retry can fix: only an administrator (RBAC) or the experiment's owner can."""
    return isinstance(error, (kopf.PermanentError, kube.Forbidden))


def notice(failure: workqueue.PassFailure) -> Notice | None:
    """The Event and condition a failure deserves, or None for a single blip (an API server restarting) that the
    next attempt will most likely get past: errors are news when a person must act or when they repeat."""
    error = failure.error
    if not needs_a_person(error) and failure.attempt < 2:
        return None
    text = str(error) if isinstance(error, (kopf.TemporaryError, kopf.PermanentError)) else \
        f"{type(error).__name__}: {error}"
    if len(text) > MESSAGE_CHARACTERS:
        text = text[:MESSAGE_CHARACTERS - 1] + "…"
    attempts = f"{failure.attempt} failed attempt{'s' * (failure.attempt != 1)} in a row"
    if failure.retry_in is not None:
        then = f"{attempts}; next attempt in {failure.retry_in:.0f}s (the delay doubles per failure)"
    elif isinstance(error, kopf.PermanentError):
        then = f"{attempts}; not retried: a retry cannot succeed until this is fixed"
    else:
        then = f"{attempts}; not retried until the experiment or its pods change"
    return Notice(reason_of(error), f"{text} ({then})")
