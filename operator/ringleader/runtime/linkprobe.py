"""The link a trial's ranks see, measured at its start the way training will use it: sustained, at its message sizes.

Called by main.py on every rank once the process group is up, before training; the first worker rank
keeps the result for the trial summary (`linkProbe`, contract/keys.py), where models/calibration.py
fits the one link every architecture's prediction is priced on.

    point-to-point  the first worker and the lowest other rank (a parameter server, or the next worker)
                    ping-pong trains of messages of each size: one way is half a round trip
    collective      every worker allreduces trains of tensors of each size

Why trains, and the median: training streams megabytes iteration after iteration, through a pod's CPU quota
(CFS: so many milliseconds of CPU per 100 ms period) and a shaper's token bucket (a burst at line rate, then
the cap). A lone fast message sees neither. So each timed sample is a train of messages sent back to back,
lasting at least SUSTAINED_SECONDS (a CFS period) at the largest size and REPEATS of them (several periods),
and the sample kept is their median per message, not the fastest. The sizes run from the trial's largest
message (a ring's bucket, between SMALLEST_LARGEST_BYTES and LARGEST_BYTES, or what a link the cluster caps carries
in TARGET_SECONDS)
down by factors of 4: the small ones fit inside a burst, and the fit leaves them out (cost_models.fit_sustained).
The first end decides each train's length from the last one's time and tells the other ends before it
starts (a one-number message, untimed), so all agree without a plan sent ahead. A series whose time does not grow
with size (a loaded machine delayed one size's trains) cannot be fitted: the first end says so and the series is
taken again, at most ATTEMPTS times in all.

Nothing is paced: an emulated cap (spec.network.bandwidth, nic.py) is the runtime's own rule, which the models
apply to the link measured here (models.Nic.cap_bits_per_second). About 0.8 s on a loopback (both series),
a little more on a capped network.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Callable

import torch
import torch.distributed as dist

from ringleader.api.trial import Trial
from ringleader.contract import keys
from ringleader.models import calibration

LARGEST_BYTES = 16 * 1024 * 1024
"""LARGEST_BYTES bounds the largest message probed: a model's exchange is megabytes; larger adds time, not
information."""
SMALLEST_LARGEST_BYTES = 1024 * 1024
"""SMALLEST_LARGEST_BYTES is the least the largest size is, whatever the trial's bucket: below it a loopback's times
are latency alone, with no bandwidth to fit."""
TARGET_SECONDS = 0.1
"""TARGET_SECONDS caps the largest message on a link the cluster caps to what it carries in this long (100 ms): far
beyond a shaper's burst (a 625 KB bucket is 10 ms at 500 Mbit/s), within one round trip a quota period."""
SIZES = 5
"""SIZES is how many sizes are probed, each a quarter of the previous: two are needed to tell latency from bandwidth,
more let the fit leave out those inside a burst and pass over one that a loaded machine delayed."""
REPEATS = 3
"""REPEATS is how many trains of each size are timed, after one untimed train that warms up and times the first;
their median is kept: with the largest's trains SUSTAINED_SECONDS long, at least 3 CFS periods of it."""
SUSTAINED_SECONDS = 0.1
"""SUSTAINED_SECONDS is how long a train of the largest size lasts at least: one CFS period (100 ms by default), so
a quota's throttling lands in it as it lands in training."""
TRAIN_SECONDS = 0.005
"""TRAIN_SECONDS is how long a train of the smaller sizes lasts at least: enough messages for a mean, little time."""
ATTEMPTS = 3
"""ATTEMPTS bounds how many times a series is taken: a series no line with a positive slope fits (models/calibration.py
refuses it, and the trial gets no prediction) is taken again, about 0.4 s each on a loopback."""


