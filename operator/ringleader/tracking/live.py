"""Live publishing from inside a rank: a daemon thread sends the rank's new records to MLflow every few seconds.

The runtime starts a LivePublisher when MLFLOW_TRACKING_URI and the trial run are given, i.e. in pods against
a remote tracking server; the local launcher never sets them and publishes after each trial instead (one
writer for sqlite). The run is given by its id (RINGLEADER_MLFLOW_RUN_ID), or, when MLflow was away as the
pods were made, by its token and MLflow experiment: the publisher then finds the run once the operator has
created it. While the server is away, or the run does not exist yet, the records wait on disk and the next
round sends them; `stop()` flushes, giving a run still to be created the stop's timeout to appear.
"""

from __future__ import annotations

import logging
import pathlib
import threading
import time

from ringleader.api.trial import Trial
from ringleader.contract import environment as contract
from ringleader.contract import layout, redaction, unpublished
from ringleader.tracking.cursor import Cursor
from ringleader.tracking.cursor import path_for as cursor_path_for
from ringleader.tracking import publisher, schema
from ringleader.tracking.settings import TrackingSettings
from ringleader.tracking.store import Store, TrackingUnavailable

log = logging.getLogger(__name__)


class RunNotCreated(TrackingUnavailable):
    """The trial run this rank was told to find by its token does not exist yet: the records wait."""


