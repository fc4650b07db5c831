"""The OSU micro-benchmarks' output read into a curve: osu_allreduce, osu_latency and osu_bw."""

from __future__ import annotations

import re

from ringleader.api.loading import shorten_end
from ringleader.planning import network_formats as formats
from ringleader.planning.network_model import ALLREDUCE, POINT_TO_POINT, NetworkError

_TITLE = re.compile(r"#\s*OSU\s+(?P<suite>\S+)\s+(?P<test>.*?)\s+Test\b(?:\s+v(?P<version>\S+))?", re.I)
_SIGNATURE = re.compile(r"^[ \t]*#[ \t]*OSU[ \t]+\S+[ \t]+.*?\bTest\b", re.I | re.M)
_HEADER = re.compile(r"#\s*Size\b\s*(?P<rest>.*)$", re.I)
_TESTS = {"latency": formats.OSU_LATENCY, "bandwidth": formats.OSU_BW, "allreduce latency": formats.OSU_ALLREDUCE}
_COLUMNS = {formats.OSU_LATENCY: (r"(?:Avg\s+)?Latency", "Latency", "us"),
            formats.OSU_ALLREDUCE: (r"(?:Avg\s+)?Latency", "Avg Latency", "us"),
            formats.OSU_BW: (r"Bandwidth", "Bandwidth", "MB/s")}
"""_COLUMNS: per test, its value column's name (a pattern, and as said) and unit."""


def is_osu(text: str) -> bool:
    return _SIGNATURE.search(text) is not None


def read(text: str, shown: str, name: str, tool: str | None = None,
         ranks: int | None = None) -> formats.Reading:
    """OSU's output: its title line names the test; the column header its unit (us, or MB/s for osu_bw). osu_latency
    is one way; osu_bw a window of messages streamed back to back, so S/bandwidth, no latency (Reading.streamed);
    osu_allreduce says nothing of its ranks: `ranks` (a description's ranks:) does. Size 0 is skipped."""
    title: tuple[str, str, int] | None = None  # (tool, what the line says, line)
    scale: float | None = None  # the column header's unit read; None before it
    previous: int | None = None
    width: int | None = None
    rows: list[formats.Row] = []
    lines = formats.lines_of(text)
    for number, body in lines:
        if body.startswith("#"):
            if found := _TITLE.match(body):
                title = _title(found, title, tool, shown, number)
                scale = previous = width = None
            elif (found := _HEADER.match(body)) and title is not None:
                scale = _unit(found.group("rest"), title[0], shown, number)
                previous = width = None
            continue
        if title is None or scale is None:
            raise NetworkError(shown, "a data line before OSU's " + ("title line (# OSU MPI ... Test v7.3)" if
                                      title is None else "column header and its unit (# Size  Latency (us))") +
                               ": keep the header lines the benchmark prints", number)
        tokens = body.split()
        if len(tokens) < 2 or (width is not None and len(tokens) != width):
            raise NetworkError(shown, f"{len(tokens)} column{'s' if len(tokens) != 1 else ''} where " +
                               (f"the lines above have {width}" if width else "OSU prints a size and a value") +
                               ": a line cut short or edited?", number)
        size = formats.parse_size(tokens[0], shown, number)
        value = formats.parse_number(tokens[1], "the value", shown, number)
        for token in tokens[2:]:
            formats.parse_number(token, "a column", shown, number)
        formats.check_increasing(size, previous, shown, number, "# Size ...")
        previous, width = size, len(tokens)
        if size == 0:
            continue  # osu_latency starts at 0 bytes: latency alone, no size to fit
        seconds = size / (value * scale) if title[0] == formats.OSU_BW else value * scale
        rows.append(formats.Row(size, formats.checked_seconds(value, seconds, "the value", shown, number), number))
        formats.check_count(len(rows), shown, number)
    if title is None:
        raise NetworkError(shown, "no OSU title line (# OSU MPI Latency Test v7.3): keep the lines the benchmark "
                                  "prints")
    if lines and not lines[-1][1].startswith("#") and not text.rstrip(" \t\r").endswith("\n"):
        raise NetworkError(shown, "the last data line has no line end: the file may be cut short; if it is whole, end "
                                  "it with a newline", lines[-1][0])
    test = title[0]
    said = f"{name}: OSU {title[1]} ({test})"
    if test == formats.OSU_ALLREDUCE:
        if ranks is None:
            raise NetworkError(shown, "osu_allreduce does not print how many ranks ran: name this file in a network "
                                      "description with ranks: (e.g. acrossNodes: {file: osu_allreduce.txt, "
                                      "ranks: 16})", title[2])
        if ranks < 2:
            raise NetworkError(shown, f"ranks: {ranks}: an allreduce of one rank crosses no link")
        return formats.Reading(formats.curve_of(rows, ALLREDUCE, ranks, f"{said}, {ranks} ranks", shown))
    if test == formats.OSU_BW:
        return formats.Reading(formats.curve_of(rows, POINT_TO_POINT, 2, f"{said}, streamed", shown), streamed=True)
    return formats.Reading(formats.curve_of(rows, POINT_TO_POINT, 2, f"{said}, one way", shown))


def _title(found: re.Match[str], title: tuple[str, str, int] | None, tool: str | None, shown: str,
           number: int) -> tuple[str, str, int]:
    """(the tool, what its title says, the line) of a title line; refused for a test not read, or a second test."""
    what = " ".join(found.group("test").split())
    test = _TESTS.get(what.lower())
    said = f"{found.group('suite')} {what} Test" + (f" v{found.group('version')}" if found.group("version") else "")
    if test is None:
        raise NetworkError(shown, f"the OSU {shorten_end(what, 40)} Test is {formats.NOT_SUPPORTED}", number)
    if tool is not None and tool != test:
        raise NetworkError(shown, f"this is {test}'s output, but the description's tool is {shorten_end(tool, 40)}: "
                                  "make them agree", number)
    if title is not None and title[0] != test:
        raise NetworkError(shown, f"a second test ({test}) after line {title[2]}'s {title[0]}: one test per file",
                           number)
    return test, said, number


def _unit(rest: str, test: str, shown: str, line: int) -> float:
    """The scale of the column header's unit to seconds (latency) or bytes per second (bandwidth)."""
    pattern, column, unit = _COLUMNS[test]
    found = re.match(rf"{pattern}\s*(?:\((?P<unit>[^)]*)\))?", rest, re.I)
    if found is None:
        raise NetworkError(shown, f"the column after Size is {shorten_end(rest, 40)!r}, "
                                  f"not {test}'s {column} ({unit}): "
                                  "keep the header the benchmark prints", line)
    if found.group("unit") != unit:
        said = f"in {found.group('unit')}" if found.group("unit") else "without its unit"
        raise NetworkError(shown, f"the value column is {said}, not {test}'s ({unit}): keep the header the benchmark "
                                  "prints", line)
    return 1e-6 if unit == "us" else 1e6
