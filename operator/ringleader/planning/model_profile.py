"""What a model costs on one device, whatever file it came from: `ModelProfile`, and `ProfileError`, the one-line
refusal every reader of a profile raises (planning/profiles.py detects the format; one module per format).

Shared by the readers: reading a file within a size cap (a profile is read whole, so a file past the cap is refused
from its size alone, before a byte of it is read) and the checks of a time or a size every format makes.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import stat
from typing import Any, Mapping

from ringleader.api import reading
from ringleader.models import profile as profile_
from ringleader.models.recorded import is_number

MIB = 1 << 20
TEXT_CAP_BYTES = 4 * MIB
"""TEXT_CAP_BYTES bounds a profile file, a CSV of layers and a trial's layers.json: a model of ten thousand layers fits
in a few hundred kilobytes."""
TRACE_CAP_BYTES = 64 * MIB
"""TRACE_CAP_BYTES bounds a torch.profiler trace (gzip'd: the file, and what it unpacks to) and a rank's
iterations.jsonl: a few dozen profiled steps of a large model; record fewer steps (`schedule(active=...)`) past it."""
SHOWN_CHARACTERS = 60
"""SHOWN_CHARACTERS of a value from the file at most in a message: a hostile file cannot flood the console."""


class ProfileError(ValueError):
    """One line: 'FILE:LINE: what is wrong; how to fix it' (LINE where a line is to blame)."""

    def __init__(self, path: str | os.PathLike, problem: str, line: int | None = None):
        named = str(path)
        # A name holding a newline or another control character is shown escaped: the message stays one line.
        self.path, self.line = named if named.isprintable() else named.encode("unicode_escape").decode(), line
        self.problem = " ".join(problem.split())  # one line, whatever a value from the file held
        super().__init__(f"{self.path}:{line}: {self.problem}" if line is not None else f"{self.path}: {self.problem}")


@dataclasses.dataclass(frozen=True)
class ModelProfile:
    """One worker's iteration with nothing to communicate: its backward as gradients (models.profile.Profile, the
    DAG replay's input) and the phases around it. Equal when the numbers are: `source` says where they were read,
    which differs for the same profile read from two files."""

    profile: profile_.Profile
    """profile: gradients (bytes, ready seconds from backward's start, in parameter order) and backward's length."""
    iteration_seconds: float
    """iteration_seconds: data, forward, backward, update and the loop's own work: the compute per iteration."""
    forward_seconds: float
    update_seconds: float
    batch_size: int | None
    """batch_size: samples per worker per iteration, where known."""
    device: str
    """device: "cpu (AMD EPYC 7B13, 2 threads)", "cuda (NVIDIA H100 80GB HBM3)", or "unknown"."""
    source: str = dataclasses.field(compare=False)
    """source: one console line: the file, its format, the trial and rank or steps it was taken from."""
    provenance: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """provenance: who, when and where: ringleader and torch versions, host, date, the experiment file's sha256."""

    @property
    def backward_seconds(self) -> float:
        return self.profile.backward_seconds

    def summary(self) -> str:
        """One line of its numbers, as `ringleader profile` ends with it."""
        return (f"iteration {1000 * self.iteration_seconds:.3f} ms (forward {1000 * self.forward_seconds:.3f}, "
                f"backward {1000 * self.backward_seconds:.3f}, update {1000 * self.update_seconds:.3f}), "
                f"{len(self.profile.gradients)} gradients, {self.profile.total_bytes / 1e6:.3f} MB, "
                f"batch {self.batch_size if self.batch_size is not None else 'unknown'}, on {self.device}")


def shown(value: Any) -> str:
    """A value from the file as a message quotes it: its repr, cut to SHOWN_CHARACTERS."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS - 3] + "..."


def regular_file(path: pathlib.Path) -> os.stat_result:
    """The file's status, once it is a regular file (a link to one included); ProfileError otherwise."""
    try:
        status = path.stat()
    except FileNotFoundError:
        raise ProfileError(path, "no such file or directory; give the path of a profile file, a torch.profiler trace, "
                                 "a CSV of layers or a trial directory of `ringleader run`") from None
    except (OSError, ValueError) as error:  # ValueError: a NUL in the name
        raise ProfileError(path, f"cannot be read: {getattr(error, 'strerror', None) or error}; check the path and "
                                 "its permissions") from None
    if not stat.S_ISREG(status.st_mode):
        raise ProfileError(path, "is not a regular file (a FIFO, socket or device); copy it to a file first")
    return status


def read_bytes(path: pathlib.Path, cap: int, what: str) -> bytes:
    """The file's bytes, refused from its size alone when past `cap` (never read whole), or when it grew past it
    while being read."""
    status = regular_file(path)
    if status.st_size > cap:
        raise ProfileError(path, f"{status.st_size / MIB:.1f} MiB is larger than a {what} may be ({cap // MIB} MiB); "
                                 f"{_smaller(what)}")
    try:
        with open(path, "rb") as handle:
            data = handle.read(cap + 1)
    except OSError as error:
        raise ProfileError(path, f"cannot be read: {error.strerror or error}; check its permissions") from None
    if len(data) > cap:
        raise ProfileError(path, f"grew past {cap // MIB} MiB while being read; read it once it is complete")
    return data


def _smaller(what: str) -> str:
    if "trace" in what or "records" in what:
        return "record fewer steps (torch.profiler.schedule(active=...)) or a smaller window"
    return "is it the right file?"


def text(path: pathlib.Path, data: bytes) -> str:
    """The bytes as UTF-8 text (a byte-order mark dropped, reading.decode); ProfileError for binary or other text."""
    try:
        return reading.decode(data, "a profile; give a JSON profile file, a torch.profiler trace (.json or .json.gz) "
                                    "or a CSV of layers")
    except reading.ReadError as error:
        raise ProfileError(path, error.problem, error.line) from None


def seconds(path: pathlib.Path, value: Any, field: str, line: int | None = None, positive: bool = False) -> float:
    """`value` as seconds once it is a finite number, >= 0 (> 0 with `positive`)."""
    if not is_number(value) or value < 0 or (positive and value == 0):
        bound = "greater than 0" if positive else "0 or more"
        raise ProfileError(path, f"`{field}` is {shown(value)}: it must be a number of seconds, {bound}", line)
    return float(value)
