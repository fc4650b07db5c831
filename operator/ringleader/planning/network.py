"""A network as its own benchmarks measured it, read from their files: `ringleader predict --network N`.

`read(path)` takes a network description (YAML: each level names the tool outputs that measured it, or gives a
latency and a bandwidth), or one tool's output directly (nccl-tests, OSU, a trial's summary.json or its directory),
which is then the one level, across nodes. The format is told by the content, never the name. Whatever a file holds,
the result is a MeasuredNetwork or one NetworkError line naming the file, the line and the fix: nothing is half read.
docs/plan.md, "The network", says what is accepted and refused; planning/network_model.py what the curves cost.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pathlib
import re
import stat
from typing import Any

from ringleader.api import loading, reading
from ringleader.api.loading import shorten_end
from ringleader.contract import layout
from ringleader.planning import network_formats as formats
from ringleader.planning import network_nccl, network_osu, network_probe
from ringleader.planning.network_formats import Reading
from ringleader.planning.network_model import (ACROSS_NODES, ALLREDUCE, INSIDE_NODE, POINT_TO_POINT, Curve, Level,
                                               MeasuredNetwork, NetworkError, Segment)

__all__ = ["ACROSS_NODES", "ALLREDUCE", "INSIDE_NODE", "POINT_TO_POINT", "Curve", "Level", "MeasuredNetwork",
           "NetworkError", "Segment", "read"]

MAX_BYTES = 4 * 2**20
"""MAX_BYTES: the largest file read; a benchmark's output is a few kilobytes, a trial's summary.json tens."""
MAX_DESCRIPTION_BYTES = 64 * 2**10
"""MAX_DESCRIPTION_BYTES: the largest description; one is a few lines."""
MAX_FILES = 4
"""MAX_FILES: files one level names at most (osu_bw, osu_latency and osu_allreduce are three)."""
MAX_GBIT_PER_SECOND = 1e5
"""MAX_GBIT_PER_SECOND: 100 Tbit/s, beyond any link; a larger rate is bits per second written as Gbit/s."""
MAX_LATENCY_MICROSECONDS = 1e6

ACROSS_KEY = "acrossNodes"
INSIDE_KEY = "insideNode"
LEVEL_KEYS = {ACROSS_KEY: ACROSS_NODES, INSIDE_KEY: INSIDE_NODE}
FIELDS = ("file", "files", "tool", "ranks", "lineRateGbitPerSecond", "latencyMicroseconds", "bandwidthGbitPerSecond")
"""FIELDS: the keys of one level of a description."""
GIVEN = ("latencyMicroseconds", "bandwidthGbitPerSecond")

_NCCL, _OSU, _PROBE, _OTHER = "nccl-tests", "OSU", "link probe", "other"
_DESCRIPTION = re.compile(rf"^\s*(?:{ACROSS_KEY}|{INSIDE_KEY}|\"{ACROSS_KEY}\"|\"{INSIDE_KEY}\")\s*:", re.M)
_FORMATS = ("nccl-tests (all_reduce_perf, sendrecv_perf) or OSU (osu_allreduce, osu_latency, osu_bw) output with its "
            "header lines, a trial's summary.json, or a network description (acrossNodes:, insideNode:)")


@dataclasses.dataclass(frozen=True)
class _File:
    """A file read whole, and what it holds (_NCCL, _OSU, _PROBE or _OTHER: a description or nothing known)."""

    path: pathlib.Path
    shown: str
    text: str
    kind: str


def read(path: str | pathlib.Path) -> MeasuredNetwork:
    """The MeasuredNetwork `path` describes, or NetworkError (one line: 'FILE:LINE: what; the fix')."""
    shown = str(path)
    found = _open(pathlib.Path(path), shown)
    if found.kind == _OTHER:
        return _description(found)
    return MeasuredNetwork(_level(ACROSS_NODES, _readings(found, None, None), None, shown, None), None, shown)


# ---------------------------------------------------------------------------------------------
# Files


def _open(path: pathlib.Path, shown: str) -> _File:
    """The file at `path` (a trial's directory: its summary.json) read as UTF-8 text, at most MAX_BYTES; its kind."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise NetworkError(shown, "no such file: check the path") from None
    except OSError as error:
        raise NetworkError(shown, f"cannot be read: {error.strerror or error}") from None
    except ValueError:  # a NUL in the path
        raise NetworkError(shown, "is no path a file can have (it holds a NUL character)") from None
    if stat.S_ISDIR(mode):
        summary = path / layout.SUMMARY_FILE
        if not summary.is_file():
            raise NetworkError(shown, f"is a directory without {layout.SUMMARY_FILE}: name a file ({_FORMATS}), or "
                                      "a trial's directory")
        return _open(summary, os.path.join(shown, layout.SUMMARY_FILE))
    text = _text(path, shown)
    if network_osu.is_osu(text):
        kind = _OSU
    elif network_nccl.is_nccl(text):
        kind = _NCCL
    elif text.lstrip().startswith(("{", "[")) and not _DESCRIPTION.search(text.replace("{", "\n")):
        kind = _PROBE
    else:
        kind = _OTHER
    return _File(path, shown, text, kind)


def _text(path: pathlib.Path, shown: str) -> str:
    try:
        # Not blocking: a FIFO with no writer would hold the open; only a regular file is read.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise NetworkError(shown, f"cannot be read: {error.strerror or error}") from None
    with os.fdopen(descriptor, "rb") as stream:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise NetworkError(shown, "is not a regular file (a FIFO, a device or a socket): name a file")
        try:
            data = stream.read(MAX_BYTES + 1)
        except OSError as error:
            raise NetworkError(shown, f"cannot be read: {error.strerror or error}") from None
    if len(data) > MAX_BYTES:
        raise NetworkError(shown, f"is larger than {MAX_BYTES // 2**20} MiB: a benchmark's output is a few kilobytes; "
                                  "is this the right file?")
    if not data.strip():
        raise NetworkError(shown, f"is empty: name {_FORMATS}")
    try:
        return reading.decode(data, "a benchmark's text output")
    except reading.ReadError as error:
        raise NetworkError(shown, error.problem, error.line) from None


def _readings(found: _File, tool: str | None, ranks: int | None) -> list[Reading]:
    """The curves of one tool's output."""
    name = found.path.name if found.path.name != layout.SUMMARY_FILE else \
        f"{found.path.parent.name}/{found.path.name}"
    if found.kind == _NCCL:
        return [network_nccl.read(found.text, found.shown, name, tool, ranks)]
    if found.kind == _OSU:
        return [network_osu.read(found.text, found.shown, name, tool, ranks)]
    if found.kind == _PROBE:
        if tool is not None:
            raise NetworkError(found.shown, f"is a trial's summary (JSON), but the description's tool is "
                                            f"{shorten_end(tool, 40)}: leave tool: out for a summary.json")
        return network_probe.read(found.text, found.shown, name)
    raise NetworkError(found.shown, f"is not a format ringleader reads: name {_FORMATS}")


def _level(name: str, readings: list[Reading], line_rate: float | None, shown: str, line: int | None) -> Level:
    """The level of `readings`: at most one allreduce curve, one point-to-point (osu_bw's streamed rate plus
    osu_latency's smallest time as its latency, where both are given)."""
    allreduce = [r.curve for r in readings if r.curve.operation == ALLREDUCE]
    streamed = [r.curve for r in readings if r.streamed]
    one_way = [r.curve for r in readings if r.curve.operation == POINT_TO_POINT and not r.streamed]
    for curves, what in ((allreduce, "allreduce"), (streamed, "bandwidth"), (one_way, "one-way")):
        if len(curves) > 1:
            raise NetworkError(shown, f"{name} has {len(curves)} {what} curves ({'; '.join(c.source for c in curves)})"
                                      ": one per level; keep one", line)
    point = one_way[0] if one_way else None
    if streamed:
        point = _with_latency(streamed[0], one_way[0]) if one_way else dataclasses.replace(
            streamed[0], source=f"{streamed[0].source}: its rate, no latency measured (osu_latency gives it)")
    return Level(name, point, allreduce[0] if allreduce else None, line_rate)


def _with_latency(streamed: Curve, one_way: Curve) -> Curve:
    """osu_bw streams a window of messages back to back, so its rate hides the latency; osu_latency's smallest
    message is mostly latency: one message of S bytes, t_latency(smallest) + S/bandwidth(S)."""
    latency = one_way.points[0][1]
    return Curve(POINT_TO_POINT, 2, tuple((size, latency + seconds) for size, seconds in streamed.points),
                 f"{streamed.source}, latency {1e6 * latency:.3g} us from {one_way.source}")


# ---------------------------------------------------------------------------------------------
# The description


def _description(found: _File) -> MeasuredNetwork:
    shown = found.shown
    if len(found.text.encode()) > MAX_DESCRIPTION_BYTES:
        raise NetworkError(shown, f"is larger than {MAX_DESCRIPTION_BYTES // 2**10} KiB, and not {_FORMATS}: a "
                                  "description is a few lines")
    try:
        documents = loading.load_documents_with_nodes(str(found.path))
    except loading.LoadError as error:
        where = re.search(r"\bline (\d+)", error.problem)
        raise NetworkError(shown, error.problem, int(where.group(1)) if where else None) from None
    if not documents:
        raise NetworkError(shown, f"holds nothing but comments: name {_FORMATS}")
    if len(documents) > 1:
        raise NetworkError(shown, f"holds {len(documents)} YAML documents: a description is one")
    document, node = documents[0]
    lines = loading.Lines(node)
    if not isinstance(document, dict) or not set(map(str, document)) & set(LEVEL_KEYS):
        raise NetworkError(shown, f"is not a format ringleader reads: name {_FORMATS}")
    for key in document:
        if key not in LEVEL_KEYS:
            raise NetworkError(shown, f"unknown key {shorten_end(str(key), 40)!r}: a description's keys are "
                                      f"{', '.join(LEVEL_KEYS)}", lines.of(shorten_end(str(key), 60)))
    if ACROSS_KEY not in document:
        raise NetworkError(shown, f"no {ACROSS_KEY}: every network has a level across nodes (insideNode is the "
                                  "optional one)", lines.of(INSIDE_KEY))
    across = _described_level(found, ACROSS_KEY, document[ACROSS_KEY], lines)
    inside = _described_level(found, INSIDE_KEY, document[INSIDE_KEY], lines) if INSIDE_KEY in document else None
    return MeasuredNetwork(across, inside, shown)


@dataclasses.dataclass(frozen=True)
class _Described:
    """One level of a description (acrossNodes or insideNode), and where its fields are: each refusal names its line."""

    found: _File
    key: str
    value: dict
    lines: loading.Lines

    def line(self, field: str | None = None) -> int | None:
        return self.lines.of(f"{self.key}.{field}" if field else self.key)

    def refused(self, problem: str, field: str | None = None) -> NetworkError:
        return NetworkError(self.found.shown, problem, self.line(field))

    def number(self, field: str, limit: float, zero: bool = False) -> float | None:
        """The field, a number above 0 (at least 0 with `zero`) and at most `limit`; None when absent."""
        if field not in self.value:
            return None
        number = self.value[field]
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number):
            raise self.refused(f"{self.key}.{field} is {_kind_of(number)}, not a number", field)
        if not (number >= 0 if zero else number > 0) or number > limit:
            raise self.refused(f"{self.key}.{field} is {number:g}: it must be {'at least' if zero else 'above'} 0 "
                               f"and at most {limit:g} (is the unit the key's?)", field)
        return float(number)

    def tool(self) -> str | None:
        tool = self.value.get("tool")
        if tool is not None and tool not in formats.TOOLS:
            raise self.refused(f"{self.key}.tool is {_kind_of(tool)}: it is one of {', '.join(formats.TOOLS)} "
                               f"(others are {formats.NOT_SUPPORTED.split(':')[0]})", "tool")
        return tool

    def ranks(self) -> int | None:
        ranks = self.value.get("ranks")
        if ranks is not None and (isinstance(ranks, bool) or not isinstance(ranks, int) or not 2 <= ranks <= 10**6):
            raise self.refused(f"{self.key}.ranks is {_kind_of(ranks)}: the whole number of ranks the collective ran "
                               "among, 2 or more", "ranks")
        return ranks

    def files(self) -> list[tuple[str, int | None]]:
        """(path as written, its line) of each file the level names."""
        if "file" in self.value:
            names, where = [self.value["file"]], [self.line("file")]
        else:
            names = self.value["files"]
            if not isinstance(names, list) or not 1 <= len(names) <= MAX_FILES:
                raise self.refused(f"{self.key}.files is {_kind_of(names)}: a list of 1 to {MAX_FILES} paths", "files")
            where = [self.line(f"files.{index}") for index in range(len(names))]
        for named, line in zip(names, where):
            if not isinstance(named, str) or not named.strip() or "\0" in named:
                raise NetworkError(self.found.shown, f"a file of {self.key} is {_kind_of(named)}: a path, relative to "
                                                     "this file", line)
        return list(zip(names, where))


