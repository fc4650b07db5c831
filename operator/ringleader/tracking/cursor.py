"""Publish cursors: small JSON files beside the records saying what already reached which MLflow store; used by
publisher.py.

Written atomically (temporary file, fsync, rename) after every batch that MLflow accepted, so a crash
or an outage at any point replays at most the batch in flight, and the store drops exact repeats
of that (metrics carry deterministic timestamps).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import time
import urllib.parse
import uuid

FILE_PATTERN = "mlflow-cursor-*.json"


def path_for(directory: pathlib.Path, tracking_uri: str) -> pathlib.Path:
    """directory/mlflow-cursor-<12 hex digits>.json: one cursor per store, so publishing the same records into a
    second store (`ringleader publish DIR --tracking-uri ...`) starts there from nothing. The digits hash the URI
    without its user and password: a rotated password still names the same store, and no secret is on disk."""
    parts = urllib.parse.urlsplit(tracking_uri)
    netloc = parts.netloc.rpartition("@")[2]
    key = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return directory / f"mlflow-cursor-{hashlib.sha256(key.encode()).hexdigest()[:12]}.json"


@dataclasses.dataclass
class Cursor:
    path: pathlib.Path
    token: str
    """token tags the run this cursor publishes into; saved before the run is created (see Store.create_run_once)."""
    created_ms: int
    """created_ms is when the rank started (or, failing that, when publishing did), in ms since the epoch."""
    run_id: str | None = None
    offset: int = 0
    """offset is how many bytes of iterations.jsonl are published (always at a line end)."""
    records: int = 0
    """records is how many lines those bytes hold."""
    elapsed_ms: float = 0.0
    """elapsed_ms is the sum of those records' iteration times. A record's timestamp is created_ms plus the
    elapsed time before it: close to when it happened, and the same on every replay, so the store can
    recognize a repeated point."""
    done: list[str] = dataclasses.field(default_factory=list)
    """done names the one-shot steps already published: "params", "summary", "artifact:<name>", "status"."""
    extra: dict[str, str] = dataclasses.field(default_factory=dict)
    """extra ids kept by the owner (a session cursor keeps its experiment id here)."""

    @classmethod
    def load(cls, path: pathlib.Path, start_time: float | None = None) -> Cursor:
        """The saved cursor, or a fresh one (not yet saved) starting at `start_time` (seconds; default now)."""
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            started = time.time() if start_time is None else start_time
            return cls(path=path, token=uuid.uuid4().hex, created_ms=int(started * 1000))
        return cls(
            path=path, token=state["token"], created_ms=state["createdMs"], run_id=state.get("runId"),
            offset=state.get("offset", 0), records=state.get("records", 0), elapsed_ms=state.get("elapsedMs", 0.0),
            done=list(state.get("done", [])),
            extra=dict(state.get("extra", {})),
        )

    def save(self) -> None:
        state = {"token": self.token, "createdMs": self.created_ms, "runId": self.run_id, "offset": self.offset,
                 "records": self.records, "elapsedMs": self.elapsed_ms, "done": self.done, "extra": self.extra}
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with open(temporary, "w") as handle:
            json.dump(state, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)

    def is_done(self, step: str) -> bool:
        return step in self.done

    def mark_done(self, step: str) -> None:
        if step not in self.done:
            self.done.append(step)
        self.save()
