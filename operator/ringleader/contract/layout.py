"""Where a run's records lie on disk: the layout the launcher writes and the publisher and reports read.

    <session>/session.json              what ran: experiment, tracking URI, trial names (launcher)
    <session>/outcome.json              how the sweep ended (launcher)
    <session>/<trial>/trial.json        the resolved trial (RINGLEADER_TRIAL_FILE)
    <session>/<trial>/outcome.json      how the trial ended, per rank (launcher)
    <session>/<trial>/summary.json      the trial's summary (the lowest worker rank, runtime)
    <session>/<trial>/series.jsonl      the trial's series: per step, its workers together (the same rank)
    <session>/<trial>/logs/rank-<r>.stdout, .stderr   the ranks' output (launcher)
    <session>/<trial>/rank-<r>/         iterations.jsonl, summary.json, trace.json, layers.json (runtime,
                                        format in contract/records.py)
    <session>/launcher.lock             held by the launcher while it lives (tracking/abandoned.py)
    mlflow-cursor-<store>.json in the session, trial and rank directories: what is published, per store
                                        (tracking/cursor.py)
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
from typing import Any

import pydantic

from ringleader import api
from ringleader.api.trial import Trial, bounded_name
from ringleader.contract import environment as contract
from ringleader.contract import records, redaction

SESSION_FILE = "session.json"
OUTCOME_FILE = "outcome.json"
TRIAL_FILE = contract.TRIAL_FILE_NAME
# The runtime's own files (contract/records.py has their format).
SUMMARY_FILE = records.SUMMARY_FILE
SERIES_FILE = records.SERIES_FILE
ITERATIONS_FILE = records.ITERATIONS_FILE
TRACE_FILE = records.TRACE_FILE
LAYERS_FILE = records.LAYERS_FILE
PROFILE_FILE = records.PROFILE_FILE
TOPOLOGY_FILE = "topology.yaml"
LOGS_DIR = "logs"
RANK_DIR_PATTERN = re.compile(r"^rank-(\d+)$")


def rank_dir(trial_dir: pathlib.Path, rank: int) -> pathlib.Path:
    return trial_dir / f"rank-{rank}"


def rank_dirs(trial_dir: pathlib.Path) -> dict[int, pathlib.Path]:
    """The trial's rank directories by rank, in rank order."""
    found = {}
    if trial_dir.is_dir():
        for child in trial_dir.iterdir():
            match = RANK_DIR_PATTERN.match(child.name)
            if match and child.is_dir():
                found[int(match.group(1))] = child
    return dict(sorted(found.items()))


def log_paths(trial_dir: pathlib.Path, rank: int) -> tuple[pathlib.Path, pathlib.Path]:
    logs = trial_dir / LOGS_DIR
    return logs / f"rank-{rank}.stdout", logs / f"rank-{rank}.stderr"


@dataclasses.dataclass
class RankOutcome:
    rank: int
    role: str
    status: str
    """status is the rank's MLflow run status: FINISHED, FAILED or KILLED (stopped by the launcher)."""
    exit_code: int | None = None
    signal: str | None = None


@dataclasses.dataclass
class Outcome:
    """How a trial or a sweep ended (or that it is still running), in MLflow's status words."""

    status: str
    start_time: float
    """start_time in seconds since the epoch."""
    end_time: float | None = None
    reason: str | None = None
    """reason: a word of contract/outcomes.py ("RankFailed", "DeadlineExceeded", "Interrupted", ...), the same
    word the operator writes for the same end."""
    message: str | None = None
    ranks: list[RankOutcome] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status, "startTime": self.start_time, "endTime": self.end_time,
            "reason": self.reason, "message": self.message,
            "ranks": [{"rank": r.rank, "role": r.role, "status": r.status, "exitCode": r.exit_code,
                       "signal": r.signal} for r in self.ranks],
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Outcome:
        return cls(
            status=document["status"], start_time=document["startTime"], end_time=document.get("endTime"),
            reason=document.get("reason"), message=document.get("message"),
            ranks=[RankOutcome(rank=r["rank"], role=r["role"], status=r["status"], exit_code=r.get("exitCode"),
                               signal=r.get("signal")) for r in document.get("ranks", [])],
        )


def read_json(path: pathlib.Path) -> Any | None:
    """The document, or None when the file is absent or not (yet) valid JSON."""
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


MAX_DIRECTORY_NAME = 100


