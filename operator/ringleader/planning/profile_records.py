"""A trial's records as a ModelProfile: a trial directory of `ringleader run` (or one of its rank directories), read
as `ringleader whatif` and `ringleader predict` read it (models/profile.py), so all three take the same numbers.

The rank is the trial's lowest worker rank with a layers.json (a rank directory: that rank). Its gradients are
layers.json's medians over the traced iterations, stretched to the rank's median time/backward after warm-up
(profile.of_rank); the iteration is its median outside communication, waiting, encoding and evaluation
(profile.compute); forward and update are the medians of time/forward and time/update. `ringleader profile` records
a one-worker trial and reads it here.
"""

from __future__ import annotations

import datetime
import json
import math
import pathlib
import re
import statistics
from typing import Any, Mapping, Sequence

import pydantic

from ringleader.models import profile as profile_
from ringleader.models import recorded
from ringleader.api import constants
from ringleader.api.trial import Trial
from ringleader.contract import keys, layout
from ringleader.contract import records as records_
from ringleader.planning.model_profile import (MIB, TEXT_CAP_BYTES, TRACE_CAP_BYTES, ModelProfile, ProfileError,
                                               is_number, read_bytes, shown, text)

LAYERS_CAP_BYTES = 16 * MIB
"""LAYERS_CAP_BYTES bounds a layers.json: RINGLEADER_TRACE_ITERATIONS iterations of every parameter's ready time."""
LOG_HEAD_BYTES = 256 * 1024
"""LOG_HEAD_BYTES of a rank's stdout are searched for the line naming its device (printed before training)."""
DEVICE_LINE = re.compile(r"^rank \d+ \(.*\) on (\S+), (\d+) thread", re.MULTILINE)
APART = (keys.TIME_CODEC, keys.TIME_EVAL)
"""APART: the phases left out of the compute besides communication and waiting: encoding exists only to communicate,
and an evaluation every K iterations is the experiment's, not the model's iteration."""
PROVENANCE_KEYS = ("host", "cpus", "cpuQuota", "ringleader", "torch", "python", "fileSha256")
"""PROVENANCE_KEYS: what a run's session.json says of where it ran that a profile keeps (never its tracking URI or
command line)."""
TIMES = (keys.TIME_DATA, keys.TIME_FORWARD, keys.TIME_BACKWARD, keys.TIME_COMM, keys.TIME_WAIT, keys.TIME_UPDATE,
         keys.TIME_CODEC, keys.TIME_EVAL, keys.TIME_OTHER, keys.TIME_ITERATION)


def from_directory(path: pathlib.Path) -> ModelProfile:
    trial_dir, rank = _where(path)
    trial = _trial(trial_dir) if trial_dir is not None else None
    rank_dir = path if trial_dir is None else layout.rank_dir(trial_dir, _rank(trial_dir, trial, rank))
    number = int(rank_dir.name.removeprefix("rank-")) if layout.RANK_DIR_PATTERN.match(rank_dir.name) else 0
    layers = _layers(rank_dir / layout.LAYERS_FILE)
    iterations = _iterations(rank_dir / layout.ITERATIONS_FILE)
    counted = _worker_records(iterations)
    if not counted:
        raise ProfileError(rank_dir / layout.ITERATIONS_FILE, "no worker iteration after warm-up; take a trial that "
                                                              "ran past model.warmupIterations")
    try:
        profile = profile_.of_rank(layers, counted)
        iteration = profile_.compute({number: counted}, APART).median_seconds
    except (ValueError, KeyError, TypeError) as error:
        raise ProfileError(rank_dir / layout.LAYERS_FILE, f"not what the runtime writes: {shown(str(error))}; take "
                                                          "the rank directory of a trial that finished") from None
    backward = profile.backward_seconds
    profile = profile_.Profile(tuple(_within(g, backward) for g in profile.gradients), backward)
    forward, update = (statistics.median(float(r.get(key) or 0.0) for r in counted)
                       for key in (keys.TIME_FORWARD, keys.TIME_UPDATE))
    # A median of the whole holds at least the medians of its parts, give or take their noise.
    iteration = max(iteration, forward + backward + update)
    return ModelProfile(profile, iteration, forward, update,
                        trial.spec.model.batch_size if trial is not None else None,
                        rank_device(rank_dir.parent, number),
                        _source(path, trial, number, rank is None, len(counted), len(layers["iterations"])),
                        _provenance(trial_dir, trial, number))


