"""The reason words of a trial's end, one set for both backends (the launcher's outcome.json, the operator's
trial status), so the MLflow tag `ringleader.reason` says the same word for the same end locally and on a cluster.

Words only the operator can meet stay in controller/reasons.py (BackoffLimitExceeded, PodDeleted, InvalidImage, ...):
a local run never restarts a trial nor pulls an image.
"""

from __future__ import annotations

from typing import Iterable

WORKERS_SUCCEEDED = "WorkersSucceeded"
"""Every worker ended its run and the aggregating one left the trial's summary."""
RANK_FAILED = "RankFailed"
"""A rank failed, or stopped responding; the message names it (`failures.verdict`). On a cluster the trial
restarts with this reason until backoffLimit is spent (then BackoffLimitExceeded)."""
PERMANENT_FAILURE = "PermanentFailure"
"""A rank said no restart can fix its failure (an import error, an invalid model or dataset): never restarted."""
RECORDS_INCOMPLETE = "RecordsIncomplete"
"""A pod's rank trained but MLflow did not take all its records within tracking.recordsWaitSeconds: it handed them
over in its log (`ringleader publish --from-log`) and failed. Never restarted: a new attempt would not bring
the server back. Cluster only: `ringleader run` publishes after each trial and keeps what is left on disk."""
EXITED_EARLY = "ExitedEarly"
"""A rank exited with code 0 outside the runtime's loop (os._exit in user code): nothing or no summary recorded."""
DEADLINE_EXCEEDED = "DeadlineExceeded"
"""The trial ran longer than runPolicy.activeDeadlineSeconds; every rank was stopped."""
INTERRUPTED = "Interrupted"
"""Local only: stopped by the user (SIGINT or SIGTERM to `ringleader run`)."""
TRIALS_FAILED = "TrialsFailed"
"""A sweep (its parent run, the experiment's Failed condition) with at least one failed trial."""


def sweep_reason(failed: Iterable[str | None]) -> str:
    """The reason of a sweep whose trials in `failed` (their reasons) failed: the one word they share, else
    TrialsFailed. The launcher's parent run and the operator's Failed condition both say it."""
    shared = set(failed)
    return (shared.pop() or TRIALS_FAILED) if len(shared) == 1 else TRIALS_FAILED