def _described_level(found: _File, key: str, value: Any, lines: loading.Lines) -> Level:
    """A level of a description: measured by the files it names, or given by a latency and a bandwidth."""
    name = LEVEL_KEYS[key]
    if not isinstance(value, dict) or not value:
        raise NetworkError(found.shown, f"{key} is {_kind_of(value)}, not a mapping: e.g. {key}: {{file: "
                                        "nccl-allreduce.txt}, or {latencyMicroseconds: 5, bandwidthGbitPerSecond: "
                                        "100}", lines.of(key))
    level = _Described(found, key, value, lines)
    for field in value:
        if field not in FIELDS:
            raise level.refused(f"unknown key {shorten_end(str(field), 40)!r} in {key}: "
                                f"its keys are {', '.join(FIELDS)}",
                                shorten_end(str(field), 60))
    rate = level.number("lineRateGbitPerSecond", MAX_GBIT_PER_SECOND)
    line_rate = None if rate is None else 1e9 * rate
    given = [field for field in GIVEN if field in value]
    named = [field for field in ("file", "files", "tool", "ranks") if field in value]
    if given and named:
        raise level.refused(f"{key} gives {given[0]} and {named[0]}: a level is measured (file:, files:) or given "
                            "(latencyMicroseconds and bandwidthGbitPerSecond), not both", named[0])
    if given:
        return Level(name, _given(level), None, line_rate)
    if "file" in value and "files" in value:
        raise level.refused(f"{key} has both file: and files:: keep one", "files")
    if "file" not in value and "files" not in value:
        raise level.refused(f"{key} names no file: give file:, files: [...], or latencyMicroseconds and "
                            "bandwidthGbitPerSecond")
    tool, ranks = level.tool(), level.ranks()
    readings: list[Reading] = []
    for named_path, line in level.files():
        readings += _named_readings(found, named_path, line, tool, ranks)
    return _level(name, readings, line_rate, found.shown, level.line())


