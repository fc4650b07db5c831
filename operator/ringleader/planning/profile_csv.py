"""A CSV of layers as a ModelProfile: a profile from a paper's table, a vendor's profiler or a hand's estimate.

    # batch_size: 64
    # update_ms: 1.5
    layer,forward_ms,backward_ms,gradient_bytes
    conv1,0.8,1.6,7168
    fc,0.2,0.4,40980

Rows are the layers in forward order. Backward runs them in reverse, so a layer's gradient is ready once backward
has gone through every layer after it and itself; a layer with no parameters (0 bytes) has no gradient but its
backward time counts. Time columns carry their unit (`_s`, `_ms`, `_us`); `gradient_bytes` is in bytes; an optional
`shape` column gives the parameter's shape as `64x3x3x3`. `#` lines are comments; before the header, a
`# key: value` line is metadata: batch_size, device, data_<unit>, update_<unit>, iteration_<unit> (the whole
iteration where the loop does more than data, forward, backward and update); any other key is kept in the
provenance, unless it looks like a misspelt one of these. docs/plan.md has the worked example.
"""

from __future__ import annotations

import csv
import dataclasses
import difflib
import math
import pathlib
import re
from typing import Any

from ringleader.models import profile as profile_
from ringleader.planning.model_profile import ModelProfile, ProfileError, shown

UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
REQUIRED = ("layer", "forward", "backward", "gradient_bytes")
TIMED = ("forward", "backward")
TIMED_METADATA = ("data", "update", "iteration")
METADATA = ("batch_size", "device", *(f"{name}_{unit}" for name in TIMED_METADATA for unit in UNITS))
METADATA_LINE = re.compile(r"#\s*([A-Za-z_][A-Za-z0-9_]*)\s*:\s*(.*)")
MAX_LAYERS = 100_000
FIX = "docs/plan.md gives the format"


@dataclasses.dataclass
class _Columns:
    """Where each column is, and the unit of each time column in seconds."""

    index: dict[str, int]
    scale: dict[str, float]


def looks_like_csv(text: str) -> bool:
    """Whether the text's first line that is no comment is a header naming a `layer` column."""
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return "," in line and line.split(",")[0].strip().strip('"').lower() == "layer"
    return False