def _where(path: pathlib.Path) -> tuple[pathlib.Path | None, int | None]:
    """(the trial directory, the rank asked for: None for the trial's choice); the trial directory is None for a rank
    directory outside its trial."""
    if (path / layout.TRIAL_FILE).is_file():
        return path, None
    if (path / layout.LAYERS_FILE).is_file() or (path / layout.ITERATIONS_FILE).is_file():
        match = layout.RANK_DIR_PATTERN.match(path.name)
        if match and (path.parent / layout.TRIAL_FILE).is_file():
            return path.parent, int(match.group(1))
        return None, None
    if (path / layout.SESSION_FILE).is_file():
        trials = sorted(child.name for child in path.iterdir() if (child / layout.TRIAL_FILE).is_file())
        named = ", ".join(str(path / name) for name in trials[:4]) + (", ..." if len(trials) > 4 else "")
        raise ProfileError(path, "is a run directory of `ringleader run`, which may hold several trials: give one "
                                 f"trial's directory ({named or 'it has none yet'})")
    raise ProfileError(path, "is a directory without a trial: give a trial directory of `ringleader run` (it holds "
                             "trial.json), one of its rank-<r> directories, or a profile file")


def _trial(trial_dir: pathlib.Path) -> Trial:
    path = trial_dir / layout.TRIAL_FILE
    data = read_bytes(path, TEXT_CAP_BYTES, "trial.json")
    try:
        return Trial.model_validate_json(data)
    except pydantic.ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        raise ProfileError(path, f"damaged, not a trial ringleader wrote ({where}: {shown(first['msg'])}); take "
                                 "another trial's directory") from None


def _rank(trial_dir: pathlib.Path, trial: Trial | None, asked: int | None) -> int:
    """`asked` once it is a worker's rank, else the lowest worker rank with a layers.json."""
    assert trial is not None, "a trial directory has its trial"
    workers = [slot.rank for slot in trial.slots() if slot.role == constants.ROLE_WORKER]
    if asked is not None:
        if asked not in workers:
            raise ProfileError(layout.rank_dir(trial_dir, asked), f"rank {asked} of trial {trial.name} is not a "
                                                                  f"worker: take a worker's, rank {workers[0]}")
        return asked
    profiled = [rank for rank in workers if (layout.rank_dir(trial_dir, rank) / layout.LAYERS_FILE).is_file()]
    if not profiled:
        raise ProfileError(trial_dir, f"no worker rank of trial {trial.name} has a layers.json: workers trace backward "
                                      "after warm-up when RINGLEADER_TRACE_ITERATIONS > 0 (default 20); take a trial "
                                      "that ran past warm-up")
    return profiled[0]


def _layers(path: pathlib.Path) -> dict[str, Any]:
    """A layers.json document, once its shape is what profile.from_layers reads."""
    if not path.is_file():
        raise ProfileError(path, "missing: this rank traced no iteration (RINGLEADER_TRACE_ITERATIONS > 0, and more "
                                 "iterations than model.warmupIterations)")
    try:
        document = json.loads(text(path, read_bytes(path, LAYERS_CAP_BYTES, "layers.json")))
    except json.JSONDecodeError as error:
        raise ProfileError(path, f"not valid JSON: {error.msg}; the rank may have died writing it", error.lineno) \
            from None
    except (ValueError, RecursionError) as error:
        raise ProfileError(path, f"not valid JSON: {shown(str(error))}") from None
    parameters = document.get("parameters") if isinstance(document, dict) else None
    iterations = document.get("iterations") if isinstance(document, dict) else None
    if not isinstance(parameters, list) or not all(isinstance(p, dict) and isinstance(p.get("name"), str)
                                                   and is_number(p.get("bytes")) and p["bytes"] >= 0
                                                   for p in parameters):
        raise ProfileError(path, "its `parameters` are not the runtime's [{name, bytes, shape}]: take a rank "
                                 "directory ringleader wrote")
    if not isinstance(iterations, list) or not iterations:
        raise ProfileError(path, "no traced iteration: run more than model.warmupIterations iterations, with "
                                 "RINGLEADER_TRACE_ITERATIONS > 0")
    for iteration in iterations:
        if not (isinstance(iteration, dict) and all(is_number(iteration.get(k)) for k in ("backwardStart",
                                                                                          "backwardEnd"))
                and isinstance(iteration.get("ready"), dict)
                and all(is_number(v) for v in iteration["ready"].values())):
            raise ProfileError(path, "a traced iteration is not the runtime's {backwardStart, backwardEnd, ready}: "
                                     "take a rank directory ringleader wrote")
    return document


