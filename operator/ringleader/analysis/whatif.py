"""Study 3's what-if network model: how much would faster links or gradient compression help this model?

Called by users on a finished trial (`python -m ringleader.analysis.whatif <trial>/rank-0 --workers 8`),
by docs/performance.md's examples and by reports. The model is pure arithmetic over a backward profile.

The model (Zhang et al., NetAI 2020, arXiv 2006.10103), from one rank's layers.json (records.py):
backward emits layer gradients at their measured ready times; they are fused into buckets (a bucket
closes once ~5 ms of backward has passed since it opened, or before it would exceed 64 MiB); buckets
are allreduced in FIFO order on one channel, each starting at max(channel free, bucket ready), a
bucket of S bytes costing  2*(8*S*(N-1)/N)/(bw*c) + (N-1)*add(S/N)  at bandwidth bw (bits/s) and
compression ratio c; overhead = end of the last allreduce - end of backward (0 when all is hidden);
scaling factor SF = t_batch / (t_batch + overhead).

Profiles are best taken from a one-worker trial: its backward has no communication competing for the
CPU, and its compute time is study 3's t_batch. Ready times are host times of the gradient hooks
(timing.py), so on GPU they are launch times, earlier than the real gradient; the model is optimistic there.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import statistics
import sys
from typing import Callable, Iterable, Sequence

from ringleader.analysis import summary
from ringleader.api import constants
from ringleader.contract import keys, records

BITS_PER_BYTE = 8.0
FUSION_WINDOW_SECONDS = 0.005
"""Horovod's cycle time, which the study's simulator uses: gradients ready within 5 ms share a bucket."""
FUSION_BYTES = 64 * 1024 * 1024
"""Horovod's fusion threshold (64 MiB): a bucket never grows past it (a bigger gradient goes alone)."""
BANDWIDTHS_GBIT = (1, 10, 25, 40, 100)
"""The link rates the study capped its NICs to with `tc ... tbf`, in Gbit/s."""
COMPRESSIONS = (1, 2, 4, 8)
"""Compression ratios swept by default: 1 (none) to 8 (e.g. fp32 -> 4-bit)."""

AddCost = Callable[[float], float]
"""add(bytes) -> seconds: the reduction arithmetic of one ring step on `bytes` bytes."""


def no_add(_size_bytes: float) -> float:
    return 0.0


def linear_add(seconds_per_byte: float) -> AddCost:
    """add(S) = seconds_per_byte * S, e.g. from timing torch.add on the target device."""
    if seconds_per_byte < 0:
        raise ValueError(f"seconds_per_byte must be greater than or equal to 0, got {seconds_per_byte}")
    return lambda size_bytes: seconds_per_byte * size_bytes


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
    """overhead_seconds: end of the last allreduce minus end of backward, at least 0."""
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
             cap_bytes: float = FUSION_BYTES) -> WhatIf:
    """Fuse, then allreduce the buckets FIFO on one channel, each at max(channel free, bucket ready)."""
    buckets = fuse(profile.gradients, window_seconds, cap_bytes)
    starts, ends = [], []
    channel_free = 0.0
    for bucket in buckets:
        start = max(channel_free, bucket.ready_seconds)
        channel_free = start + allreduce_seconds(bucket.size_bytes, workers, bandwidth_bits_per_second, compression, add)
        starts.append(start)
        ends.append(channel_free)
    last_end = ends[-1] if ends else 0.0
    return WhatIf(workers, bandwidth_bits_per_second, compression, tuple(buckets), tuple(starts), tuple(ends),
                  max(0.0, last_end - profile.backward_seconds), batch_seconds)


def scaling_factor(batch_seconds: float, overhead_seconds: float) -> float:
    """SF = t_batch / (t_batch + overhead): the fraction of linear scaling the network leaves."""
    if not batch_seconds > 0 or overhead_seconds < 0:
        raise ValueError("batch_seconds must be greater than 0 and overhead_seconds greater than or equal to 0")
    return batch_seconds / (batch_seconds + overhead_seconds)


def sweep(profile: BackwardProfile, workers: int, batch_seconds: float | None = None,
          bandwidths_bits_per_second: Sequence[float] = tuple(g * 1e9 for g in BANDWIDTHS_GBIT),
          compressions: Sequence[float] = COMPRESSIONS, add: AddCost = no_add) -> list[WhatIf]:
    """`simulate` at every bandwidth x compression, bandwidth-major (the study's figure: SF per link rate)."""
    return [simulate(profile, workers, bandwidth, compression, add, batch_seconds)
            for bandwidth in bandwidths_bits_per_second for compression in compressions]


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
    """t_batch of a rank: its mean compute time (data, forward, backward, update) after warm-up."""
    counted = summary.measured(iterations, constants.ROLE_WORKER)
    if not counted:
        raise ValueError("no worker iteration records")
    return statistics.fmean(sum(r.get(phase) or 0.0 for phase in keys.COMPUTE_PHASES) for r in counted)


def read_rank(rank_dir: str | pathlib.Path) -> tuple[BackwardProfile, float]:
    """(profile, t_batch) of a rank directory holding layers.json and iterations.jsonl."""
    rank_dir = pathlib.Path(rank_dir)
    layers = json.loads((rank_dir / records.LAYERS_FILE).read_text())
    return profile_from_layers(layers), batch_seconds_from_records(records.read_iterations(rank_dir / records.ITERATIONS_FILE))


def table(results: Sequence[WhatIf]) -> str:
    lines = [f"{'Gbit/s':>7} {'compr':>6} {'buckets':>7} {'overhead ms':>12} {'SF':>6}"]
    for r in results:
        sf = r.scaling_factor
        lines.append(f"{r.bandwidth_bits_per_second / 1e9:>7g} {r.compression:>6g} {len(r.buckets):>7} "
                     f"{1000 * r.overhead_seconds:>12.3f} {'-' if sf is None else f'{sf:.3f}':>6}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ringleader.analysis.whatif", description=__doc__.splitlines()[0])
    parser.add_argument("rank_dir", help="a rank directory of a finished trial (<output>/<trial>/rank-<r>)")
    parser.add_argument("--workers", type=int, default=8, help="N, the workers to model (default 8)")
    parser.add_argument("--add-ns-per-byte", type=float, default=0.0,
                        help="cost of the reduction arithmetic, nanoseconds per byte (default 0: ignored)")
    args = parser.parse_args(argv)
    profile, batch = read_rank(args.rank_dir)
    print(f"{len(profile.gradients)} gradients, {profile.total_bytes / 1e6:.2f} MB, backward "
          f"{1000 * profile.backward_seconds:.2f} ms, t_batch {1000 * batch:.2f} ms, N={args.workers}")
    print(table(sweep(profile, args.workers, batch, add=linear_add(args.add_ns_per_byte * 1e-9))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
