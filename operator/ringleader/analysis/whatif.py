"""What-if network model: how much would faster links, more workers or gradient compression cost or save?

Called by `ringleader whatif` (launch/whatif.py), by the report's scaling figures (scaling.py) and from
Python. Pure arithmetic over a worker's profile (analysis/profile.py, the reader `ringleader predict` uses
too); docs/whatif.md explains the model and its limits.

The profile's gradients are grouped into buckets by a bucketing rule (analysis/overlap.py: Horovod's
fusion window by default, or the runtime's ring buckets) and the buckets allreduced first-in first-out on
one channel while backward runs (overlap.replay, the simulator of `ringleader predict`'s DAG model too), a
bucket of S bytes costing 2*(8*S*(N-1)/N)/(bw*c) + (N-1)*add(S/N) at bandwidth bw (bits/s) and
compression ratio c; overhead = end of the last allreduce - end of backward (0 when all is hidden), plus,
when compressing (c > 1), the codec's encoding and decoding per iteration (a compressed trial's measured
time/codec, `measured_compression`); scaling factor SF = t_batch / (t_batch + overhead), t_batch one
worker's median iteration without communication.

Profiles are best taken from a one-worker trial: its backward has no communication competing for the
CPU. Ready times are host times of the gradient hooks (timing.py), so on GPU they are launch times,
earlier than the real gradient; the model is optimistic there.
"""

from __future__ import annotations

import dataclasses
import json
import math
import pathlib
import statistics
from typing import Sequence

from ringleader.analysis import addcost, overlap, summary
from ringleader.analysis import profile as profile_
from ringleader.api import constants
from ringleader.contract import keys, records

BITS_PER_BYTE = 8.0
BANDWIDTHS_GBIT = (1, 10, 25, 40, 100)
"""Link rates swept by default, in Gbit/s: from a cloud VM's NIC to a datacentre's fastest."""
COMPRESSIONS = (1, 2, 4, 8)
"""Compression ratios swept by default: 1 (none) to 8 (e.g. fp32 -> 4-bit)."""
FUSION = overlap.FusionWindow()
"""FUSION is the default bucketing: Horovod's tensor fusion, a 5 ms cycle time and a 64 MiB threshold."""

AddCost = addcost.AddCost
no_add = addcost.no_add
linear_add = addcost.linear_add
fixed_plus_per_byte = addcost.fixed_plus_per_byte
SEARCH_MAX_COMPRESSION = 1e12
"""SEARCH_MAX_COMPRESSION bounds compression_needed's search: past it, a target is called unreachable."""


@dataclasses.dataclass(frozen=True)
class WhatIf:
    """The model's answer for one (workers, bandwidth, compression) point; seconds from the start of backward."""

    workers: int
    bandwidth_bits_per_second: float
    compression: float
    replay: overlap.Replay
    """replay is backward with the buckets allreduced: each bucket, and when its allreduce started and ended."""
    batch_seconds: float | None = None
    """batch_seconds is t_batch, one device's iteration time, when given."""
    codec_seconds: float = 0.0
    """codec_seconds is the encoding and decoding a compressed iteration adds (0 uncompressed)."""

    @property
    def buckets(self) -> tuple[overlap.Bucket, ...]:
        return self.replay.buckets

    @property
    def overhead_seconds(self) -> float:
        """End of the last allreduce minus end of backward, at least 0, plus the codec's seconds when c > 1."""
        return self.replay.exposed_seconds + self.codec_seconds

    @property
    def scaling_factor(self) -> float | None:
        return None if self.batch_seconds is None else scaling_factor(self.batch_seconds, self.overhead_seconds)


# ---------------------------------------------------------------------------------------------
# The model


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


def simulate(profile: profile_.Profile, workers: int, bandwidth_bits_per_second: float, compression: float = 1.0,
             add: AddCost = no_add, batch_seconds: float | None = None,
             bucketing: overlap.Bucketing = FUSION, codec_seconds: float = 0.0) -> WhatIf:
    """Bucket the gradients, then allreduce the buckets FIFO on one channel, each at max(channel free, bucket ready);
    compressing (c > 1) costs `codec_seconds` more per iteration."""
    return WhatIf(workers, bandwidth_bits_per_second, compression, overlap.replay(
        profile, bucketing, lambda size: allreduce_seconds(size, workers, bandwidth_bits_per_second, compression, add)),
        batch_seconds, codec_seconds if compression > 1 and workers > 1 else 0.0)


