"""The launcher's side of MLflow: it is the one writer, publishing each trial as it starts and ends; used by sweep.py.

When the store does not answer, trials go on, the records stay in the session directory, and the
user is told once how to replay them (`ringleader publish DIR`); each later trial tries again.
"""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Callable

import mlflow.exceptions

from ringleader.contract import layout, redaction
from ringleader.tracking import publisher, sessions
from ringleader.tracking.settings import TrackingSettings
from ringleader.tracking.store import Store, TrackingUnavailable


class Tracker:
    def __init__(self, session: layout.Session, settings: TrackingSettings,
                 say: Callable[[str], None]):
        self.session = session
        self.settings = settings
        self.say = say
        self.store: Store | None = None
        self.experiment_id: str | None = None
        self.parent_run_id: str | None = None
        self.away: str | None = None
        """away is the last error while the store does not answer; None once it does."""

    def _attempt(self, what: str, action: Callable[[Store, str, str], object]) -> bool:
        """Run `action(store, experiment id, parent run id)`, opening the session's experiment and run first."""
        try:
            if self.store is None:
                self.store = Store(self.session.tracking_uri, self.settings)
            store = self.store
            if self.experiment_id is None or self.parent_run_id is None:
                self.experiment_id, self.parent_run_id, _ = sessions.open_session(store, self.session)
            action(store, self.experiment_id, self.parent_run_id)
        except (TrackingUnavailable, mlflow.exceptions.MlflowException) as error:
            # Away, or refusing (a wrong URI, no permission): either way the trials go on and the records
            # wait on disk; publishing must never be what stops an experiment.
            if self.away is None:
                # Known to be away: later tries make one attempt each instead of holding up every trial's
                # end with the full backoff; the first success restores the retries.
                if self.store is not None:
                    self.store.settings = dataclasses.replace(self.settings, attempts=1)
                verb = "did not answer" if isinstance(error, TrackingUnavailable) else "refused"
                self.say(f"MLflow {verb} ({what}); records stay in {self.session.directory} and are "
                         f"published after the next trial, or with `ringleader publish {self.session.directory}`: "
                         f"{redaction.redact(str(error))}")
            self.away = str(error)
            return False
        if self.away is not None:
            self.say(f"MLflow answers again; records published ({what})")
            store.settings = self.settings
            self.away = None
        return True

    def open(self) -> bool:
        """The MLflow experiment and parent run of the session."""
        return self._attempt("opening the experiment", lambda *_: None)

    def trial_started(self, trial_dir: pathlib.Path) -> None:
        # The RUNNING trial run (params, trial.json) is a convenience; while the store is away, skip it
        # rather than delay the trial by the retries.
        if self.away is None:
            self._attempt(f"trial {trial_dir.name} started", self._publish_trial(trial_dir))

    def trial_ended(self, trial_dir: pathlib.Path) -> bool:
        return self._attempt(f"trial {trial_dir.name}", self._publish_trial(trial_dir))

    def session_ended(self) -> bool:
        """Everything left: trials not yet published (after an outage), the comparison, the parent's status."""
        return self._attempt("the sweep's comparison", lambda store, *_: sessions.publish_session(store, self.session))

    @staticmethod
    def _publish_trial(trial_dir: pathlib.Path) -> Callable[[Store, str, str], object]:
        return lambda store, experiment_id, parent_run_id: publisher.publish_trial(store, trial_dir, experiment_id,
                                                                                   parent_run_id)
