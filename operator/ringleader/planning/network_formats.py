"""What every reader of a benchmark's output shares: the tools' names, the checks of a data line's numbers, and
the curve its rows make (each size's median; at least 2 sizes; no size much faster than a smaller one).

The readers are planning/network_nccl.py (nccl-tests), network_osu.py (the OSU micro-benchmarks) and network_probe.py
(ringleader's own link probe); planning/network.py reads the files and tells which each holds. Liberal in whitespace
and comments, strict in numbers: each refusal is a NetworkError naming the file and the line, with the fix. Within one
run (the lines after a column header) the sizes strictly increase; a file may hold several runs (a benchmark rerun and
appended, each with its own header), and each size's time is then the median of its runs.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics

from ringleader.api.loading import shorten_end
from ringleader.planning.network_model import Curve, NetworkError

MAX_DATA_LINES = 10_000
"""MAX_DATA_LINES: data lines (or probe samples) of one file at most; a benchmark's sweep prints tens."""
MAX_SIZES = 1_000
"""MAX_SIZES: distinct message sizes of one curve at most (its regimes are fitted in time quadratic in them)."""
MAX_SIZE_BYTES = 2**50
"""MAX_SIZE_BYTES: 1 PiB, far beyond any message a benchmark sends; a larger number is a column mistaken."""
MAX_SECONDS = 3600.0
"""MAX_SECONDS: an hour for one operation is no network's; a larger time is a unit or a column mistaken."""
FALL = 0.5
"""FALL: a larger size may be faster than a smaller one (a protocol switch), never by half: a time below FALL times the
slowest smaller size's is a line edited, misread or from another network."""

NCCL_ALLREDUCE = "all_reduce_perf"
NCCL_SENDRECV = "sendrecv_perf"
OSU_ALLREDUCE = "osu_allreduce"
OSU_LATENCY = "osu_latency"
OSU_BW = "osu_bw"
NCCL_TOOLS = (NCCL_ALLREDUCE, NCCL_SENDRECV)
OSU_TOOLS = (OSU_ALLREDUCE, OSU_LATENCY, OSU_BW)
TOOLS = NCCL_TOOLS + OSU_TOOLS
"""TOOLS: the tools whose outputs are read; a description's `tool:` names one."""

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_INTEGER = re.compile(r"[+-]?\d+")
NOT_SUPPORTED = "not supported yet: use all_reduce_perf or sendrecv_perf (nccl-tests), osu_allreduce, osu_latency " \
                 "or osu_bw (OSU)"


@dataclasses.dataclass(frozen=True)
class Reading:
    """One curve a file holds."""

    curve: Curve
    streamed: bool = False
    """streamed: osu_bw's times (bytes over its bandwidth), messages sent back to back: the rate without latency."""


@dataclasses.dataclass(frozen=True)
class Row:
    size: int
    seconds: float
    line: int


def lines_of(text: str) -> list[tuple[int, str]]:
    """(line number, the line stripped) of every line that is not blank: numbered as an editor numbers them."""
    return [(number, line.strip()) for number, line in enumerate(text.split("\n"), 1) if line.strip()]


def parse_number(token: str, what: str, shown: str, line: int) -> float:
    if len(token) > 40 or not _NUMBER.fullmatch(token):
        raise NetworkError(shown, f"{what} {shorten_end(token, 40)!r} is not a number: a data line holds numbers "
                                  "(NaN, inf and units have no place in it)", line)
    value = float(token)
    if not math.isfinite(value):
        raise NetworkError(shown, f"{what} {shorten_end(token, 40)} is not finite", line)
    return value


def parse_size(token: str, shown: str, line: int) -> int:
    if len(token) > 20 or not _INTEGER.fullmatch(token):
        raise NetworkError(shown, f"size {shorten_end(token, 40)!r} is not a whole number of bytes", line)
    size = int(token)
    if size < 0:
        raise NetworkError(shown, f"size {size} is negative: a message has 0 bytes or more", line)
    if size > MAX_SIZE_BYTES:
        raise NetworkError(shown, f"size {size} is beyond 1 PiB: is the size column the first?", line)
    return size


def checked_seconds(value: float, seconds: float, what: str, shown: str, line: int) -> float:
    """`seconds` (what the line's `value` of `what` gives), refused unless positive and below an hour."""
    if not value > 0:
        raise NetworkError(shown, f"{what} {value:g} is not positive: every measured time and rate is above 0", line)
    if not seconds <= MAX_SECONDS:
        raise NetworkError(shown, f"{what} {value:g} is {seconds:.3g} s, beyond an hour for one operation: "
                                  "is the column or its unit right?", line)
    return seconds


def check_increasing(size: int, previous: int | None, shown: str, line: int, header: str) -> None:
    if previous is not None and size <= previous:
        raise NetworkError(shown, f"size {size} is not larger than the line above's {previous}: sizes increase within "
                                  f"a run (a rerun appended starts with its own column header, {header})", line)


def check_count(rows: int, shown: str, line: int) -> None:
    if rows > MAX_DATA_LINES:
        raise NetworkError(shown, f"more than {MAX_DATA_LINES} data lines: a benchmark's sweep prints tens; is this "
                                  "the right file?", line)


def curve_of(rows: list[Row], operation: str, ranks: int, source: str, shown: str) -> Curve:
    """The curve of `rows`: each size's median time, at least 2 sizes, no time FALL below a smaller size's."""
    by_size: dict[int, list[Row]] = {}
    for row in rows:
        by_size.setdefault(row.size, []).append(row)
    if len(by_size) > MAX_SIZES:
        raise NetworkError(shown, f"{len(by_size)} message sizes, more than {MAX_SIZES}: sweep fewer sizes "
                                  "(a factor of 2 from 8 B to 256 MiB is 26)")
    if len(by_size) < 2:
        where = rows[0].line if rows else None
        raise NetworkError(shown, f"{len(by_size) or 'no'} message size{'s' if not by_size else ''} measured: a curve "
                                  "needs at least 2 (latency and rate cannot be told apart); sweep sizes, e.g. "
                                  "nccl-tests -b 8 -e 256M -f 2", where)
    points = [(size, statistics.median(row.seconds for row in found), found[0].line)
              for size, found in sorted(by_size.items())]
    slowest = points[0]
    for point in points[1:]:
        if point[1] < FALL * slowest[1]:
            raise NetworkError(shown, f"size {point[0]} takes {1e6 * point[1]:.4g} us, less than half the "
                                      f"{1e6 * slowest[1]:.4g} us of size {slowest[0]} (line {slowest[2]}): a larger "
                                      "message is never that much faster on one network; is a line edited, or from "
                                      "another run?", point[2])
        slowest = max(slowest, point, key=lambda p: p[1])
    try:
        return Curve(operation, ranks, tuple((float(size), seconds) for size, seconds, _ in points), source)
    except ValueError as error:
        raise NetworkError(shown, f"{error} ({points[-2][0]} to {points[-1][0]} bytes): measure larger messages, "
                                  "e.g. up to 256 MiB") from None
