"""What-if network model: how much would faster links, more workers or gradient compression cost or save?

Called by `ringleader whatif` (commands/whatif.py), by the report's network figure (scaling.py), by
bench/bench_compression_whatif.py and from Python. Pure arithmetic over a worker's profile
(models/profile.py, the reader `ringleader predict` uses too); docs/whatif.md explains the model and its limits.

The profile's gradients are grouped into buckets by a bucketing rule (models/overlap.py: the runtime's ring
buckets for a measured trial, Horovod's fusion window for a profile file) and each bucket's first round
allreduced first-in first-out on one channel while backward runs (overlap.replay, the simulator of `ringleader
predict`'s DAG model too). A round sending W bytes per rank (models/collectives.py: 2(N-1)/N of its payload, the
payload S/c for compression ratio c) costs 8*W/bw at bandwidth bw (bits/s), or a trial's measured collective of
that payload when longer (`floor`: what the machine's collectives cost however fast the link, as the runtime's
emulated link hides them), plus (N-1)*add(S/N) of reduction arithmetic. The hierarchical ring's round (`pods`: k
ranks to a pod, the link inside a pod) is a ring of k inside each pod on that link and one of the P pods across at bw,
2(k-1)/k * S and 2(P-1)/P * S through the pod's NIC, plus (k-1)*add(S/k) + (P-1)*add(S/N). A method's later rounds
(PowerSGD's Q) follow every bucket's first. Then

    overhead = exposed + later rounds + codec + wait
    SF       = t_batch / (t_batch + overhead)

exposed the end of the last first round less the end of backward (0 when all is hidden), codec the encoding and
decoding per iteration (a compressed trial's measured time/codec), wait the BSP wait for each iteration's
slowest worker (a trial's: its workers' median slowest compute less t_batch), t_batch one worker's median
iteration without communication, waiting or codec. A trial's measured SF is t_batch over its median iteration
(`measured_scaling_factor`), the same quantities.

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
from typing import Any, Mapping, Sequence

from ringleader.models import addcost, calibration, collectives, cost_models, overlap, recorded
from ringleader.models import profile as profile_
from ringleader.models.results import TrialResult
from ringleader.api import constants, variants
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
    """compression is the ratio c the wire sends the gradients by (collectives.Wire.ratio)."""
    replay: overlap.Replay
    """replay is backward with the buckets' first rounds sent: each bucket, and when that round started and ended."""
    batch_seconds: float | None = None
    """batch_seconds is t_batch, one device's iteration time, when given."""
    codec_seconds: float = 0.0
    """codec_seconds is the encoding and decoding a compressed iteration adds (0 uncompressed)."""
    later_seconds: float = 0.0
    """later_seconds are the rounds after every bucket's first (PowerSGD's Q), one after another."""
    wait_seconds: float = 0.0
    """wait_seconds is the BSP wait for each iteration's slowest worker."""
    label: str = ""
    """label names the compression method, '' for a ratio."""

    @property
    def buckets(self) -> tuple[overlap.ReplayBucket, ...]:
        return self.replay.buckets

    @property
    def overhead_seconds(self) -> float:
        """End of the last first round minus end of backward, at least 0, plus the later rounds, codec and wait."""
        return self.replay.exposed_seconds + self.later_seconds + self.codec_seconds + self.wait_seconds

    @property
    def scaling_factor(self) -> float | None:
        return None if self.batch_seconds is None else scaling_factor(self.batch_seconds, self.overhead_seconds)


# ---------------------------------------------------------------------------------------------
# The model


def round_seconds(size_bytes: float, workers: int, bandwidth_bits_per_second: float, round_: collectives.RoundFractions,
                  add: AddCost = no_add, floor: cost_models.CommCost | None = None,
                  pods: cost_models.Pods | None = None) -> float:
    """One round of a bucket of `size_bytes`: 8*(its wire bytes)/bw, or `floor` (a + b*payload, a measured
    collective) when longer, plus (N-1)*add(added/N); 0 for one worker. With `pods`, the hierarchical ring's."""
    if workers < 1:
        raise ValueError(f"workers must be greater than or equal to 1, got {workers}")
    if not bandwidth_bits_per_second > 0:
        raise ValueError("bandwidth_bits_per_second must be greater than 0")
    if workers == 1:
        return 0.0
    if pods is not None and pods.ranks > 1:
        k, count = pods.ranks, pods.count(workers)
        inside = pods.link(cost_models.Nic(bandwidth_bits_per_second))
        added = round_.added_bytes(size_bytes)
        return (inside.transfer_seconds(round_.wire_bytes(size_bytes, k)) + 2.0 * (k - 1) * inside.latency_seconds
                + BITS_PER_BYTE * round_.wire_bytes(size_bytes, count) / bandwidth_bits_per_second
                + (k - 1) * add(added / k) + (count - 1) * add(added / workers))
    transfer = BITS_PER_BYTE * round_.wire_bytes(size_bytes, workers) / bandwidth_bits_per_second
    if floor is not None:
        transfer = max(transfer, floor.seconds(round_.payload * size_bytes))
    return transfer + (workers - 1) * add(round_.added_bytes(size_bytes) / workers)


