"""ringleader's own link probe, read from a trial's summary.json into curves (its `linkProbe`, contract/keys.py;
runtime/linkprobe.py measured it)."""

from __future__ import annotations

import json
import math
from typing import Any

from ringleader.api.loading import shorten_end
from ringleader.contract import keys
from ringleader.planning import network_formats as formats
from ringleader.planning.network_model import ALLREDUCE, POINT_TO_POINT, NetworkError


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON holds")


def read(text: str, shown: str, name: str) -> list[formats.Reading]:
    """A trial's summary.json: its `linkProbe` (contract/keys.py), the point-to-point series one way and the allreduce
    of the trial's workers, each [bytes, seconds] sample a median already (the median of a size's samples here)."""
    try:
        document = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as error:
        raise NetworkError(shown, f"not valid JSON: {error.msg}, column {error.colno}", error.lineno) from None
    except (ValueError, RecursionError) as error:
        raise NetworkError(
            shown, f"not a JSON document ringleader reads: {shorten_end(str(error), 80) or 'too deep'}") from None
    if not isinstance(document, dict) or keys.LINK_PROBE not in document:
        raise NetworkError(shown, f"a JSON file without `{keys.LINK_PROBE}`: not a ringleader trial summary; name a "
                                  "trial's summary.json (or its directory), nccl-tests or OSU output, or a description")
    line = text[:max(0, text.find(f'"{keys.LINK_PROBE}"'))].count("\n") + 1
    probe = document[keys.LINK_PROBE]
    if not isinstance(probe, dict):
        raise NetworkError(shown, f"`{keys.LINK_PROBE}` is {type(probe).__name__}, not an object: the trial recorded "
                                  "no link probe (one rank alone?)", line)
    shared = " (every rank on one machine: its loopback, not a network)" if probe.get(keys.PROBE_SHARED_HOST) is True \
        else ""
    readings = []
    point = probe.get(keys.PROBE_POINT_TO_POINT)
    if point:
        rows = _rows(point, keys.PROBE_POINT_TO_POINT, shown, line)
        said = f"{name}: ringleader's link probe, one way{shared}"
        readings.append(formats.Reading(formats.curve_of(rows, POINT_TO_POINT, 2, said, shown)))
    collective = probe.get(keys.PROBE_COLLECTIVE)
    if collective:
        rows = _rows(collective, keys.PROBE_COLLECTIVE, shown, line)
        workers = collective.get(keys.WORKERS)
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 2:
            value = shorten_end(repr(workers), 40) if isinstance(workers, (int, float, str)) else type(workers).__name__
            raise NetworkError(shown, f"`{keys.LINK_PROBE}.{keys.PROBE_COLLECTIVE}.{keys.WORKERS}` is {value}, not a "
                                      "count of 2 ranks or more", line)
        said = f"{name}: ringleader's link probe, allreduce of {workers} ranks{shared}"
        readings.append(formats.Reading(formats.curve_of(rows, ALLREDUCE, workers, said, shown)))
    if not readings:
        raise NetworkError(shown, f"`{keys.LINK_PROBE}` holds no series: the trial probed no link (one rank alone?)",
                           line)
    return readings


def _rows(series: Any, what: str, shown: str, line: int) -> list[formats.Row]:
    where = f"`{keys.LINK_PROBE}.{what}.{keys.PROBE_SAMPLES}`"
    samples = series.get(keys.PROBE_SAMPLES) if isinstance(series, dict) else None
    if not isinstance(samples, list):
        raise NetworkError(shown, f"{where} is missing or not a list of [bytes, seconds]", line)
    formats.check_count(len(samples), shown, line)
    rows = []
    for index, sample in enumerate(samples):
        if not (isinstance(sample, list) and len(sample) == 2 and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in sample)):
            raise NetworkError(shown, f"{where}[{index}] is not [bytes, seconds] (two finite numbers)", line)
        size, seconds = sample
        if not (0 < size <= formats.MAX_SIZE_BYTES and size == int(size)):
            raise NetworkError(shown, f"{where} holds a size of {size!r} bytes: sizes are whole and positive", line)
        rows.append(formats.Row(int(size), formats.checked_seconds(seconds, seconds, f"{where}: a time", shown, line),
                                line))
    return rows
