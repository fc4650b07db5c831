"""`ringleader publish DIR`: replays into MLflow whatever `ringleader run` sessions left unpublished.

Records stay on disk when the tracking server is away; this publishes what is missing and
nothing twice (the cursors of publisher.py, one set per store), into the store the session was run
against unless another URI is given. A session whose launcher died is closed first (abandoned.py).
A session run against a URI with credentials kept it redacted: it is published only with the URI
given again (credentials come from the user at publish time, never from disk). Called by
commands/publish.py and launch/cli.py.
"""

from __future__ import annotations

import dataclasses
import pathlib

import mlflow.exceptions

from ringleader.contract import layout, redaction
from ringleader.tracking import abandoned, sessions
from ringleader.tracking import settings as settings_
from ringleader.tracking import store as store_


@dataclasses.dataclass(frozen=True)
class Replayed:
    sessions: list[sessions.SessionResult]
    unavailable: list[tuple[pathlib.Path, str]]
    """unavailable lists the sessions whose store did not answer or refused them, with the error: try again later."""
    closed: list[pathlib.Path] = dataclasses.field(default_factory=list)
    """closed lists the sessions whose launcher had died before recording their end (abandoned.py)."""

    @property
    def ok(self) -> bool:
        return not self.unavailable and not any(session.damaged for session in self.sessions)


def publish_dir(directory: str | pathlib.Path, tracking_uri: str | None = None,
                settings: settings_.TrackingSettings | None = None) -> Replayed:
    """Publish every session in `directory` (a session directory, or one holding sessions, such as
    ringleader-runs/). Raises FileNotFoundError when there is none."""
    found = layout.find_sessions(pathlib.Path(directory))
    if not found:
        raise FileNotFoundError(f"{directory} holds no session written by `ringleader run` (no session.json)")
    settings = settings or settings_.TrackingSettings()
    stores: dict[str, store_.Store] = {}
    done, unavailable = [], []
    closed = []
    for path in found:
        if abandoned.close_if_abandoned(path):
            closed.append(path)
        session = layout.Session.load(path)
        uri = settings_.absolute_uri(tracking_uri) if tracking_uri else session.tracking_uri
        if redaction.is_redacted(uri):
            unavailable.append((path, f"its MLflow URI {uri} carried credentials, which are never stored: publish "
                                      "with --tracking-uri and the URI in full (or without them and "
                                      "MLFLOW_TRACKING_USERNAME/PASSWORD or MLFLOW_TRACKING_TOKEN set)"))
            continue
        store = stores.get(uri) or stores.setdefault(uri, store_.Store(uri, settings))
        try:
            done.append(sessions.publish_session(store, session))
        except store_.TrackingUnavailable as error:
            unavailable.append((path, str(error)))
        except mlflow.exceptions.MlflowException as error:  # refused: a wrong URI, no permission;
            # the next session may pass
            unavailable.append((path, f"MLflow at {uri} refused it: {store_.first_line(error)}"))
    return Replayed(done, unavailable, closed)
