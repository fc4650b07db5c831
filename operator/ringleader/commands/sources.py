"""What SOURCE names for `ringleader whatif` and `ringleader predict`: a trial, or a run's or a sweep's trials.

SOURCE is a trial directory of `ringleader run`, a run directory (or the directory holding runs: the
newest is taken), or in MLflow a trial run id, a sweep run id or an experiment name or id (its newest
sweep run), looked up as `ringleader report` does. Importing this module is cheap: MLflow is imported
only when a lookup needs it.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
from typing import TextIO

from ringleader.models.results import TrialResult
from ringleader.contract import layout, redaction


@dataclasses.dataclass(frozen=True)
class Found:
    """The trials SOURCE names, what they were found in, and whether SOURCE named one trial or a run or sweep."""

    trials: list[TrialResult]
    where: str
    single: bool


def add_profile_arguments(parser: argparse.ArgumentParser, other_command: str) -> None:
    """--rank and --tracking-uri as predict and whatif both take them: one rule for the rank they read."""
    parser.add_argument("--rank", type=int, metavar="R",
                        help="the worker rank whose backward is the profile (default: the lowest worker rank with a "
                             f"layers.json, as `ringleader {other_command}` takes it)")
    parser.add_argument("--tracking-uri", metavar="URI",
                        help="MLflow tracking URI to look SOURCE up in (default: $MLFLOW_TRACKING_URI, else "
                             "sqlite:///mlflow.db in this directory)")


def resolve(source: str, tracking_uri: str | None, out: TextIO, tried: str = "not a run directory") -> Found:
    """The trials of `source`; a sentence on `out` (the caller's stderr: a notice, not a result) when a directory of
    runs had its newest run taken, or an experiment its newest sweep run.

    `tried` says what else the caller already ruled out, for the message when MLflow has nothing either.
    Raises SourceNotFound (a LookupError) or OSError: FileNotFoundError, at once, for a path that names nothing."""
    missing = layout.missing_path(source)
    if missing:
        raise FileNotFoundError(missing)
    from ringleader.tracking import reading

    path = pathlib.Path(source)
    if path.is_dir() and (path / layout.TRIAL_FILE).is_file():
        return Found([reading.trial_from_directory(path)], str(path), True)
    if path.is_dir():
        directory, picked = reading.session_directory(path)
        if picked:
            print(picked, file=out)
        return Found(reading.from_directory(directory).trials, str(directory), False)
    store = reading.lookup_store(tracking_uri, source, tried)
    trial = reading.trial_from_mlflow(store, source)
    if trial is not None:
        return Found([trial], f"trial run {source}", True)
    try:
        sweep, run_id = reading.from_mlflow(store, source)
    except reading.SourceNotFound as error:
        raise reading.SourceNotFound(f"{source}: {tried}; in MLflow at {redaction.redact(store.uri)}: no trial run "
                                     f"{source}; {str(error).removeprefix(source + ': ')}") from None
    picked = reading.picked_sweep(source, run_id)
    if picked:
        print(picked, file=out)
    return Found(sweep.trials, f"sweep run {run_id}", False)