def _iterations(path: pathlib.Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise ProfileError(path, "missing: the rank recorded no iteration; take a trial that ran")
    if path.stat().st_size > TRACE_CAP_BYTES:
        raise ProfileError(path, f"larger than {TRACE_CAP_BYTES // MIB} MiB: take a shorter trial's records")
    try:
        return records_.read_iterations(path)
    except RecursionError:
        raise ProfileError(path, "a line nests too deep to be a record: take records ringleader wrote") from None
    except OSError as error:
        raise ProfileError(path, f"cannot be read: {error.strerror or error}; check its permissions") from None


def _worker_records(iterations: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The worker's records after warm-up whose times are all finite and not negative, and whose iteration took
    time (a NaN would poison every median)."""
    return [dict(r) for r in recorded.measured(list(iterations), constants.ROLE_WORKER)
            if records_.is_worker_record(r) and is_number(r.get(keys.TIME_ITERATION)) and r[keys.TIME_ITERATION] > 0
            and all(r.get(key) is None or (is_number(r[key]) and r[key] >= 0) for key in TIMES)]


def _within(gradient: profile_.Gradient, backward: float) -> profile_.Gradient:
    """A gradient ready within backward: a median ready time may fall outside the median backward by their noise."""
    ready = min(max(0.0, gradient.ready_seconds), backward)
    return gradient if ready == gradient.ready_seconds else profile_.Gradient(gradient.name, gradient.size_bytes, ready,
                                                                             gradient.shape)


def rank_device(trial_dir: pathlib.Path, rank: int) -> str:
    """What the rank trained on, as its log's first lines say ("cpu (1 thread)", "cuda:0"); "unknown" without it."""
    stdout, _ = layout.log_paths(trial_dir, rank)
    try:
        with open(stdout, "rb") as handle:
            head = handle.read(LOG_HEAD_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return "unknown"
    found = DEVICE_LINE.search(head)
    if found is None:
        return "unknown"
    device, threads = found.group(1), int(found.group(2))
    return device if device.startswith("cuda") else f"{device} ({threads} thread{'s' * (threads != 1)})"


def _source(path: pathlib.Path, trial: Trial | None, rank: int, chosen: bool, measured: int, traced: int) -> str:
    numbers = f"{measured} iterations after warm-up, {traced} traced"
    if trial is None:
        return f"{path}: records of rank {rank} ({numbers})"
    workers = len(trial.worker_slots())
    said = (f"{path}: trial {trial.name} ({trial.spec.architecture.value}, {workers} worker{'s' * (workers != 1)}), "
            f"rank {rank}{', the lowest worker rank with a layers.json' if chosen else ''} ({numbers})")
    if workers > 1:
        said += "; its backward shared the machine with communication: a one-worker trial (`ringleader profile`) " \
                "measures it alone"
    return said


def _provenance(trial_dir: pathlib.Path | None, trial: Trial | None, rank: int) -> dict[str, Any]:
    """Where the records were taken: the run's machine and versions (session.json), the trial, the rank, the date."""
    found: dict[str, Any] = {}
    if trial_dir is not None:
        session = _small_json(trial_dir.parent / layout.SESSION_FILE)
        provenance = session.get("provenance") if isinstance(session, dict) else None
        if isinstance(provenance, dict):
            found.update({key: provenance[key] for key in PROVENANCE_KEYS
                          if isinstance(provenance.get(key), (str, int, float))})
        outcome = _small_json(trial_dir / layout.OUTCOME_FILE)
        started = outcome.get("startTime") if isinstance(outcome, dict) else None
        if is_number(started) and 0 < started < 1e11 and math.isfinite(started):
            found["date"] = datetime.datetime.fromtimestamp(
                started, datetime.timezone.utc).isoformat(timespec="seconds")
    if trial is not None:
        found.update(trial=trial.name, experiment=trial.experiment)
    found["rank"] = rank
    return found


def _small_json(path: pathlib.Path) -> Any:
    """The document of a small file the launcher wrote beside the records, or None where it is absent or damaged: it
    only adds to the provenance."""
    try:
        return json.loads(read_bytes(path, TEXT_CAP_BYTES, path.name)) if path.is_file() else None
    except (ProfileError, ValueError, RecursionError):
        return None