def sizes(bits_per_second: float | None, largest_bytes: float = LARGEST_BYTES) -> list[int]:
    """The probed sizes on a link of `bits_per_second` (None: not capped by the network) for a trial whose largest
    message is `largest_bytes`, smallest first: from the largest down by factors of 4 (multiples of 4 bytes:
    float32)."""
    largest = min(LARGEST_BYTES, max(SMALLEST_LARGEST_BYTES, largest_bytes))
    if bits_per_second:
        largest = min(largest, bits_per_second * TARGET_SECONDS / 8)
    return sorted(max(4, int(largest / 4 ** i) // 4 * 4) for i in range(SIZES))


def train_seconds(size: int, probed: list[int]) -> float:
    """How long a train of `size` lasts at least: SUSTAINED_SECONDS at the largest size, TRAIN_SECONDS below."""
    return SUSTAINED_SECONDS if size == max(probed) else TRAIN_SECONDS


def train_length(seconds_per_message: float, size: int, probed: list[int]) -> int:
    """Messages in the next train of `size`, from the last train's seconds per message: at least one."""
    if not seconds_per_message > 0:
        return 1
    return max(1, math.ceil(train_seconds(size, probed) / seconds_per_message))


def pair(trial: Trial) -> tuple[int, int] | None:
    """(first worker rank, the lowest other rank): the two ranks whose messages are timed; None with one rank."""
    first = trial.worker_slots()[0].rank
    others = [slot.rank for slot in trial.slots() if slot.rank != first]
    return (first, min(others)) if others else None


def measure(trial: Trial, rank: int, workers_group, shared_host: bool,
            largest_bytes: float = LARGEST_BYTES) -> dict | None:
    """Probe the link (every rank calls this at the same point); the document on the first worker rank, None elsewhere.

    `workers_group` is the workers' process group (None with one worker: no collective to time); `largest_bytes` the
    trial's largest message (a ring's bucket)."""
    network = trial.spec.network
    probed = sizes(None if network.emulated_bits_per_second() else network.bits_per_second(), largest_bytes)
    ends = pair(trial)
    point_to_point = None
    if ends is not None and rank in ends:
        point_to_point = _ping_pong(ends, rank, probed)
    workers = [slot.rank for slot in trial.worker_slots()]
    collective = None
    if workers_group is not None and rank in workers:
        collective = _allreduce(workers_group, workers[0], rank, probed)
    if rank != workers[0]:
        return None
    return {keys.PROBE_SHARED_HOST: shared_host,
            keys.PROBE_POINT_TO_POINT: point_to_point and {keys.PROBE_RANKS: list(ends or ()), **point_to_point},
            keys.PROBE_COLLECTIVE: collective and {keys.WORKERS: len(workers), **collective}}


def _series(per_message: dict[int, list[float]], probed: list[int], largest_seconds: float) -> dict:
    """A series' document: [bytes, median seconds per message] per size, and how long the largest was sustained."""
    return {keys.PROBE_SAMPLES: [[float(size), statistics.median(per_message[size])] for size in probed],
            keys.PROBE_SUSTAINED_SECONDS: largest_seconds}


def _ping_pong(ends: tuple[int, int], rank: int, probed: list[int]) -> dict:
    """The series of one-way seconds (half a round trip), timed by the first of `ends`; {} on the other."""
    first, other = ends
    peer = other if rank == first else first
    messages = {size: torch.zeros(size // 4, dtype=torch.float32) for size in probed}
    length = torch.ones(1, dtype=torch.int64)

    def agree(proposed: int) -> int:  # untimed: the other end must know how many to answer
        if rank == first:
            length[0] = proposed
            dist.send(length, peer)
        else:
            dist.recv(length, peer)
        return int(length[0])

    def round_trip(size: int) -> None:
        if rank == first:
            dist.send(messages[size], peer)
            dist.recv(messages[size], peer)
        else:
            dist.recv(messages[size], peer)
            dist.send(messages[size], peer)

    series = _retaken(lambda: _timed_trains(probed, agree, round_trip, ways=2), agree, "point-to-point",
                      rank == first)
    return series if rank == first else {}


def _allreduce(group, first: int, rank: int, probed: list[int]) -> dict:
    """The series of one allreduce of every worker, each train launched together, as the first worker timed it."""
    tensors = {size: torch.zeros(size // 4, dtype=torch.float32) for size in probed}
    length = torch.ones(1, dtype=torch.int64)

    def agree(proposed: int) -> int:
        length[0] = proposed
        dist.broadcast(length, src=first, group=group)  # the first worker's choice, for all
        dist.barrier(group=group)  # every worker launches together: the collective's time, not a skew
        return int(length[0])

    series = _retaken(lambda: _timed_trains(probed, agree, lambda size: dist.all_reduce(tensors[size], group=group)),
                      agree, "allreduce", rank == first)
    return series if rank == first else {}


def _retaken(take: Callable[[], dict], agree: Callable[[int], int], what: str, deciding: bool) -> dict:
    """`take()`'s series, taken again while the deciding end finds that its time does not grow with size, at most
    ATTEMPTS times in all; `agree` hands the deciding end's verdict to every end, so all take it again together."""
    for attempt in range(2, ATTEMPTS + 1):
        series = take()
        if agree(int(grows(series))):
            return series
        if deciding:
            print(f"link probe: the {what} series did not grow with message size (a loaded machine's noise): "
                  f"taken again ({attempt} of {ATTEMPTS})", flush=True)
    return take()


def grows(series: dict) -> bool:
    """Whether models/calibration.py can fit `series` (its time grows with message size): its own fit, so that the
    probe retakes exactly what the models would refuse."""
    try:
        calibration.fit(series[keys.PROBE_SAMPLES], "probe", sustained=True)
    except (ValueError, ZeroDivisionError):
        return False
    return True


def _timed_trains(probed: list[int], agree: Callable[[int], int], transfer: Callable[[int], object],
                  ways: int = 1) -> dict:
    """One untimed train of each size, then REPEATS timed ones, the sizes taking turns: `agree(proposed)` tells every
    end the train's length (the deciding end's proposal, from its last train of that size), `transfer(size)` moves one
    message; the series' document, each message's seconds divided by `ways` (2: a round trip's one way)."""
    per_message: dict[int, list[float]] = {size: [] for size in probed}
    last = dict.fromkeys(probed, 0.0)
    largest_seconds = 0.0
    for repeat in range(REPEATS + 1):
        for size in probed:
            count = agree(train_length(last[size], size, probed) if repeat else 1)
            started = time.perf_counter()
            for _ in range(count):
                transfer(size)
            elapsed = time.perf_counter() - started
            last[size] = elapsed / count
            if repeat:
                per_message[size].append(elapsed / count / ways)
                largest_seconds += elapsed if size == probed[-1] else 0.0
    return _series(per_message, probed, largest_seconds)
