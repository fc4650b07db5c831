"""The operator's side of MLflow: experiment, parent run, trial runs, their end, the sweep's metrics and report;
used by `reconciler`.

A thin async wrapper over `ringleader.tracking.runs`, with two rules. The operator calls only the tracking
servers its settings allow (its own, and `allowed_uris`): `refusal` says why an experiment's URI is not
one of them. And MLflow never blocks an experiment.
Calls run in their own small thread pool, bounded by a timeout; after a failure the URI is left alone
for `retry_seconds` (the reconciler comes back then), and `Unavailable` tells the caller to go on
without it. A timeout says the server did not answer, so it counts only the call itself: not loading
the MLflow client (seconds; tens of seconds on a cold, busy node; started with the operator, `load`),
and not waiting for a thread. Slow work (reports, scans for runs of deleted experiments) has a thread
of its own, so it never delays creating runs. Else the first experiments would start their pods
without runs to log into. Runs are created with tokens derived from the experiment's uid, so a retry, or an
operator restart between "create run" and "write status", finds the run instead of creating another.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import importlib
import logging
import math
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

from ringleader.contract import provenance, redaction
from ringleader.controller.settings import MlflowSettings

if TYPE_CHECKING:
    from ringleader.tracking.settings import TrackingSettings

logger = logging.getLogger(__name__)
FINISHED, FAILED, KILLED = "FINISHED", "FAILED", "KILLED"
REPORT_ARTIFACT = "report/report.html"
# Making a report downloads every rank's records and draws its figures: far more than one call's timeout.
REPORT_TIMEOUT_SECONDS = 300.0
# Scanning for the open runs of deleted experiments searches every run the operator made: more than a call.
SCAN_TIMEOUT_SECONDS = 120.0
REPLY_CHARACTERS = 200  # of a server's error shown in Events and logs: its first line, redacted
# How long a call may wait for a thread: the calls ahead of it end by then (the MLflow client's own HTTP
# timeout and retries bound each of them), unless the process is wedged.
QUEUE_TIMEOUT_SECONDS = 600.0


class Unavailable(Exception):
    """The tracking server did not answer (or refused); the experiment goes on and the call is retried later."""


class ReportFailed(Exception):
    """The sweep's report could not be made from what MLflow holds; told once, not retried."""


def _first_line(error: BaseException) -> str:
    """What an Event may quote of a failure: the first line, redacted, at most REPLY_CHARACTERS long."""
    lines = str(error).strip().splitlines()
    line = redaction.redact(lines[0]) if lines else type(error).__name__
    return line if len(line) <= REPLY_CHARACTERS else line[:REPLY_CHARACTERS - 1] + "…"


def parent_token(uid: str) -> str:
    return f"{uid}.parent"


def trial_token(uid: str, trial_name: str) -> str:
    # One run per trial, restarts included: a restarted trial's ranks log into the same run.
    return f"{uid}.{trial_name}"


def _load_runs(timeout_seconds: float) -> ModuleType:
    # Imported on demand: mlflow takes seconds to import, and an operator without tracking never needs it.
    runs = importlib.import_module("ringleader.tracking.runs")
    runs.configure(call_settings(timeout_seconds))
    return runs


def call_settings(timeout_seconds: float) -> TrackingSettings:
    """The tracking store's settings under a call's `timeout_seconds`. One retry owner: the reconciler comes back
    after retry_seconds, so the store tries once, and its HTTP request gives up within the call's timeout rather
    than keep a thread after it (4 attempts of 15 s each held one for a minute after a 10 s timeout)."""
    from ringleader.tracking.settings import TrackingSettings  # mlflow-free; with the client, on demand

    return TrackingSettings(attempts=1, http_timeout_seconds=max(1, math.floor(timeout_seconds)))


