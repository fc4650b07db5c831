"""nccl-tests' output read into a curve: all_reduce_perf (an allreduce among its ranks) and sendrecv_perf
(one message, point-to-point)."""

from __future__ import annotations

import dataclasses
import re

from ringleader.api.loading import shorten_end
from ringleader.planning import network_formats as formats
from ringleader.planning.network_model import ALLREDUCE, POINT_TO_POINT, NetworkError

_SIGNATURE = re.compile(r"^[ \t]*#[ \t]*(?:size\s+count\s+type\s+redop\b|nThread\s+\d|nccl-tests[ \t]*:"
                        r"|Collective test starting[ \t]*:)", re.I | re.M)
_NAMED = re.compile(r"#\s*(?:nccl-tests|Collective test starting)\s*:\s*(\S+)", re.I)
_RANK = re.compile(r"#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\b", re.I)
_HEADER = re.compile(r"#\s*size\s+count\s+type\s+redop\b", re.I)
_BOUNDS = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)\s*(\w*)", re.I)
_FOOTER = re.compile(r"#\s*Avg bus bandwidth\s*:", re.I)
_UNITS = {"size": "(B)", "count": "(elements)", "time": "(us)", "algbw": "(GB/s)", "busbw": "(GB/s)"}


def is_nccl(text: str) -> bool:
    return _SIGNATURE.search(text) is not None


@dataclasses.dataclass(frozen=True)
class _NcclColumns:
    count: int
    size: int
    time: int
    algbw: int
    busbw: int
    kind: tuple[int, ...]
    """kind: the columns (type, redop, root) every line of a run repeats."""
    wrong: int | None


def _columns(body: str, shown: str, line: int) -> _NcclColumns:
    names = body.lstrip("#").lower().split()
    missing = [name for name in ("size", "time", "algbw", "busbw") if name not in names]
    if missing:
        raise NetworkError(shown, f"the column header has no {', '.join(missing)} column: not the header nccl-tests "
                                  "prints (size count type redop root time algbw busbw #wrong ...)", line)
    return _NcclColumns(len(names), names.index("size"), names.index("time"), names.index("algbw"),
                        names.index("busbw"),
                        tuple(names.index(n) for n in ("type", "redop", "root") if n in names),
                        names.index("#wrong") if "#wrong" in names else None)


def _units(body: str, header: str, shown: str, line: int, header_line: int) -> None:
    """The units line under the column header: sizes in (B), times in (us), rates in (GB/s), as nccl-tests prints."""
    if not body.startswith("#") or "(" not in body:
        raise NetworkError(shown, f"the column header (line {header_line}) is not followed by its units line "
                                  "(#  (B)  (elements)  (us)  (GB/s) ...): the units are missing; keep nccl-tests' "
                                  "header lines", line)
    units = body.lstrip("#").split()
    carrying = [name for name in header.lstrip("#").lower().split() if name in _UNITS]
    if len(units) != len(carrying):
        raise NetworkError(shown, f"the units line has {len(units)} units for the {len(carrying)} columns of the "
                                  f"header (line {header_line}) that carry one: keep nccl-tests' header lines", line)
    for name, unit in zip(carrying, units):
        if unit != _UNITS[name]:
            raise NetworkError(shown, f"the {name} column is in {shorten_end(unit, 20)}, not nccl-tests' "
                                      f"{_UNITS[name]}: ringleader reads the output as nccl-tests prints it", line)


@dataclasses.dataclass
class _Run:
    columns: _NcclColumns
    kind: tuple[str, ...] | None = None
    previous: int | None = None


