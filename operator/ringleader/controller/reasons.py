"""Every CamelCase reason the operator writes into conditions, trial statuses and Events, in one place.

Reasons are for machines (`kubectl wait`, alerts); messages say the rest for people. Those of a trial's end that
a local run meets too are contract/outcomes.py's words, named here again so this list stays whole."""

from __future__ import annotations

from ringleader.contract import outcomes

# The experiment's conditions (plan.py).
EXPERIMENT_CREATED = "ExperimentCreated"
TRIAL_RUNNING = "TrialRunning"
TRIAL_STARTING = "TrialStarting"
EXPERIMENT_FINISHED = "ExperimentFinished"
TRIALS_PENDING = "TrialsPending"
TRIALS_SUCCEEDED = "TrialsSucceeded"
TRIALS_FAILED = outcomes.TRIALS_FAILED
NO_RESTART = "NoRestartInProgress"
INVALID_SPEC = "InvalidSpec"

# A trial's phase (trials.py).
WAITING_FOR_SLOT = "WaitingForSlot"
WAITING_FOR_OLD_PODS = "WaitingForOldPods"
WAITING_FOR_CAPACITY = "WaitingForCapacity"  # its pods do not fit the nodes' free capacity together (admitter.py)
PODS_CREATED = "PodsCreated"
WAITING_FOR_PODS = "WaitingForPods"
ALL_PODS_RUNNING = "AllPodsRunning"
RANK_FAILED = outcomes.RANK_FAILED
DECIDING_CAUSE = "DecidingCause"
POD_DELETED = "PodDeleted"
NODE_LOST = "NodeLost"  # a rank's node stopped answering (its pods marked not ready by the node controller)
WORKERS_SUCCEEDED = outcomes.WORKERS_SUCCEEDED
EXITED_EARLY = outcomes.EXITED_EARLY
BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
PERMANENT_FAILURE = outcomes.PERMANENT_FAILURE
RECORDS_INCOMPLETE = outcomes.RECORDS_INCOMPLETE
RECORDS_PENDING = "RecordsPending"
DEADLINE_EXCEEDED = outcomes.DEADLINE_EXCEEDED
STARTUP_DEADLINE_EXCEEDED = "StartupDeadlineExceeded"
WAITING_FOR_PLACEMENT = "WaitingForPlacement"  # a pod unschedulable by the trial's Required placement
PLACEMENT_UNSATISFIABLE = "PlacementUnsatisfiable"  # ... still at the startup deadline
INVALID_IMAGE = "InvalidImage"
REQUEST_FITS_NO_NODE = "RequestFitsNoNode"  # the scheduler: no node could ever hold a pod (preemption not helpful)
# A trial that failed for one of these never had all its pods running: it did not train.
NEVER_STARTED = (STARTUP_DEADLINE_EXCEEDED, PLACEMENT_UNSATISFIABLE, INVALID_IMAGE, REQUEST_FITS_NO_NODE)
CREATE_FAILED = "CreateFailed"
SUSPENDED = "Suspended"
RESUMED = "Resumed"
WAITING_FOR_ADMISSION = "WaitingForAdmission"
EVICTED = "Evicted"

# Experiments the operator refuses to run as written (reconciler.py).
PODGROUPS_DISABLED = "PodGroupsDisabled"
TRACKING_URI_NOT_ALLOWED = "TrackingUriNotAllowed"
KUEUE_DISABLED = "KueueDisabled"

# The experiment's tracking (experiment_runs.py).
TRACKING_UNAVAILABLE = "TrackingUnavailable"
TRACKING_AVAILABLE = "TrackingAvailable"
REPORT_READY = "ReportReady"
REPORT_FAILED = "ReportFailed"

# A running trial's progress (reconciler.py, polling.py): its log could not be read, or can be again.
PROGRESS_UNREADABLE = "ProgressUnreadable"
PROGRESS_READABLE = "ProgressReadable"

# The ReconcileFailed condition and its Events (reconciler.py): why the operator's passes fail.
FORBIDDEN = "Forbidden"
API_ERROR = "ApiError"
STATUS_UNREADABLE = "StatusUnreadable"
RECONCILE_FAILING = "ReconcileFailing"
RECONCILED = "Reconciled"

# MLflow runs the operator ended on its own (experiment_runs.py, orphans.py).
EXPERIMENT_DELETED = "ExperimentDeleted"
NAMESPACE_DELETED = "NamespaceDeleted"  # runs ended KILLED because the experiment's namespace is being deleted