def allreduce_seconds(size_bytes: float, workers: int, bandwidth_bits_per_second: float, compression: float = 1.0,
                      add: AddCost = no_add) -> float:
    """One ring allreduce of `size_bytes` compressed by c: 2*(8*S*(N-1)/N)/(bw*c) + (N-1)*add(S/N); 0 for one worker."""
    return round_seconds(size_bytes, workers, bandwidth_bits_per_second, collectives.uniform(compression).rounds[0],
                         add)


def simulate(profile: profile_.Profile, workers: int, bandwidth_bits_per_second: float,
             compression: float | collectives.Wire = 1.0, add: AddCost = no_add, batch_seconds: float | None = None,
             bucketing: overlap.Bucketing = FUSION, floor: cost_models.CommCost | None = None,
             wait_seconds: float = 0.0, pods: cost_models.Pods | None = None) -> WhatIf:
    """Bucket the gradients, send each bucket's first round FIFO on one channel, each at max(channel free, bucket
    ready), then the later rounds of every bucket; a ratio c is collectives.uniform(c), a Wire brings its codec's cost.
    `pods`: the hierarchical ring's rounds (round_seconds)."""
    chosen = compression if isinstance(compression, collectives.Wire) else collectives.uniform(compression)
    first, *later = chosen.rounds

    def seconds(size: float, round_: collectives.RoundFractions) -> float:
        return round_seconds(size, workers, bandwidth_bits_per_second, round_, add, floor, pods)

    replay = overlap.replay(profile, bucketing, lambda size: seconds(size, first))
    distributed = workers > 1
    ratio = (chosen.ratio(workers) if isinstance(compression, collectives.Wire)
             else compression)  # a ratio as it was asked
    return WhatIf(workers, bandwidth_bits_per_second, ratio, replay, batch_seconds,
                  chosen.codec_seconds if distributed else 0.0,
                  sum(seconds(bucket.size_bytes, r) for r in later for bucket in replay.buckets),
                  wait_seconds if distributed else 0.0, chosen.label)


def scaling_factor(batch_seconds: float, overhead_seconds: float) -> float:
    """SF = t_batch / (t_batch + overhead): the fraction of linear scaling the network leaves."""
    if not batch_seconds > 0 or overhead_seconds < 0:
        raise ValueError("batch_seconds must be greater than 0 and overhead_seconds greater than or equal to 0")
    return batch_seconds / (batch_seconds + overhead_seconds)


def sweep(profile: profile_.Profile, workers: int, batch_seconds: float | None = None,
          bandwidths_bits_per_second: Sequence[float] = tuple(g * 1e9 for g in BANDWIDTHS_GBIT),
          compressions: Sequence[float | collectives.Wire] = COMPRESSIONS, add: AddCost = no_add,
          bucketing: overlap.Bucketing = FUSION, floor: cost_models.CommCost | None = None,
          wait_seconds: float = 0.0, pods: cost_models.Pods | None = None) -> list[WhatIf]:
    """`simulate` at every bandwidth x compression, bandwidth-major (SF per link rate)."""
    return [simulate(profile, workers, bandwidth, compression, add, batch_seconds, bucketing, floor, wait_seconds, pods)
            for bandwidth in bandwidths_bits_per_second for compression in compressions]


@dataclasses.dataclass(frozen=True)
class Needed:
    """The compression a target scaling factor needs at one (workers, bandwidth) point."""

    workers: int
    bandwidth_bits_per_second: float
    target: float
    compression: float | None
    """compression is the smallest ratio >= 1 reaching the target (within the search's tolerance), None when
    unreachable."""
    limit: float
    """limit is the SF at infinite compression: what the add cost and the ready times alone leave."""