class LivePublisher:
    def __init__(self, env: contract.PodEnvironment, trial: Trial, rank_dir: str | pathlib.Path,
                 settings: TrackingSettings | None = None):
        if env.tracking_uri is None or not env.publishes:
            raise ValueError(f"live publishing needs {contract.TRACKING_URI} and {contract.RUN_ID} (or "
                             f"{contract.RUN_TOKEN} and {contract.MLFLOW_EXPERIMENT}) in the environment")
        self.env = env
        self.tracking_uri = env.tracking_uri
        self.trial = trial
        self.rank_dir = pathlib.Path(rank_dir)
        self.settings = settings or TrackingSettings()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._store: Store | None = None
        self._experiment_id: str | None = None
        self._run_id: str | None = env.run_id
        self._away_since: float | None = None
        # One writer per cursor: the final publish waits for a round still in flight after a timed-out join.
        self._publishing = threading.Lock()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"mlflow-rank-{self.env.rank}", daemon=True)
        self._thread.start()

    def stop(self, status: str = schema.FINISHED, timeout_seconds: float = 60.0) -> bool:
        """Stop the thread, publish what is left, end the rank run with `status`; the lowest worker also
        logs the trial summary. False if the store stayed away: the records remain on disk (the rank
        directory), nothing is lost but this pod's view of them."""
        self._stop.set()
        deadline = time.monotonic() + timeout_seconds
        if self._thread is not None:
            self._thread.join(timeout_seconds)
        if not self._publishing.acquire(timeout=max(0.0, deadline - time.monotonic())):
            log.warning("a publishing round is still running after %.0f s; this rank's records remain in %s",
                        timeout_seconds, self.rank_dir)
            return False
        try:
            self._await_run(deadline)
            self._publish(final_status=status)
            self._publish_trial_outputs()
            return True
        except TrackingUnavailable as error:
            log.warning("%s; this rank's records remain in %s", error, self.rank_dir)
            return False
        except Exception:  # noqa: BLE001 - a rank that trained must not fail because tracking did; logged
            log.exception("publishing rank %d's last records failed; they remain in %s", self.env.rank, self.rank_dir)
            return False
        finally:
            self._publishing.release()

    def finish(self, status: str, wait_seconds: float, *, clock=time.monotonic, sleep=time.sleep) -> bool:
        """`stop`, tried again until MLflow takes every record or `wait_seconds` pass: a rank that finished
        while the server was away holds its pod (and so its trial's success) until its records are in. A line
        every round says what waits; False if the records are still not all published at the end."""
        deadline = clock() + wait_seconds
        started = clock()
        while True:
            remaining = deadline - clock()
            if self.stop(status, timeout_seconds=max(1.0, min(60.0, remaining))):
                if clock() - started > 1.0:
                    log.info("MLflow took this rank's last records after %.0f s", clock() - started)
                return True
            published, total = self.published()
            log.warning("%s", unpublished.waiting_line(self.env.rank, published, total, self.shown_uri,
                                                       clock() - started, wait_seconds))
            if clock() >= deadline:
                return False
            sleep(max(0.0, min(self.settings.live_interval_seconds * 3, deadline - clock())))

    @property
    def shown_uri(self) -> str:
        """The tracking server's URI as logs may show it (credentials masked)."""
        return redaction.redact(self.tracking_uri)

    @property
    def run_id(self) -> str | None:
        """The trial run's id: given, or found by its token; None while it was never found."""
        return self._run_id

    def published(self) -> tuple[int, int]:
        """(iterations published, iterations recorded) of this rank, from its cursor and its record file."""
        cursor = Cursor.load(cursor_path_for(self.rank_dir, self.tracking_uri))
        path = self.rank_dir / layout.ITERATIONS_FILE
        recorded = sum(1 for _ in path.open("rb")) if path.is_file() else 0
        return cursor.records, recorded

    def _loop(self) -> None:
        while not self._stop.wait(self.settings.live_interval_seconds):
            try:
                with self._publishing:
                    self._publish()
                if self._away_since is not None:
                    log.info("MLflow is back after %.0f s; spooled records sent", time.time() - self._away_since)
                    self._away_since = None
            except TrackingUnavailable as error:
                if self._away_since is None:
                    self._away_since = time.time()
                    log.warning("%s, records wait in %s", error, self.rank_dir)
            except Exception:  # noqa: BLE001 - never let a tracking bug kill training; logged, retried next round
                log.exception("publishing rank %d's records failed", self.env.rank)

    def _connect(self) -> tuple[Store, str, str]:
        """The store, the MLflow experiment and the trial run; RunNotCreated while a run given by token is not there."""
        if self._store is None:
            self._store = Store(self.tracking_uri, self.settings)
        if self._run_id is None:  # then env.publishes says the experiment and token are given
            name, token = self.env.mlflow_experiment, self.env.run_token
            experiment_id = self._store.experiment_id(name) if name else None
            found = experiment_id and token and self._store.find_run(experiment_id, token)
            if not found:
                raise RunNotCreated(f"the trial's MLflow run (token {self.env.run_token}) does not exist yet: MLflow "
                                    "was away when this pod was made, and the operator creates it when MLflow answers")
            self._run_id, self._experiment_id = found, experiment_id
            log.info("found the trial's MLflow run %s by its token", found)
        if self._experiment_id is None:
            self._experiment_id = self._store.experiment_of(self._run_id)
        return self._store, self._experiment_id, self._run_id

    def _await_run(self, deadline: float) -> None:
        """At the end, give a run still to be created until `deadline` to appear (the next step raises if not)."""
        while time.monotonic() < deadline:
            try:
                self._connect()
                return
            except RunNotCreated:
                time.sleep(min(self.settings.live_interval_seconds, max(0.0, deadline - time.monotonic())))
            except TrackingUnavailable:
                return

    def _publish(self, final_status: str | None = None) -> int:
        store, experiment_id, run_id = self._connect()
        role = self.env.role
        slot = self.trial.slots()[self.env.rank]
        rank_publisher = publisher.RankPublisher(store, self.rank_dir, experiment_id, run_id,
                                                 self.trial.name, self.env.rank, role, node=self.env.node_name,
                                                 attempt=self.env.attempt, pod=slot.hostname,
                                                 local_rank=slot.local_rank)
        return rank_publisher.publish(final_status, time.time() if final_status else None)

    def _publish_trial_outputs(self) -> None:
        """This rank's trace and layer timings on the trial run; the trial summary and series if this rank wrote
        them."""
        store, _, run_id = self._connect()
        # The trial-level cursor lives beside the rank's, so it is this rank's own and never shared.
        cursor = Cursor.load(self.rank_dir / "mlflow-cursor-trial.json")
        rank = self.env.rank
        publisher.artifact_once(store, cursor, run_id, self.rank_dir / layout.TRACE_FILE, "traces",
                                 f"rank-{rank}.trace.json")
        publisher.artifact_once(store, cursor, run_id, self.rank_dir / layout.LAYERS_FILE, "layers",
                                 f"rank-{rank}.layers.json")
        publisher.artifact_once(store, cursor, run_id, self.rank_dir / layout.PROFILE_FILE, "traces",
                                 f"rank-{rank}.profile.json")
        trial_dir = self.rank_dir.parent
        if not self.writes_trial_outputs or not (trial_dir / layout.SUMMARY_FILE).is_file():
            return
        publisher.summary_once(store, cursor, run_id, trial_dir, int(time.time() * 1000))

    @property
    def writes_trial_outputs(self) -> bool:
        """Whether this rank is the lowest worker, which writes the trial's summary and series (runtime/main.py) and
        so alone logs them: ranks sharing an output directory (local processes) see that file too."""
        return self.env.rank == min((s.rank for s in self.trial.worker_slots()), default=-1)
