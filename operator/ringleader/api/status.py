"""The observed state of a DistributedTrainingExperiment: conditions are the contract, phase a summary."""

from __future__ import annotations

import datetime
import enum
from typing import Annotated

import pydantic

from ringleader.api import base
from ringleader.api.base import ApiModel
from ringleader.api.spec import MAX_TRIALS

# Every condition type appears at most once (the list is keyed by type); room for types added later.
MAX_CONDITIONS = 16


class ConditionType(str, enum.Enum):
    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUSPENDED = "Suspended"
    RECONCILE_FAILED = "ReconcileFailed"


class ConditionStatus(str, enum.Enum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Phase(str, enum.Enum):
    """A one-word summary for printer columns, derived from the conditions; never the contract. Queued is the
    experiment's alone: no trial runs and the next one waits for Kueue to admit it, or for free capacity."""

    PENDING = "Pending"
    QUEUED = "Queued"
    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    SUSPENDED = "Suspended"


TERMINAL_PHASES = (Phase.SUCCEEDED, Phase.FAILED)


class Condition(ApiModel):
    """A condition, as in the Kubernetes API conventions (metav1.Condition)."""

    type: ConditionType
    """type of the condition: Created, Running, Restarting, Succeeded, Failed, Suspended or ReconcileFailed."""
    status: ConditionStatus
    """status is True, False or Unknown."""
    reason: Annotated[str,
                      pydantic.StringConstraints(pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$", max_length=1024)]
    """reason is a CamelCase word for machines ("RankFailed", "BackoffLimitExceeded")."""
    message: Annotated[str, pydantic.StringConstraints(max_length=32768)] = ""
    """message says what happened, for people: which pod, which exit code, what to do."""
    last_transition_time: datetime.datetime
    """lastTransitionTime is when status last changed."""
    observed_generation: int | None = None
    """observedGeneration is the spec generation this condition was computed from."""


class ReplicaStatus(ApiModel):
    """Counts of one role's pods, summed over the running trials."""

    active: int = 0
    """active pods (pending or running)."""
    ready: int = 0
    """ready pods (running and ready)."""
    succeeded: int = 0
    """succeeded pods."""
    failed: int = 0
    """failed pods."""


class Progress(ApiModel):
    """How far the experiment is."""

    iteration: int = 0
    """iteration reached by the running trial (the latest, with several), as its lowest-ranked worker reports it:
    under BSP every worker's, under ASP, SSP and DSSP that worker's (others may be behind or ahead)."""
    iterations: int = 0
    """iterations each worker runs in a trial."""
    trials_completed: int = 0
    """trialsCompleted counts trials that succeeded or failed."""
    trials: int = 0
    """trials in the experiment (1 without a sweep)."""
    trials_queued: int = 0
    """trialsQueued counts trials waiting for Kueue to admit them (`scheduling.queueName`) or for the nodes' free
    capacity to hold all their pods (the operator's own admission)."""

    def text(self) -> str:
        """The printer column's summary: "37/200" iterations, prefixed by "2/6 trials, " in a sweep, and
        ", 3 queued" appended while trials wait for Kueue."""
        iterations = f"{self.iteration}/{self.iterations}"
        text = iterations if self.trials <= 1 else f"{self.trials_completed}/{self.trials} trials, {iterations}"
        return f"{text}, {self.trials_queued} queued" if self.trials_queued else text


class Summary(ApiModel):
    """Timings of a trial, after warm-up: where the iteration time went."""

    throughput: float | None = None
    """throughput in samples per second, all workers together."""
    iteration_time_p50_seconds: float | None = None
    """iterationTimeP50Seconds is the median iteration time over workers and iterations."""
    iteration_time_p95_seconds: float | None = None
    """iterationTimeP95Seconds is the 95th percentile iteration time."""
    compute_fraction: float | None = None
    """computeFraction of the iteration time spent in data, forward, backward and update."""
    comm_fraction: float | None = None
    """commFraction of the iteration time spent moving bytes."""
    wait_fraction: float | None = None
    """waitFraction of the iteration time spent waiting for other workers (barrier or staleness bound)."""
    straggler_rank: int | None = None
    """stragglerRank is the worker with the largest mean compute time."""
    target_seconds: float | None = None
    """targetSeconds from the trial's first iteration until the iteration whose parameters first reached
    `model.target`; unset when there is no target or it was not reached."""
    target_iterations: int | None = None
    """targetIterations the evaluating worker had run when `model.target` was first reached."""
    node_count: int | None = None
    """nodeCount is how many nodes the trial's ranks ran on, as each rank recorded its own."""
    cross_node_byte_share: float | None = None
    """crossNodeByteShare is the share of the bytes the architecture exchanges whose two ranks ran on different
    nodes: 0 when all stayed on one node (a bridge, not a NIC), 1 when every exchange crossed nodes."""
    predicted_iteration_seconds: dict[str, float] | None = None
    """predictedIterationSeconds by architecture label (1ps, 4ps, p2p, ring): the iteration time the trial's
    calibrated models predict for each architecture at its worker count (`ringleader predict`); `estimate`
    uses them for the trials not run yet. Unset when the trial made no prediction."""

    # Status is read by people (`kubectl get dte` prints throughput); MLflow keeps the exact values.
    @pydantic.field_validator("throughput")
    @classmethod
    def _round_throughput(cls, value: float | None) -> float | None:
        return None if value is None else round(value, 1)

    @pydantic.field_validator("iteration_time_p50_seconds", "iteration_time_p95_seconds", "target_seconds")
    @classmethod
    def _round_seconds(cls, value: float | None) -> float | None:
        return None if value is None else round(value, 6)

    @pydantic.field_validator("predicted_iteration_seconds")
    @classmethod
    def _round_predictions(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        return None if value is None else {label: round(seconds, 6) for label, seconds in value.items()}

    @pydantic.field_validator("compute_fraction", "comm_fraction", "wait_fraction", "cross_node_byte_share")
    @classmethod
    def _round_fraction(cls, value: float | None) -> float | None:
        return None if value is None else round(value, 4)


class EstimateBound(str, enum.Enum):
    EXPECTED = "Expected"
    AT_MOST = "AtMost"


class Estimate(ApiModel):
    """When the experiment is expected to end, refined as its trials run."""

    completion_time: datetime.datetime | None = None
    """completionTime is when the experiment's last iteration is expected to end: the running trials' remaining
    iterations at their recent mean iteration time (over about the last tenth of their iterations), then each
    trial still to run, its iterations times its predicted iteration time plus the start-up that finished
    trials took. Unset while unknown: `message` says until when."""
    trial_completion_time: datetime.datetime | None = None
    """trialCompletionTime is when the running trial's last iteration is expected to end (the latest, with
    several)."""
    bound: EstimateBound = EstimateBound.EXPECTED
    """bound is Expected, or AtMost when `model.target` with onReached Stop may end trials sooner."""
    text: str | None = None
    """text is completionTime for `kubectl get` (RFC 3339, UTC), "at most" before it when bound is AtMost."""
    message: str = ""
    """message says what the estimate rests on, or why there is none yet."""


class Compared(ApiModel):
    """What the experiment runs, for `kubectl get`: each field its trials' one value, or the values a sweep
    compares, comma-separated in the order its trials run."""

    architecture: str = ""
    """architecture of the trials ("ParameterServer", or "ParameterServer,RingAllReduce" in a sweep over it)."""
    paradigm: str = ""
    """paradigm of the trials ("BSP", or "BSP,SSP" in a sweep over it)."""
    workers: str = ""
    """workers of each trial ("4", or "2,4,8" in a sweep over them)."""


class Best(ApiModel):
    """The sweep's answer so far: its succeeded trial with the highest throughput."""

    trial: str
    """trial is the name of that trial."""
    parameters: dict[str, str] = {}
    """parameters are its swept values (the repetition left out)."""
    text: str
    """text names it for `kubectl get` as the report labels it: its swept values ("RingAllReduce, workers=4"), or its
    name when only repetitions differ."""
    throughput: float | None = None
    """throughput of that trial, in samples per second, all workers together."""


class MlflowStatus(ApiModel):
    """Where the experiment is recorded."""

    experiment_id: str | None = None
    """experimentId of the MLflow experiment."""
    run_id: str | None = None
    """runId of the experiment's parent run (trials are its children)."""
    url: str | None = None
    """url of the MLflow experiment page."""
    report_url: str | None = None
    """reportUrl is the sweep's report (report.html, attached to the parent run once the experiment has ended): its
    page in the MLflow UI, or `runs:/<run id>/report/report.html` (for `mlflow artifacts download -u`) when the
    operator knows no UI address."""
    run_ended: bool = False
    """runEnded is true once the parent run was ended (after the sweep's metrics and report were logged): an
    operator restarted at any point neither leaves it open nor ends it twice."""


class RunSummarySource(str, enum.Enum):
    """Who logs a trial's summary into its MLflow run."""

    RANKS = "Ranks"
    OPERATOR = "Operator"


class TrialStatus(ApiModel):
    """One trial of the experiment."""

    name: str
    """name of the trial, the prefix of its objects' names."""
    index: int
    """index of the trial in the sweep's expansion order."""
    parameters: dict[str, str] = {}
    """parameters are the swept values of this trial ("architecture": "RingAllReduce")."""
    phase: Phase = Phase.PENDING
    """phase summarizes the trial's conditions."""
    reason: str | None = None
    """reason for the phase, CamelCase."""
    message: str | None = None
    """message: what happened, for people (on failure: which pod, exit code, reason)."""
    conditions: Annotated[list[Condition], pydantic.Field(max_length=MAX_CONDITIONS,
                                                          json_schema_extra=base.list_map("type"))] = []
    """conditions of the trial, keyed by type: Created, Running, Restarting, Succeeded, Failed, Suspended,
    each with the time it last changed (when a trial started running, when it failed)."""
    restarts: int = 0
    """restarts of the trial so far, bounded by runPolicy.backoffLimit."""
    run_id: str | None = None
    """runId of the trial's MLflow run."""
    run_summary_source: RunSummarySource | None = None
    """runSummarySource says who logs the trial's summary into its run: Ranks (the run existed when the pods
    started; the lowest worker rank logs it) or Operator (the run was made after the pods started, as when MLflow
    was away; the operator logs the summary from status when it ends the run). Unset while there is no run."""
    run_ended: bool = False
    """runEnded is true once the trial's run was ended in MLflow with the trial's outcome (and summary, when
    runSummarySource is Operator): an operator restarted at any point ends it once, summary included."""
    start_time: datetime.datetime | None = None
    """startTime of the trial's current attempt."""
    completion_time: datetime.datetime | None = None
    """completionTime of the trial."""
    summary: Summary | None = None
    """summary timings of the trial, once it succeeded."""


class ExperimentStatus(ApiModel):
    """status of a DistributedTrainingExperiment, written by the operator only."""

    phase: Phase = Phase.PENDING
    """phase summarizes the conditions for `kubectl get`."""
    conditions: Annotated[list[Condition], pydantic.Field(max_length=MAX_CONDITIONS,
                                                          json_schema_extra=base.list_map("type"))] = []
    """conditions are the status contract, keyed by type: Created, Running, Restarting, Succeeded, Failed,
    Suspended, and ReconcileFailed (True while the operator's passes over the experiment fail: the error, how many
    attempts in a row, and when the next one is; False once a pass succeeds again)."""
    observed_generation: int | None = None
    """observedGeneration is the spec generation the operator last acted on."""
    start_time: datetime.datetime | None = None
    """startTime is when the first trial started."""
    completion_time: datetime.datetime | None = None
    """completionTime is when the experiment succeeded or failed."""
    replica_statuses: dict[str, ReplicaStatus] = {}
    """replicaStatuses by role ("ps", "worker")."""
    progress: Progress = Progress()
    """progress of the experiment."""
    progress_text: str | None = None
    """progressText is `progress` in a few characters for `kubectl get` ("37/200", or "2/6 trials, 37/200"
    in a sweep), as written by `Progress.text()`."""
    estimate: Estimate | None = None
    """estimate of when the experiment ends, while it has trials to run; unset once it ended or while it is
    suspended."""
    mlflow: MlflowStatus = MlflowStatus()
    """mlflow ids and URL."""
    compares: Compared | None = None
    """compares says what the experiment runs: its trials' architectures, paradigms and worker counts (the
    printer columns)."""
    best: Best | None = None
    """best is the succeeded trial with the highest throughput, in a sweep (unset with one trial, or before one
    succeeded)."""
    summary: Summary | None = None
    """summary of the best succeeded trial (the highest throughput; with one trial, its own): the printer column
    shows its throughput. Each trial's own is under `trials`."""
    trials: Annotated[list[TrialStatus], pydantic.Field(max_length=MAX_TRIALS,
                                                        json_schema_extra=base.list_map("name"))] = []
    """trials, in expansion order, keyed by name."""