def from_text(path: pathlib.Path, text: str) -> ModelProfile:
    metadata: dict[str, tuple[str, int]] = {}
    columns: _Columns | None = None
    rows: list[tuple[list[str], int]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            found = METADATA_LINE.fullmatch(stripped)
            if found and columns is not None:
                raise ProfileError(path, "metadata (`# key: value`) after the header: move it above the header line",
                                   number)
            if found:
                metadata[found.group(1).lower()] = (found.group(2).strip(), number)
            continue
        fields = _fields(path, line, number)
        if columns is None:
            columns = _header(path, fields, number)
        elif len(rows) >= MAX_LAYERS:
            raise ProfileError(path, f"more than {MAX_LAYERS} layers; is it the right file?", number)
        else:
            rows.append((fields, number))
    if columns is None:
        raise ProfileError(path, f"no header line: a CSV of layers starts with `layer,forward_ms,backward_ms,"
                                 f"gradient_bytes`; {FIX}")
    if not rows:
        raise ProfileError(path, f"no layers under the header: one row per layer in forward order; {FIX}")
    return _profile(path, columns, rows, metadata)


def _fields(path: pathlib.Path, line: str, number: int) -> list[str]:
    try:
        return [field.strip() for field in next(csv.reader([line], strict=True))]
    except csv.Error as error:
        raise ProfileError(path, f"not a CSV line: {error}; quote a field holding commas", number) from None


def _header(path: pathlib.Path, fields: list[str], number: int) -> _Columns:
    index: dict[str, int] = {}
    scale: dict[str, float] = {}
    for position, field in enumerate(fields):
        name = field.lower()
        base, _, unit = name.rpartition("_")
        if base in TIMED and unit in UNITS:
            name, scale[base] = base, UNITS[unit]
        elif name in TIMED:
            raise ProfileError(path, f"column {name} has no unit: name it {name}_ms (or {name}_us, {name}_s)", number)
        elif base in TIMED:
            raise ProfileError(path, f"column {shown(field)}: its unit must be _s, _ms or _us ({base}_ms)", number)
        elif name == "gradient":
            raise ProfileError(path, "column `gradient` has no unit: name it gradient_bytes", number)
        elif name not in ("layer", "gradient_bytes", "shape"):
            raise ProfileError(path, f"column {shown(field)} is not one of layer, forward_<unit>, backward_<unit>, "
                                     f"gradient_bytes, shape; {FIX}", number)
        if name in index:
            raise ProfileError(path, f"column {shown(name)} is given twice; keep one", number)
        index[name] = position
    missing = [name for name in REQUIRED if name not in index]
    if missing:
        raise ProfileError(path, f"the header lacks {', '.join(missing)}: it names layer, forward_ms, backward_ms and "
                                 f"gradient_bytes (units _s, _ms or _us); {FIX}", number)
    return _Columns(index, scale)


def _profile(path: pathlib.Path, columns: _Columns, rows: list[tuple[list[str], int]],
             metadata: dict[str, tuple[str, int]]) -> ModelProfile:
    layers = []
    for fields, number in rows:
        if len(fields) != len(columns.index):
            raise ProfileError(path, f"{len(fields)} fields where the header has {len(columns.index)}: give every "
                                     "row a value for each column (an empty one for an unknown shape)", number)
        name = fields[columns.index["layer"]]
        if not name:
            raise ProfileError(path, "a layer without a name: give each row its layer's name", number)
        forward, backward = (_number(path, fields[columns.index[c]], f"{c} time", number) * columns.scale[c]
                             for c in TIMED)
        size = _number(path, fields[columns.index["gradient_bytes"]], "gradient_bytes", number)
        shape = _shape(path, fields[columns.index["shape"]], number) if "shape" in columns.index else None
        layers.append((name, forward, backward, size, shape))
    forward_total = math.fsum(layer[1] for layer in layers)
    backward_total = math.fsum(layer[2] for layer in layers)
    if not backward_total > 0:
        raise ProfileError(path, "backward adds up to 0 s: give each layer's backward time")
    gradients, after = [], 0.0
    for name, _, backward, size, shape in reversed(layers):  # backward runs from the last layer
        after += backward
        if size > 0:
            gradients.append(profile_.Gradient(name, size, min(after, backward_total), shape))
    if not gradients:
        raise ProfileError(path, "no layer has a gradient (gradient_bytes all 0): nothing to communicate")
    known, extra = _metadata(path, metadata)
    data, update = known.get("data", 0.0), known.get("update", 0.0)
    phases = data + forward_total + backward_total + update
    iteration = known.get("iteration", phases)
    if iteration < phases * (1 - 1e-9):
        line = next(number for key, (_, number) in metadata.items() if key.startswith("iteration_"))
        raise ProfileError(path, f"iteration {iteration:g} s is shorter than data, forward, backward and update "
                                 f"together ({phases:g} s); correct it or leave it out", line)
    said = [f"no {name}_ms: {name} taken as 0" for name in ("data", "update") if name not in known]
    source = f"{path}: a CSV of {len(layers)} layers" + (f" ({'; '.join(said)})" if said else "")
    batch = known.get("batch_size")
    return ModelProfile(profile_.Profile(tuple(reversed(gradients)), backward_total), iteration, forward_total,
                        update, None if batch is None else int(batch), str(known.get("device", "unknown")), source,
                        extra)


def _metadata(path: pathlib.Path, metadata: dict[str, tuple[str, int]]) -> tuple[dict[str, Any], dict[str, str]]:
    """The metadata ringleader reads (times in seconds), and the rest, for the provenance."""
    known: dict[str, Any] = {}
    extra: dict[str, str] = {}
    for key, (value, number) in metadata.items():
        base, _, unit = key.rpartition("_")
        if base in TIMED_METADATA and unit in UNITS:
            known[base] = _number(path, value, key, number) * UNITS[unit]
        elif key == "batch_size":
            if not re.fullmatch(r"[1-9][0-9]{0,8}", value):
                raise ProfileError(path, f"batch_size {shown(value)}: samples per worker per iteration, a whole number "
                                         "of 1 or more", number)
            known[key] = int(value)
        elif key == "device":
            known[key] = " ".join(value.split())[:200]
        else:
            close = [f"{key}_ms"] if key in TIMED_METADATA else difflib.get_close_matches(key, METADATA, n=1,
                                                                                          cutoff=0.8)
            if close:
                units = " (units _s, _ms or _us)" if close[0] not in ("batch_size", "device") else ""
                raise ProfileError(path, f"metadata {shown(key)}: did you mean {close[0]}?{units}", number)
            extra[key] = value[:200]
    return known, extra


def _number(path: pathlib.Path, text: str, what: str, number: int) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ProfileError(path, f"{what} {shown(text)} is not a number: write it in digits, in the column's unit",
                           number) from None
    if not math.isfinite(value) or value < 0:
        raise ProfileError(path, f"{what} {shown(text)}: it must be a finite number, 0 or more", number)
    return value


def _shape(path: pathlib.Path, text: str, number: int) -> tuple[int, ...] | None:
    if not text:
        return None
    if not re.fullmatch(r"[0-9]{1,9}(x[0-9]{1,9}){0,7}", text):
        raise ProfileError(path, f"shape {shown(text)}: write it as 64x3x3x3, or leave it empty", number)
    return tuple(int(d) for d in text.split("x"))