def directory_name(name: str) -> str:
    """One directory of ours for `name` (an experiment's, which MLflow tags and experiment files may set to
    anything): safe characters, never '.', '..' or hidden, so it stays below the directory it is joined to;
    a long one keeps a prefix and a hash."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._-")
    return bounded_name(safe or "experiment", MAX_DIRECTORY_NAME)


class DamagedFile(ValueError):
    """A file of a run directory that ringleader did not write as it is (edited, truncated): str() is one line."""


def read_trial(trial_dir: pathlib.Path) -> Trial:
    """The trial.json of a trial directory, or DamagedFile naming it and its first problem."""
    path = trial_dir / TRIAL_FILE
    try:
        return Trial.model_validate_json(path.read_bytes())
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        raise DamagedFile(f"{path}: damaged, not a trial ringleader wrote ({where}: {first['msg']}): "
                          "this trial is left out") from None


def read_outcome(directory: pathlib.Path) -> Outcome | None:
    document = read_json(directory / OUTCOME_FILE)
    return Outcome.from_json(document) if document else None


def write_outcome(directory: pathlib.Path, outcome: Outcome) -> None:
    records.write_json(directory / OUTCOME_FILE, outcome.to_json())


@dataclasses.dataclass(frozen=True)
class Session:
    """What `ringleader run` wrote in session.json: enough to publish the session again from anywhere.

    `tracking_uri` is the URI in full while the run goes on; session.json keeps it redacted (credentials
    are never written to disk), so a session loaded from there may need the URI given again to publish."""

    directory: pathlib.Path
    experiment: api.DistributedTrainingExperiment
    tracking_uri: str
    trials: list[str]
    source: str | None = None
    start_times: list[float] = dataclasses.field(default_factory=list)
    """start_times: when `ringleader run` started the session, then each `--resume` of it (seconds since the epoch)."""
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)
    """provenance: the machine, load, versions and command of its latest start (contract/provenance.py)."""

    def to_json(self) -> dict[str, Any]:
        return {"experiment": self.experiment.model_dump(mode="json", by_alias=True, exclude_none=True),
                "trackingUri": redaction.redact(self.tracking_uri), "trials": self.trials, "source": self.source,
                "startTimes": self.start_times, "provenance": self.provenance}

    @classmethod
    def load(cls, directory: pathlib.Path) -> Session:
        document = read_json(directory / SESSION_FILE)
        if not isinstance(document, dict):
            raise FileNotFoundError(f"{directory / SESSION_FILE} is missing or unreadable: "
                                    "is this a directory written by `ringleader run`?")
        return cls(directory=directory, experiment=api.parse(document["experiment"], str(directory)),
                   tracking_uri=document["trackingUri"], trials=list(document["trials"]),
                   source=document.get("source"), start_times=list(document.get("startTimes") or []),
                   provenance=dict(document.get("provenance") or {}))

    def save(self) -> None:
        records.write_json(self.directory / SESSION_FILE, self.to_json())


def experiment_file(source: str) -> str | None:
    """What to do instead, where `source` is an experiment file given to a command that reads its runs (report,
    predict, whatif): the same words from each."""
    path = pathlib.Path(source)
    if path.suffix.lower() not in (".yaml", ".yml") or not path.is_file():
        return None
    return (f"{source}: an experiment file, not a run: run it first (`ringleader run {source}`), then name its run "
            "directory, or ringleader-runs/ for the newest")


def missing_path(source: str) -> str | None:
    """"no such file or directory" where `source` can only be a path and names nothing: absolute, relative to here
    or home, or under a directory that exists here. An MLflow experiment name ("default/quickstart") or run id is
    none of these, so it is looked up in MLflow instead (seconds: MLflow is imported for it)."""
    path = pathlib.Path(source).expanduser()
    first = source.split("/", 1)[0]
    meant = source.startswith(("/", "./", "../", "~")) or ("/" in source and first not in ("", ".") and
                                                            pathlib.Path(first).is_dir())
    return f"{source}: no such file or directory" if meant and not path.exists() else None


def find_sessions(directory: pathlib.Path) -> list[pathlib.Path]:
    """`directory` itself if it is a session, else the sessions directly inside it, oldest first: by the latest
    start each recorded (a resumed run is as new as its resumption), never by name, which an experiment's name
    leads and the start time only ends."""
    directory = pathlib.Path(directory)
    if (directory / SESSION_FILE).is_file():
        return [directory]
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is not a directory")
    return sorted((child for child in directory.iterdir() if (child / SESSION_FILE).is_file()),
                  key=lambda child: (last_started(child), child.name))


def last_started(session_dir: pathlib.Path) -> float:
    """When the session last started, in seconds since the epoch: the latest of session.json's `startTimes` (one per
    `ringleader run` or `--resume`) and outcome.json's start; session.json's modification time for a session that
    recorded neither."""
    document = read_json(session_dir / SESSION_FILE)
    starts = [float(t) for t in (document.get("startTimes") or []) if isinstance(t, (int, float))] \
        if isinstance(document, dict) else []
    outcome = read_json(session_dir / OUTCOME_FILE)
    if isinstance(outcome, dict) and isinstance(outcome.get("startTime"), (int, float)):
        starts.append(float(outcome["startTime"]))
    return max(starts) if starts else (session_dir / SESSION_FILE).stat().st_mtime