def _named_readings(found: _File, named: str, line: int | None, tool: str | None, ranks: int | None) -> list[Reading]:
    """The curves of a file a description names (relative to the description), refusing a description or a missing
    file at the description's line; a refusal about the file itself names the file, and where it was named."""
    relative = not os.path.isabs(named)
    path = found.path.parent / named if relative else pathlib.Path(named)
    shown = os.path.join(os.path.dirname(found.shown), named) if relative else named
    if not os.path.lexists(path):
        raise NetworkError(found.shown, f"names {shorten_end(named, 80)}, but there is no such file "
                                        f"({shorten_end(str(path), 120)}): paths are relative to the description", line)
    try:
        target = _open(path, shown)
        if target.kind == _OTHER and _DESCRIPTION.search(target.text):
            raise NetworkError(found.shown, f"names {shorten_end(named, 80)}, a network description itself: a "
                                            "description names benchmark outputs, not other descriptions", line)
        return _readings(target, tool, ranks)
    except NetworkError as error:
        if error.source == found.shown:
            raise
        raise error.named_at(f"{found.shown}:{line}" if line else found.shown) from None


def _given(level: _Described) -> Curve:
    """latencyMicroseconds and bandwidthGbitPerSecond: one regime, a + 8S/B, as a curve of two sizes (1 B, 1 GiB)."""
    latency = level.number("latencyMicroseconds", MAX_LATENCY_MICROSECONDS, zero=True)
    rate = level.number("bandwidthGbitPerSecond", MAX_GBIT_PER_SECOND)
    if latency is None or rate is None:
        missing = "bandwidthGbitPerSecond" if rate is None else "latencyMicroseconds"
        raise level.refused(f"{level.key} gives no {missing}: a level given by numbers has both")
    seconds, bits = 1e-6 * latency, 1e9 * rate
    source = f"{pathlib.Path(level.found.shown).name}:{level.line()}: given, latency {latency:g} us, {rate:g} Gbit/s"
    return Curve(POINT_TO_POINT, 2, tuple((size, seconds + 8.0 * size / bits) for size in (1.0, float(2**30))), source)


def _kind_of(value: Any) -> str:
    """A value as a refusal shows it: short, and never the repr of a nested structure."""
    if value is None or value == {} or value == []:
        return "empty"
    return shorten_end(repr(value), 40) if isinstance(value, (str, int, float)) else type(value).__name__