def compression_needed(profile: profile_.Profile, workers: int, bandwidth_bits_per_second: float, target: float,
                       batch_seconds: float, add: AddCost = no_add, bucketing: overlap.Bucketing = FUSION,
                       relative_tolerance: float = 1e-6, floor: cost_models.CommCost | None = None,
                       wait_seconds: float = 0.0, pods: cost_models.Pods | None = None) -> Needed:
    """The smallest compression ratio c >= 1 with SF(c) >= target, by bisection.

    Bisection is exact here because SF never decreases as c grows: every bucket's allreduce gets shorter,
    and a FIFO channel's start and end times (sums and maxima of those durations and of fixed ready times)
    can then only move earlier. The answer is the upper end of the last bracket, so SF there meets the
    target, and lies within `relative_tolerance` of the true ratio. Unreachable (compression None) when
    even infinite compression, where only the reduction arithmetic (and a floor, and the wait) is left, misses
    the target. Uncompressed ratios (collectives.uniform) without a codec's cost: the codec is a method's, not a
    ratio's."""
    if not 0 < target <= 1:
        raise ValueError(f"the target scaling factor must be greater than 0 and at most 1, got {target}")

    def sf(compression: float) -> float:
        return scaling_factor(batch_seconds, simulate(profile, workers, bandwidth_bits_per_second, compression, add,
                                                      batch_seconds, bucketing, floor, wait_seconds,
                                                      pods).overhead_seconds)

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


def measured_compression(iterations: Sequence[Mapping[str, Any]]) -> MeasuredCompression | None:
    """The compression a rank's records measured after warm-up (bytes/uncompressed over bytes/sent, mean
    time/codec, as the trial's mean_time_codec_ms); None without compression (or records that do not say)."""
    counted = recorded.measured(iterations, constants.ROLE_WORKER)
    sent = sum(r.get(keys.BYTES_SENT) or 0.0 for r in counted)
    uncompressed = sum(r.get(keys.BYTES_UNCOMPRESSED) or 0.0 for r in counted)
    if not sent or not uncompressed or uncompressed <= sent:
        return None
    return MeasuredCompression(uncompressed / sent, statistics.fmean(r.get(keys.TIME_CODEC) or 0.0 for r in counted))


def measured_scaling_factor(iterations: Sequence[Mapping[str, Any]]) -> float:
    """A worker rank's SF measured as the model defines it: its t_batch (from_rank) over its median iteration,
    after warm-up."""
    batch_seconds = profile_.compute({0: iterations}, (keys.TIME_CODEC,)).median_seconds
    iteration_seconds = profile_.measured_iteration_seconds({0: iterations})
    if iteration_seconds is None:
        raise ValueError("no worker iteration after warm-up among the records")
    return batch_seconds / iteration_seconds


@dataclasses.dataclass(frozen=True)
class Basis:
    """What a trial gives the model: a worker's profile and t_batch, and what the runtime did around them."""

    profile: profile_.Profile
    batch_seconds: float
    workers: int
    bucketing: overlap.Bucketing
    """bucketing is the runtime's ring buckets (as a ring trial recorded them, else the runtime's rule)."""
    wait_seconds: float
    """wait_seconds is the BSP wait: the median of each iteration's slowest worker's compute less t_batch."""
    floor: cost_models.CommCost | None
    """floor is the allreduce the trial's link probe fitted (None without a probe): what a round costs at least."""
    wire: collectives.Wire | None
    """wire is the trial's compression as it measured it (collectives.measured), None uncompressed."""
    cap_gbit: float | None = None
    """cap_gbit is the trial's `network.bandwidth` in Gbit/s (None: uncapped, or a profile file)."""
    pods: cost_models.Pods | None = None
    """pods are a hierarchical ring trial's (its ranks per pod, the probed link inside a pod): its rounds are priced
    on two levels; None: the flat ring."""


