"""Sessions whose `ringleader run` died without recording their end (SIGKILL, the OOM killer, a full disk): found and
closed.

The launcher holds an exclusive lock on <session>/launcher.lock for as long as it lives (`hold`); the
kernel releases it when the process ends, however it ends. A session whose outcome still says RUNNING
while nobody holds its lock was abandoned: `close` restores its ranks' last records from their
journals and records every trial that was still running, and the session, as ended, so that publishing
ends their MLflow runs instead of leaving them RUNNING forever. replay.py (`ringleader publish`) and the
next `ringleader run` in the same output directory call it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pathlib
import time
from typing import Iterator

from ringleader.api.trial import Trial
from ringleader.contract import layout, records
from ringleader.tracking import schema

LOCK_FILE = "launcher.lock"
REASON = "LauncherLost"
MESSAGE = ("`ringleader run` ended without recording this end (killed, or out of disk space); "
           "closed from the records on disk by a later `ringleader run` or `ringleader publish`")


def hold(directory: pathlib.Path) -> int:
    """Take the session's lock for the life of this process (the caller keeps the descriptor open)."""
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


@contextlib.contextmanager
def _unattended(directory: pathlib.Path) -> Iterator[bool]:
    """True, with the lock held until the block ends, when no launcher holds the session's lock."""
    try:
        fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:  # the launcher died before it took the lock
        yield True
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        yield False
        return
    try:
        yield True
    finally:
        os.close(fd)


def is_running(directory: pathlib.Path) -> bool:
    """Whether a launcher alive now holds the session's lock."""
    with _unattended(directory) as unattended:
        return not unattended


def close_if_abandoned(directory: pathlib.Path) -> bool:
    """Close the session if its launcher died before recording its end; whether it did."""
    outcome = layout.read_outcome(directory)
    if outcome is not None and outcome.status in schema.TERMINAL_STATUSES:
        return False
    with _unattended(directory) as unattended:
        if not unattended:
            return False
        started = outcome.start_time if outcome else (directory / layout.SESSION_FILE).stat().st_mtime
        ended = [_close_trial(trial_dir) for trial_dir in sorted(directory.iterdir())
                 if (trial_dir / layout.TRIAL_FILE).is_file()]
        # FAILED when a trial failed before the launcher died; KILLED otherwise, as trials that were stopped.
        status = schema.FAILED if any(o.status == schema.FAILED for o in ended) else schema.KILLED
        end_time = max([o.end_time for o in ended if o.end_time] + [started])
        layout.write_outcome(directory, layout.Outcome(status, started, end_time, REASON, MESSAGE))
        return True


def _close_trial(trial_dir: pathlib.Path) -> layout.Outcome:
    """The trial's outcome, recorded as KILLED if it was still running; its ranks' records restored either way."""
    for rank_dir in layout.rank_dirs(trial_dir).values():
        records.restore(rank_dir)
    outcome = layout.read_outcome(trial_dir)
    if outcome is not None and outcome.status in schema.TERMINAL_STATUSES:
        return outcome
    trial = layout.read_json(trial_dir / layout.TRIAL_FILE) or {}
    roles = _roles(trial)
    ranks = [layout.RankOutcome(rank, roles.get(rank, "unknown"), schema.KILLED)
             for rank in layout.rank_dirs(trial_dir)]
    started = outcome.start_time if outcome else (trial_dir / layout.TRIAL_FILE).stat().st_mtime
    closed = layout.Outcome(schema.KILLED, started, _last_written(trial_dir) or time.time(), REASON, MESSAGE, ranks)
    layout.write_outcome(trial_dir, closed)
    return closed


def _roles(trial: dict) -> dict[int, str]:
    try:
        return {slot.rank: slot.role for slot in Trial.model_validate(trial).slots()}
    except ValueError:
        return {}


def _last_written(trial_dir: pathlib.Path) -> float | None:
    """When the trial's ranks last wrote anything (a heartbeat, a record): about when they died."""
    times = [path.stat().st_mtime for rank_dir in layout.rank_dirs(trial_dir).values()
             for path in rank_dir.iterdir() if path.is_file()]
    return max(times, default=None)