def scaling_factor(batch_seconds: float, overhead_seconds: float) -> float:
    """SF = t_batch / (t_batch + overhead): the fraction of linear scaling the network leaves."""
    if not batch_seconds > 0 or overhead_seconds < 0:
        raise ValueError("batch_seconds must be greater than 0 and overhead_seconds greater than or equal to 0")
    return batch_seconds / (batch_seconds + overhead_seconds)


def sweep(profile: profile_.Profile, workers: int, batch_seconds: float | None = None,
          bandwidths_bits_per_second: Sequence[float] = tuple(g * 1e9 for g in BANDWIDTHS_GBIT),
          compressions: Sequence[float] = COMPRESSIONS, add: AddCost = no_add,
          bucketing: overlap.Bucketing = FUSION, codec_seconds: float = 0.0) -> list[WhatIf]:
    """`simulate` at every bandwidth x compression, bandwidth-major (SF per link rate)."""
    return [simulate(profile, workers, bandwidth, compression, add, batch_seconds, bucketing, codec_seconds)
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


def compression_needed(profile: profile_.Profile, workers: int, bandwidth_bits_per_second: float, target: float,
                       batch_seconds: float, add: AddCost = no_add, bucketing: overlap.Bucketing = FUSION,
                       relative_tolerance: float = 1e-6) -> Needed:
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
                        bucketing).scaling_factor

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


def from_rank(layers: dict, iterations: list[dict]) -> tuple[profile_.Profile, float]:
    """(profile, t_batch) of one worker rank: its profile (profile.of_rank, as `ringleader predict` reads it), and
    t_batch its median iteration less communication, waiting and encoding (profile.Compute), after warm-up: the
    statistic of the profile's median backward it is set beside; a codec's time is overhead (simulate)."""
    return profile_.of_rank(layers, iterations), profile_.compute({0: iterations}, (keys.TIME_CODEC,)).median_seconds


def read_rank(rank_dir: str | pathlib.Path) -> tuple[profile_.Profile, float]:
    """(profile, t_batch) of a rank directory holding layers.json and iterations.jsonl."""
    rank_dir = pathlib.Path(rank_dir)
    return from_rank(json.loads((rank_dir / records.LAYERS_FILE).read_text()),
                     records.read_iterations(rank_dir / records.ITERATIONS_FILE))


@dataclasses.dataclass(frozen=True)
class MeasuredCompression:
    """What a compressed trial's rank measured: c = bytes uncompressed over bytes sent, and time/codec."""

    compression: float
    codec_seconds: float


def measured_compression(iterations: list[dict]) -> MeasuredCompression | None:
    """The compression a rank's records measured after warm-up (bytes/uncompressed over bytes/sent, mean
    time/codec, as the trial's mean_time_codec_ms); None without compression (or records that do not say)."""
    counted = summary.measured(iterations, constants.ROLE_WORKER)
    sent = sum(r.get(keys.BYTES_SENT) or 0.0 for r in counted)
    uncompressed = sum(r.get(keys.BYTES_UNCOMPRESSED) or 0.0 for r in counted)
    if not sent or not uncompressed or uncompressed <= sent:
        return None
    return MeasuredCompression(uncompressed / sent, statistics.fmean(r.get(keys.TIME_CODEC) or 0.0 for r in counted))


def table(results: Sequence[WhatIf]) -> str:
    """The results as a text table; TERMS defines its columns."""
    lines = [f"{'Gbit/s':>7} {'compression':>11} {'buckets':>7} {'overhead ms':>12} {'SF':>6}"]
    for r in results:
        sf = r.scaling_factor
        lines.append(f"{r.bandwidth_bits_per_second / 1e9:>7g} {r.compression:>11g} {len(r.buckets):>7} "
                     f"{1000 * r.overhead_seconds:>12.3f} {'-' if sf is None else f'{sf:.3f}':>6}")
    return "\n".join(lines)


TERMS = ("Gbit/s: the link's bandwidth; compression: the ratio c the gradients are compressed by (bytes sent / c; "
         "1 = none); buckets: how many allreduces the bucketing made; overhead ms: the communication still running "
         "when backward ends; SF: the scaling factor t_batch / (t_batch + overhead), the fraction of linear scaling "
         "the network leaves, t_batch being one worker's iteration without communication")