def basis(trial: TrialResult, rank: int) -> Basis:
    """The Basis of worker `rank` of a trial (its layers.json and records, every worker's records, its summary's
    link probe). ValueError or KeyError when the rank lacks its profile or records."""
    layers, records_ = dict(trial.layers[rank]), trial.records[rank]
    profile, batch = from_rank(layers, records_)
    workers = len(trial.trial.worker_slots())
    recorded = profile_.bucket_sizes(layers) if variants.ARCHITECTURES[trial.spec.architecture].buckets else ()
    wait = max(0.0, profile_.compute(trial.records, (keys.TIME_CODEC,)).slowest_per_iteration_seconds - batch)
    try:
        probed = calibration.calibrate(trial.summary.link_probe if trial.summary else None, trial.spec)
    except ValueError:  # no probe (one rank, or recorded before probing): the transfer alone
        probed = None
    floor = probed.collective if probed else None
    spec = trial.spec
    pods = None
    if variants.ARCHITECTURES[spec.architecture].hierarchical:  # inside a pod: the probed link, uncapped
        inside = None if probed is None else cost_models.Nic(probed.link.bandwidth_bits_per_second,
                                                             probed.link.latency_seconds)
        pods = cost_models.Pods(spec.workers.pod_ranks, inside)
        floor = None  # the probe's allreduce is the flat ring's
    found, method = measured_compression(records_), trial.spec.compression
    chosen = None
    if found is not None and method.compressing():
        chosen = collectives.measured(profile, method, workers, found.compression, found.codec_seconds)
    cap = trial.spec.network.bits_per_second()
    return Basis(profile, batch, workers, overlap.RuntimeBuckets(recorded=recorded), wait if workers > 1 else 0.0,
                 floor, chosen, cap / 1e9 if cap else None, pods)


def plateau(results: Sequence[WhatIf]) -> float | None:
    """The lowest swept bandwidth from which faster links change no result's overhead (one worker count's
    results), None where the fastest link still gains: a floor, not the link, bounds the iteration there."""
    bandwidths = sorted({r.bandwidth_bits_per_second for r in results})
    overheads: dict[tuple, float] = {(r.bandwidth_bits_per_second, r.compression, r.label): r.overhead_seconds
                                     for r in results}
    lines = {(r.compression, r.label) for r in results}
    start = None
    for slower, faster in reversed(list(zip(bandwidths, bandwidths[1:]))):
        if not all(math.isclose(overheads[(slower, *line)], overheads[(faster, *line)], rel_tol=1e-9, abs_tol=1e-12)
                   for line in lines):
            break
        start = slower
    return start


def floor_said(results: Sequence[WhatIf], basis_: Basis, add: AddCost, bucketing: overlap.Bucketing) -> str | None:
    """ "at and above 25 Gbit/s the probe's fitted allreduce (614.0 us + 0.985 ns/byte a round) bounds the
    iteration; faster links change nothing" for one worker count's results; None without a plateau."""
    start = plateau(results)
    if start is None:
        return None
    at = [r for r in results if r.bandwidth_bits_per_second == start]
    workers = at[0].workers
    unfloored = simulate(basis_.profile, workers, start, 1.0, add, basis_.batch_seconds, bucketing, None,
                         basis_.wait_seconds, basis_.pods)
    floored = next((r for r in at if r.compression == 1.0 and not r.label), None)
    if basis_.floor is not None and floored is not None and unfloored.overhead_seconds < floored.overhead_seconds:
        bound = (f"the probe's fitted allreduce ({1e6 * basis_.floor.a_seconds:.1f} us + "
                 f"{1e9 * basis_.floor.b_seconds_per_byte:.3f} ns/byte a round: the machine's collective, "
                 "latency included)")
    elif all(r.replay.exposed_seconds == 0 for r in at):
        bound = "backward (every round ends before it does; what is left is the codec and the wait)"
    else:
        bound = "something other than the link (the reduction arithmetic, the codec, the wait)"
    return (f"at and above {start / 1e9:g} Gbit/s {bound} bounds the iteration; faster links change nothing")


def table(results: Sequence[WhatIf]) -> str:
    """The results as a text table; TERMS defines its columns."""
    lines = [f"{'Gbit/s':>7} {'compression':>11} {'buckets':>7} {'overhead ms':>12} {'SF':>6}  method"]
    for r in results:
        sf = r.scaling_factor
        lines.append(f"{r.bandwidth_bits_per_second / 1e9:>7g} {r.compression:>11.4g} {len(r.buckets):>7} "
                     f"{1000 * r.overhead_seconds:>12.3f} {'-' if sf is None else f'{sf:.3f}':>6}  {r.label}".rstrip())
    return "\n".join(lines)


TERMS = ("Gbit/s: the link's bandwidth; compression: the ratio c the gradients are compressed by (bytes sent / c; "
         "1 = none); buckets: how many allreduces the bucketing made; overhead ms: the communication still running "
         "when backward ends, a method's later rounds, its codec and the wait for the slowest worker; SF: the scaling "
         "factor t_batch / (t_batch + overhead), the fraction of linear scaling the network leaves, t_batch being one "
         "worker's iteration without communication; method: the compression a trial measured, priced as it ran "
         "(blank: a ratio in one allreduce)")