def read(text: str, shown: str, name: str, tool: str | None = None,
         ranks: int | None = None) -> formats.Reading:
    """nccl-tests' output: the out-of-place time (us) of each size, every run's footer present. The test is the one a
    '# nccl-tests: NAME' or '# Collective test starting: NAME' line names, else `tool`, else all_reduce_perf (said in
    the source); the ranks are its '# Rank' lines, else `ranks`."""
    if tool is not None and tool not in formats.NCCL_TOOLS:
        raise NetworkError(shown, "this is nccl-tests output, but the description's tool is "
                                  f"{shorten_end(tool, 40)!r}: "
                                  f"name one of {', '.join(formats.NCCL_TOOLS)} there, or the right file")
    named: tuple[str, int] | None = None
    hosts: dict[int, str] = {}
    run: _Run | None = None
    seen_header = False
    rows: list[formats.Row] = []
    best: tuple[float, float, int] | None = None  # (algbw, busbw, line) of the fastest line: the bus factor's check
    lines = formats.lines_of(text)
    at = 0
    while at < len(lines):
        number, body = lines[at]
        at += 1
        if body.startswith("#"):
            if found := _NAMED.match(body):
                if named is not None and named[0] != found.group(1):
                    raise NetworkError(shown, f"names the test {shorten_end(found.group(1), 40)}, but line {named[1]} "
                                              f"named {named[0]}: one test per file", number)
                named = (found.group(1), number)
            elif found := _RANK.match(body):
                hosts[int(found.group(1))] = found.group(2)
            elif _HEADER.match(body):
                if run is not None:
                    raise NetworkError(shown, "a column header before the run above ended with its footer "
                                              "(# Avg bus bandwidth): the run above is cut short", number)
                if at == len(lines):
                    raise NetworkError(shown, "the column header is the last line: the output ends early", number)
                _units(lines[at][1], body, shown, lines[at][0], number)
                run, seen_header = _Run(_columns(body, shown, number)), True
                at += 1
            elif found := _BOUNDS.match(body):
                if int(found.group(1)) or found.group(2).upper() != "OK":
                    raise NetworkError(shown, f"the run reports {found.group(1)} out of bounds values: its results "
                                              "failed nccl-tests' validation; rerun on a healthy network", number)
            elif _FOOTER.match(body):
                if run is None or run.previous is None:
                    raise NetworkError(shown, "a footer (# Avg bus bandwidth) without a column header and data lines "
                                              "above it: keep nccl-tests' output whole", number)
                run = None
            continue
        if "NCCL INFO" in body or "NCCL WARN" in body:
            continue  # NCCL_DEBUG's lines, interleaved with the results
        if run is None:
            raise NetworkError(shown, ("a data line after its run's footer (# Avg bus bandwidth): a rerun appended "
                                       "keeps its own header lines" if seen_header else
                                       "a data line before nccl-tests' column header (#  size  count  type  redop "
                                       "...) and its units: keep the header lines nccl-tests prints"), number)
        row, algbw, busbw = _row(body, run, shown, number)
        rows.append(row)
        formats.check_count(len(rows), shown, number)
        if best is None or algbw > best[0]:
            best = (algbw, busbw, number)
    if not seen_header:
        raise NetworkError(shown, "no nccl-tests column header (#  size  count  type  redop  root  time  algbw ...): "
                                  "keep the header lines nccl-tests prints")
    if run is not None:
        raise NetworkError(shown, "the output ends before its run's footer (# Avg bus bandwidth): truncated, or the "
                                  "test stopped part-way; keep nccl-tests' output whole", lines[-1][0])
    test, defaulted = _test(named, tool, shown)
    count = _ranks(hosts, ranks, test, shown)
    if best is not None:
        _check_bus_factor(best, test, count, shown)
    rows = [row for row in rows if row.size > 0]  # nothing crosses for 0 bytes
    said = f"{name}: nccl-tests {test}" + (" (no line names the test: taken as all_reduce_perf)" if defaulted else "")
    nodes = len(set(hosts.values()))
    said += f", {count} ranks" + (f" on {nodes} host{'s' if nodes > 1 else ''}" if hosts else "") + ", out-of-place"
    if test == formats.NCCL_SENDRECV:
        return formats.Reading(formats.curve_of(rows, POINT_TO_POINT, 2, said, shown))
    return formats.Reading(formats.curve_of(rows, ALLREDUCE, count, said, shown))


