"""What-if network model: how much would faster links, more workers or gradient compression cost or save?

Called by `ringleader whatif` (launch/whatif.py), by the report's scaling figures (scaling.py) and from
Python. Pure arithmetic over a backward profile; docs/whatif.md explains the model and its limits.

From one rank's backward (layers.json, records.py, or a profile file): gradients are emitted at their
measured ready times and fused into buckets (fuse(): a bucket closes once the cycle time has passed since
it opened, or before it would pass the fusion threshold); buckets are allreduced first-in first-out on
one channel, each starting at max(channel free, bucket ready), a bucket of S bytes costing
2*(8*S*(N-1)/N)/(bw*c) + (N-1)*add(S/N)  at bandwidth bw (bits/s) and compression ratio c;
overhead = end of the last allreduce - end of backward (0 when all is hidden), plus, when compressing
(c > 1), the codec's encoding and decoding per iteration (a compressed trial's measured time/codec,
`measured_compression`); scaling factor SF = t_batch / (t_batch + overhead).

Profiles are best taken from a one-worker trial: its backward has no communication competing for the
CPU, and its compute time is t_batch. Ready times are host times of the gradient hooks (timing.py), so
on GPU they are launch times, earlier than the real gradient; the model is optimistic there.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import statistics
from typing import Any, Iterable, Mapping, Sequence

from ringleader.analysis import addcost, summary
from ringleader.api import constants
from ringleader.contract import keys, records

BITS_PER_BYTE = 8.0
FUSION_WINDOW_SECONDS = 0.005
"""The cycle time (Horovod's default, 5 ms): gradients ready within it of a bucket's first share the bucket."""
FUSION_BYTES = 64 * 1024 * 1024
"""The fusion threshold (Horovod's default, 64 MiB): a bucket never grows past it (a bigger gradient goes alone)."""
BANDWIDTHS_GBIT = (1, 10, 25, 40, 100)
"""Link rates swept by default, in Gbit/s: from a cloud VM's NIC to a datacentre's fastest."""
COMPRESSIONS = (1, 2, 4, 8)
"""Compression ratios swept by default: 1 (none) to 8 (e.g. fp32 -> 4-bit)."""

AddCost = addcost.AddCost
no_add = addcost.no_add
linear_add = addcost.linear_add
fixed_plus_per_byte = addcost.fixed_plus_per_byte
SEARCH_MAX_COMPRESSION = 1e12
"""SEARCH_MAX_COMPRESSION bounds compression_needed's search: past it, a target is called unreachable."""


@dataclasses.dataclass(frozen=True)
class Gradient:
    name: str
    size_bytes: float
    ready_seconds: float
    """ready_seconds is when backward produced the gradient, in seconds from the start of backward."""


@dataclasses.dataclass(frozen=True)
class BackwardProfile:
    """One iteration's backward as the model sees it: gradients in ready order, and how long backward lasted."""

    gradients: tuple[Gradient, ...]
    backward_seconds: float

    @property
    def total_bytes(self) -> float:
        return sum(g.size_bytes for g in self.gradients)


@dataclasses.dataclass(frozen=True)
class Bucket:
    size_bytes: float
    ready_seconds: float
    """ready_seconds is when the bucket's last gradient was ready: it may be allreduced from then on."""
    gradients: int


@dataclasses.dataclass(frozen=True)
class WhatIf:
    """The model's answer for one (workers, bandwidth, compression) point; seconds from the start of backward."""

    workers: int
    bandwidth_bits_per_second: float
    compression: float
    buckets: tuple[Bucket, ...]
    allreduce_starts: tuple[float, ...]
    allreduce_ends: tuple[float, ...]
    overhead_seconds: float
    """overhead_seconds: end of the last allreduce minus end of backward, at least 0, plus codec seconds when c > 1."""
    batch_seconds: float | None = None
    """batch_seconds is t_batch, one device's iteration time, when given."""

    @property
    def scaling_factor(self) -> float | None:
        return None if self.batch_seconds is None else scaling_factor(self.batch_seconds, self.overhead_seconds)


# ---------------------------------------------------------------------------------------------
# The model


def fuse(gradients: Iterable[Gradient], window_seconds: float = FUSION_WINDOW_SECONDS,
         cap_bytes: float = FUSION_BYTES) -> list[Bucket]:
    """Buckets in ready order. A gradient joins the open bucket if it was ready less than `window_seconds`
    after the bucket's first one and the bucket stays within `cap_bytes`; otherwise the bucket closes
    (ready at its last gradient) and the gradient opens the next one."""
    buckets: list[Bucket] = []
    opened = size = last = 0.0
    count = 0
    for gradient in sorted(gradients, key=lambda g: g.ready_seconds):
        if count and (gradient.ready_seconds - opened >= window_seconds or size + gradient.size_bytes > cap_bytes):
            buckets.append(Bucket(size, last, count))
            count, size = 0, 0.0
        if not count:
            opened = gradient.ready_seconds
        count += 1
        size += gradient.size_bytes
        last = gradient.ready_seconds
    if count:
        buckets.append(Bucket(size, last, count))
    return buckets


def allreduce_seconds(size_bytes: float, workers: int, bandwidth_bits_per_second: float, compression: float = 1.0,
                      add: AddCost = no_add) -> float:
    """One ring allreduce of `size_bytes`: 2*(8*S*(N-1)/N)/(bw*c) + (N-1)*add(S/N); 0 for one worker."""
    if workers < 1:
        raise ValueError(f"workers must be greater than or equal to 1, got {workers}")
    if not bandwidth_bits_per_second > 0 or not compression > 0:
        raise ValueError("bandwidth_bits_per_second and compression must be greater than 0")
    if workers == 1:
        return 0.0
    transfer = 2.0 * (BITS_PER_BYTE * size_bytes * (workers - 1) / workers) / (bandwidth_bits_per_second * compression)
    return transfer + (workers - 1) * add(size_bytes / workers)


def simulate(profile: BackwardProfile, workers: int, bandwidth_bits_per_second: float, compression: float = 1.0,
             add: AddCost = no_add, batch_seconds: float | None = None, window_seconds: float = FUSION_WINDOW_SECONDS,
             cap_bytes: float = FUSION_BYTES, codec_seconds: float = 0.0) -> WhatIf:
    """Fuse, then allreduce the buckets FIFO on one channel, each at max(channel free, bucket ready); compressing
    (c > 1) costs `codec_seconds` more per iteration."""
    buckets = fuse(profile.gradients, window_seconds, cap_bytes)
    starts, ends = [], []
    channel_free = 0.0
    for bucket in buckets:
        start = max(channel_free, bucket.ready_seconds)
        channel_free = start + allreduce_seconds(bucket.size_bytes, workers, bandwidth_bits_per_second, compression, add)
        starts.append(start)
        ends.append(channel_free)
    last_end = ends[-1] if ends else 0.0
    codec = codec_seconds if compression > 1 and workers > 1 else 0.0
    return WhatIf(workers, bandwidth_bits_per_second, compression, tuple(buckets), tuple(starts), tuple(ends),
                  max(0.0, last_end - profile.backward_seconds) + codec, batch_seconds)


def scaling_factor(batch_seconds: float, overhead_seconds: float) -> float:
    """SF = t_batch / (t_batch + overhead): the fraction of linear scaling the network leaves."""
    if not batch_seconds > 0 or overhead_seconds < 0:
        raise ValueError("batch_seconds must be greater than 0 and overhead_seconds greater than or equal to 0")
    return batch_seconds / (batch_seconds + overhead_seconds)


def sweep(profile: BackwardProfile, workers: int, batch_seconds: float | None = None,
          bandwidths_bits_per_second: Sequence[float] = tuple(g * 1e9 for g in BANDWIDTHS_GBIT),
          compressions: Sequence[float] = COMPRESSIONS, add: AddCost = no_add,
          window_seconds: float = FUSION_WINDOW_SECONDS, cap_bytes: float = FUSION_BYTES,
          codec_seconds: float = 0.0) -> list[WhatIf]:
    """`simulate` at every bandwidth x compression, bandwidth-major (SF per link rate)."""
    return [simulate(profile, workers, bandwidth, compression, add, batch_seconds, window_seconds, cap_bytes,
                     codec_seconds)
            for bandwidth in bandwidths_bits_per_second for compression in compressions]


@dataclasses.dataclass(frozen=True)
class Needed:
    """The compression a target scaling factor needs at one (workers, bandwidth) point."""

    workers: int
    bandwidth_bits_per_second: float
    target: float
    compression: float | None
    """compression is the smallest ratio >= 1 reaching the target (within the search's tolerance), None when unreachable."""
    limit: float
    """limit is the SF at infinite compression: what the add cost and the ready times alone leave."""


def compression_needed(profile: BackwardProfile, workers: int, bandwidth_bits_per_second: float, target: float,
                       batch_seconds: float, add: AddCost = no_add, window_seconds: float = FUSION_WINDOW_SECONDS,
                       cap_bytes: float = FUSION_BYTES, relative_tolerance: float = 1e-6) -> Needed:
    """The smallest compression ratio c >= 1 with SF(c) >= target, by bisection.

    Bisection is exact here because SF never decreases as c grows: every bucket's allreduce gets shorter,
    and a FIFO channel's start and end times (sums and maxima of those durations and of fixed ready times)
    can then only move earlier. The answer is the upper end of the last bracket, so SF there meets the
    target, and lies within `relative_tolerance` of the true ratio. Unreachable (compression None) when
    even infinite compression, where only the reduction arithmetic is left, misses the target."""
    if not 0 < target <= 1:
        raise ValueError(f"the target scaling factor must be greater than 0 and at most 1, got {target}")

    def sf(compression: float) -> float:
        return simulate(profile, workers, bandwidth_bits_per_second, compression, add, batch_seconds,
                        window_seconds, cap_bytes).scaling_factor

    limit = sf(math.inf)
    if sf(1.0) >= target:
        return Needed(workers, bandwidth_bits_per_second, target, 1.0, limit)
    if limit < target:
        return Needed(workers, bandwidth_bits_per_second, target, None, limit)
    low, high = 1.0, 2.0
    while sf(high) < target:
        low, high = high, 2 * high
        if high > SEARCH_MAX_COMPRESSION:  # the limit meets the target only in the limit
            return Needed(workers, bandwidth_bits_per_second, target, None, limit)
    while high - low > relative_tolerance * low:
        middle = (low + high) / 2
        low, high = (middle, high) if sf(middle) < target else (low, middle)
    return Needed(workers, bandwidth_bits_per_second, target, high, limit)


# ---------------------------------------------------------------------------------------------
# From the runtime's records


def profile_from_layers(layers: dict) -> BackwardProfile:
    """The median iteration of a layers.json document (timing.IterationTimer.layers()).

    Each parameter's ready time is its median offset from backwardStart over the traced iterations
    it appeared in (a parameter with no gradient in any of them is left out); backward lasts the
    median of backwardEnd - backwardStart."""
    iterations = layers.get("iterations") or []
    if not iterations:
        raise ValueError("layers.json has no traced iterations: run more than warmupIterations iterations "
                         "(RINGLEADER_TRACE_ITERATIONS > 0)")
    offsets: dict[str, list[float]] = {}
    for iteration in iterations:
        start = iteration["backwardStart"]
        for name, ready in iteration["ready"].items():
            offsets.setdefault(name, []).append(ready - start)
    gradients = [Gradient(p["name"], float(p["bytes"]), statistics.median(offsets[p["name"]]))
                 for p in layers["parameters"] if p["name"] in offsets]
    backward = statistics.median(i["backwardEnd"] - i["backwardStart"] for i in iterations)
    return BackwardProfile(tuple(sorted(gradients, key=lambda g: g.ready_seconds)), backward)


def batch_seconds_from_records(iterations: list[dict]) -> float:
    """t_batch of a rank: its median compute time (data, forward, backward, update) after warm-up, the statistic
    of the layer profile's median iteration it is set beside."""
    counted = summary.measured(iterations, constants.ROLE_WORKER)
    if not counted:
        raise ValueError("no worker iteration records")
    return statistics.median(sum(r.get(phase) or 0.0 for phase in keys.COMPUTE_PHASES) for r in counted)


@dataclasses.dataclass(frozen=True)
class MeasuredCompression:
    """What a compressed trial's rank measured: c = bytes uncompressed over bytes sent, and time/codec."""

    compression: float
    codec_seconds: float


def measured_compression(iterations: list[dict]) -> MeasuredCompression | None:
    """The compression a rank's records measured after warm-up (bytes/uncompressed over bytes/sent, mean
    time/codec); None without compression (or records that do not say)."""
    counted = summary.measured(iterations, constants.ROLE_WORKER)
    sent = sum(r.get(keys.BYTES_SENT) or 0.0 for r in counted)
    uncompressed = sum(r.get(keys.BYTES_UNCOMPRESSED) or 0.0 for r in counted)
    if not sent or not uncompressed or uncompressed <= sent:
        return None
    return MeasuredCompression(uncompressed / sent, statistics.fmean(r.get(keys.TIME_CODEC) or 0.0 for r in counted))


def read_rank(rank_dir: str | pathlib.Path) -> tuple[BackwardProfile, float]:
    """(profile, t_batch) of a rank directory holding layers.json and iterations.jsonl."""
    rank_dir = pathlib.Path(rank_dir)
    layers = json.loads((rank_dir / records.LAYERS_FILE).read_text())
    return profile_from_layers(layers), batch_seconds_from_records(records.read_iterations(rank_dir / records.ITERATIONS_FILE))


def profile_from_document(document: Any) -> tuple[BackwardProfile, float]:
    """(profile, t_batch) of a profile file's document (docs/whatif.md):
    {"batchSeconds": t, "backwardSeconds": t, "gradients": [{"name": str, "bytes": n, "readySeconds": t}, ...]}."""
    if not isinstance(document, Mapping):
        raise ValueError("a profile must be a JSON object with batchSeconds, backwardSeconds and gradients")
    problems = []
    batch, backward = document.get("batchSeconds"), document.get("backwardSeconds")
    if not summary.is_number(batch) or not batch > 0:
        problems.append("`batchSeconds` (one worker's iteration time, seconds) must be a number greater than 0")
    if not summary.is_number(backward) or backward < 0:
        problems.append("`backwardSeconds` (how long backward lasts, seconds) must be a number greater than or "
                        "equal to 0")
    entries = document.get("gradients")
    if not isinstance(entries, list) or not entries:
        problems.append("`gradients` must be a non-empty list of {name, bytes, readySeconds}")
        entries = []
    gradients = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            problems.append(f"`gradients[{index}]` must be an object {{name, bytes, readySeconds}}")
            continue
        size, ready = entry.get("bytes"), entry.get("readySeconds")
        if not summary.is_number(size) or size < 0:
            problems.append(f"`gradients[{index}].bytes` must be a number greater than or equal to 0")
        if not summary.is_number(ready) or ready < 0:
            problems.append(f"`gradients[{index}].readySeconds` (seconds from the start of backward) must be a "
                            "number greater than or equal to 0")
        if not problems:
            gradients.append(Gradient(str(entry.get("name", f"gradient-{index}")), float(size), float(ready)))
    if problems:
        raise ValueError("; ".join(problems))
    return BackwardProfile(tuple(sorted(gradients, key=lambda g: g.ready_seconds)), float(backward)), float(batch)


def profile_document(profile: BackwardProfile, batch_seconds: float) -> dict[str, Any]:
    """The profile file's document of (profile, t_batch): profile_from_document reads it back."""
    return {"batchSeconds": batch_seconds, "backwardSeconds": profile.backward_seconds,
            "gradients": [{"name": g.name, "bytes": g.size_bytes, "readySeconds": g.ready_seconds}
                          for g in profile.gradients]}


def table(results: Sequence[WhatIf]) -> str:
    lines = [f"{'Gbit/s':>7} {'compr':>6} {'buckets':>7} {'overhead ms':>12} {'SF':>6}"]
    for r in results:
        sf = r.scaling_factor
        lines.append(f"{r.bandwidth_bits_per_second / 1e9:>7g} {r.compression:>6g} {len(r.buckets):>7} "
                     f"{1000 * r.overhead_seconds:>12.3f} {'-' if sf is None else f'{sf:.3f}':>6}")
    return "\n".join(lines)