class MlflowCalls:
    """MLflow calls on threads of their own, each bounded by a timeout, a failed URI left alone for a while."""

    def __init__(self, settings: MlflowSettings, clock: Callable[[], float] = time.monotonic,
                 load_runs: Callable[[], ModuleType] | None = None) -> None:
        self._settings = settings
        self._clock = clock
        self._down_until: dict[str, float] = {}
        # Its own threads: a hung MLflow call must not take the threads the API calls need.
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="mlflow")
        self._slow_pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mlflow-slow")
        self._load_runs = load_runs or functools.partial(_load_runs, settings.timeout_seconds)
        self._runs: concurrent.futures.Future | None = None

    def load(self) -> concurrent.futures.Future:
        """Start loading the tracking client in the pool, once; the operator calls it at startup when it tracks."""
        if self._runs is None:
            self._runs = self._pool.submit(self._load_runs)
        return self._runs

    def uri_for(self, spec_uri: str | None) -> str | None:
        return spec_uri or self._settings.default_uri

    def refusal(self, spec_uri: str | None) -> str | None:
        """Why the operator will not call an experiment's `tracking.uri`, or None if it may."""
        if spec_uri is None or self._settings.allows(spec_uri):
            return None
        own = (f"remove it to record into the operator's server {self._settings.default_uri}"
               if self._settings.default_uri else "remove it to run unrecorded")
        return (f"`tracking.uri` {redaction.redact(spec_uri)} is not a tracking server this operator may call: "
                f"ask its admin to allow it (chart value tracking.allowedUris, flag --tracking-allowed-uri), or {own}")

    def ui_url(self, uri: str, experiment_id: str) -> str | None:
        base = self._ui_base(uri)
        if base is None:
            return None
        from ringleader.tracking import schema  # loaded already: called once MLflow has answered

        return schema.ui_url(base, experiment_id)

    def _ui_base(self, uri: str) -> str | None:
        """Where the MLflow UI of `uri` is served: the configured address, else the server itself when it is HTTP."""
        return self._settings.ui_url or (uri if uri.startswith(("http://", "https://")) else None)

    def retry_in(self, uri: str) -> float | None:
        """Seconds until `uri` may be tried again, or None if it is not known to be down."""
        remaining = self._down_until.get(uri, 0.0) - self._clock()
        return remaining if remaining > 0 else None

    def close(self) -> None:
        for pool in (self._pool, self._slow_pool):
            pool.shutdown(wait=False, cancel_futures=True)

    async def _call(self, uri: str, what: str, function: Callable[[Any], Any], timeout: float | None = None,
                    slow: bool = False) -> Any:
        """`function(runs)` in the tracking threads (`slow`: the thread for slow work), `runs` being
        ringleader.tracking.runs; Unavailable on failure."""
        shown = redaction.redact(uri)
        if not self._settings.allows(uri):
            # The reconciler refuses such experiments first; this guards every other path (a deletion).
            raise Unavailable(f"MLflow at {shown}: {what} skipped: not a tracking server this operator may call")
        if self.retry_in(uri) is not None:
            raise Unavailable(f"MLflow at {shown} was unreachable moments ago; retrying later")
        try:
            # Not under the timeout: a slow import says nothing about the server.
            runs = await asyncio.wrap_future(self.load())
        except Exception as error:  # noqa: BLE001 -- a broken image; the experiments still go on without MLflow
            raise Unavailable(f"the MLflow client cannot be loaded: {_first_line(error)}") from error
        loop = asyncio.get_running_loop()
        started = loop.create_future()

        def call() -> Any:
            loop.call_soon_threadsafe(lambda: started.done() or started.set_result(None))
            return function(runs)

        done = loop.run_in_executor(self._slow_pool if slow else self._pool, call)
        limit = timeout or self._settings.timeout_seconds
        try:
            await asyncio.wait_for(started, QUEUE_TIMEOUT_SECONDS)
            return await asyncio.wait_for(done, timeout=limit)
        except asyncio.TimeoutError:
            problem = f"no answer within {limit:g}s"
            if not started.done() or started.cancelled():
                done.cancel()
                problem = f"no tracking thread free within {QUEUE_TIMEOUT_SECONDS:g}s"
        except Exception as error:  # noqa: BLE001 -- any failure of the tracking server; the caller goes on
            problem = _first_line(error)
        if not slow:
            # Slow work retries on its own schedule; its failure (a search slow on a fresh server) must not
            # make the quick calls skip MLflow, or trials starting now would get pods without runs.
            self._down_until[uri] = self._clock() + self._settings.retry_seconds
        logger.warning("MLflow at %s: %s failed: %s", shown, what, problem)
        raise Unavailable(f"MLflow at {shown}: {what} failed: {problem}")

    async def start_parent(self, uri: str, experiment, uid: str, image: str) -> tuple[str, str]:
        """(MLflow experiment id, parent run id) of a DistributedTrainingExperiment whose pods run `image`; the
        parent run's provenance is what the operator knows of it (the pods' part comes at the end, with the report)."""
        experiment_id = await self._call(uri, "create experiment", lambda runs: runs.ensure_experiment(
            experiment.mlflow_experiment_name(), tracking_uri=uri))
        taken = provenance.at_operator(experiment.namespace, experiment.name, experiment.metadata.generation,
                                       experiment.spec.model_dump(mode="json", by_alias=True), image)
        run_id = await self._call(uri, "create parent run", lambda runs: runs.start_parent_run(
            experiment_id, experiment, token=parent_token(uid), source="operator", provenance=taken,
            tracking_uri=uri))
        return experiment_id, run_id

    async def start_trial(self, uri: str, experiment_id: str, parent_run_id: str | None, trial, uid: str) -> str:
        return await self._call(uri, f"create run of trial {trial.name}", lambda runs: runs.start_trial_run(
            experiment_id, parent_run_id, trial, token=trial_token(uid, trial.name), tracking_uri=uri))

    async def finish(self, uri: str, run_id: str, status: str, *, summary: dict | None = None,
                     reason: str | None = None, message: str | None = None) -> None:
        await self._call(uri, f"end run {run_id}", lambda runs: runs.finish_run(
            run_id, status, summary, reason=reason, message=message, tracking_uri=uri))

    async def log_sweep_metrics(self, uri: str, parent_run_id: str, summaries: dict[str, dict | None],
                                trials=()) -> None:
        """The parent run's metrics comparing the trials, from {trial name: its status summary's wire dict or None},
        each named by what it varies among `trials` (the expansion's)."""
        await self._call(uri, "log the sweep's metrics", lambda runs: runs.log_sweep_metrics(
            parent_run_id, summaries, trials=trials, tracking_uri=uri))

    async def open_sweeps(self, uri: str, limit: int):
        """The RUNNING sweep runs this operator made on `uri` (tracking.runs.OpenSweep), at most `limit`."""
        return await self._call(uri, "find open sweep runs", lambda runs: runs.open_operator_sweeps(
            limit=limit, tracking_uri=uri), timeout=SCAN_TIMEOUT_SECONDS, slow=True)

    async def open_children(self, uri: str, parent_run_id: str, limit: int) -> list[str]:
        return await self._call(uri, f"find open runs under {parent_run_id}", lambda runs: runs.open_children(
            parent_run_id, limit=limit, tracking_uri=uri), timeout=SCAN_TIMEOUT_SECONDS, slow=True)

    def report_url(self, uri: str, experiment_id: str, parent_run_id: str) -> str:
        """The report's page in the MLflow UI, or its artifact URI when no UI address is known."""
        base = self._ui_base(uri)
        if base is None:
            return f"runs:/{parent_run_id}/{REPORT_ARTIFACT}"
        from ringleader.tracking import schema  # loaded already: called once MLflow has answered

        return schema.ui_url(base, experiment_id, parent_run_id, REPORT_ARTIFACT)

    async def report(self, uri: str, parent_run_id: str, summaries: dict[str, dict]) -> None:
        """Make the sweep's report from what its runs hold in MLflow and attach it to the parent run, whose
        provenance gains what the ranks recorded of their nodes, pods and versions first.

        `summaries` are the trials' summaries from status, for trials whose runs hold none (no rank could
        log it). ReportFailed when the report itself cannot be made; Unavailable when MLflow is away."""
        def make(runs) -> str | None:
            try:
                runs.attach_report(parent_run_id, summaries=summaries, pods=True, tracking_uri=uri)
            except runs.TRACKING_ERRORS:  # MLflow away or refusing: retried like every other call
                raise
            except Exception as error:  # noqa: BLE001 -- a report bug must not hold the experiment's end up
                logger.exception("the report of run %s could not be made", parent_run_id)
                return _first_line(error)
            return None

        problem = await self._call(uri, "attach the report", make, timeout=REPORT_TIMEOUT_SECONDS, slow=True)
        if problem is not None:
            raise ReportFailed(f"the report could not be made: {problem}")