def _row(body: str, run: _Run, shown: str, line: int) -> tuple[formats.Row, float, float]:
    """The line's size and out-of-place time, and its algbw and busbw (GB/s)."""
    tokens, columns = body.split(), run.columns
    if len(tokens) != columns.count:
        raise NetworkError(shown, f"{len(tokens)} columns where the header has {columns.count}: a line cut short or "
                                  "edited? (truncated, or not nccl-tests output)", line)
    size = formats.parse_size(tokens[columns.size], shown, line)
    microseconds = formats.parse_number(tokens[columns.time], "time", shown, line)
    seconds = formats.checked_seconds(microseconds, 1e-6 * microseconds, "time (us)", shown, line)
    algbw = formats.parse_number(tokens[columns.algbw], "algbw", shown, line)
    busbw = formats.parse_number(tokens[columns.busbw], "busbw", shown, line)
    if columns.wrong is not None and tokens[columns.wrong] not in ("0", "N/A"):
        raise NetworkError(shown, f"#wrong is {shorten_end(tokens[columns.wrong], 20)}: the out-of-place results "
                                  "failed nccl-tests' validation; rerun on a healthy network", line)
    kind = tuple(tokens[i] for i in columns.kind)
    if run.kind is not None and kind != run.kind:
        raise NetworkError(shown, f"type, redop and root are {' '.join(kind)}, the lines above {' '.join(run.kind)}: "
                                  "one datatype and operation per run (nccl-tests -d float -o sum)", line)
    formats.check_increasing(size, run.previous, shown, line, "#  size  count  type ...")
    expected = size / (1e3 * microseconds)  # GB/s: bytes over seconds, over 1e9
    if abs(algbw - expected) > 0.015 + 0.03 * expected:
        raise NetworkError(shown, f"algbw {algbw:g} GB/s, but size over time is {expected:.4g} GB/s: the columns are "
                                  "not nccl-tests' (size count type redop root time algbw busbw ...)", line)
    run.kind, run.previous = kind, size
    return formats.Row(size, seconds, line), algbw, busbw


def _test(named: tuple[str, int] | None, tool: str | None, shown: str) -> tuple[str, bool]:
    """The test the file holds, and whether it was taken as all_reduce_perf for want of a name."""
    if named is not None and tool is not None and named[0] != tool:
        raise NetworkError(shown, f"names the test {shorten_end(named[0], 40)}, but the description's tool is {tool}: "
                                  "make them agree", named[1])
    test = named[0] if named is not None else tool
    if test is not None and test not in formats.NCCL_TOOLS:
        raise NetworkError(shown, f"nccl-tests {shorten_end(test, 40)} is {formats.NOT_SUPPORTED}",
                           named[1] if named else None)
    return test or formats.NCCL_ALLREDUCE, test is None


def _ranks(hosts: dict[int, str], ranks: int | None, test: str, shown: str) -> int:
    if hosts and ranks is not None and len(hosts) != ranks:
        raise NetworkError(shown, f"{len(hosts)} '# Rank' lines, but the description says ranks: {ranks}: "
                                  "make them agree (the '# Rank' lines are nccl-tests' own)")
    count = len(hosts) or ranks
    if count is None:
        raise NetworkError(shown, "no '# Rank ... on HOST device ...' lines, and no ranks: in a description: say how "
                                  "many ranks ran (keep nccl-tests' header lines, or name the file in a description "
                                  "with ranks:)")
    if count < 2:
        raise NetworkError(shown, f"{test} of one rank: nothing crossed a link; run it among 2 ranks or more")
    return count


def _check_bus_factor(best: tuple[float, float, int], test: str, ranks: int, shown: str) -> None:
    """nccl-tests' busbw is algbw times the test's factor: 2(n-1)/n for an allreduce, 1 for sendrecv. Checked on the
    fastest line (the most digits): a file of another test, or counted among other ranks, shows another factor."""
    algbw, busbw, line = best
    if algbw < 0.5:
        return
    expected = 2.0 * (ranks - 1) / ranks if test == formats.NCCL_ALLREDUCE else 1.0
    if abs(busbw - expected * algbw) <= 0.015 + 0.03 * busbw:
        return
    ratio = busbw / algbw
    if abs(ratio - 1.0) < 0.03:
        hint = "busbw = algbw, as sendrecv_perf prints: name the test with a '# nccl-tests: sendrecv_perf' line or " \
               "the description's tool:"
    elif abs(ratio - (ranks - 1) / ranks) < 0.03:
        hint = f"(n-1)/n, as all_gather_perf, reduce_scatter_perf and alltoall_perf print: those are " \
               f"{formats.NOT_SUPPORTED}"
    else:
        hint = "are the ranks right (the '# Rank' lines, or ranks: in the description)?"
    raise NetworkError(shown, f"busbw is {ratio:.4g} x algbw, where {test} among {ranks} ranks prints "
                              f"{expected:.4g} x: {hint}", line)
