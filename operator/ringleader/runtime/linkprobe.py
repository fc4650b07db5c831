"""The link a trial's ranks see, measured at its start over several message sizes, as NCCL-tests measures a network.

Called by main.py on every rank once the process group is up, before training; the first worker rank
keeps the result for the trial summary (`linkProbe`, contract/keys.py), where analysis/calibration.py
fits the one link every architecture's prediction is priced on.

    point-to-point  the first worker and the lowest other rank (a parameter server, or the next worker)
                    ping-pong one message of each size, REPEATS times: one way is half the fastest round trip
    collective      every worker allreduces one tensor of each size, REPEATS times: the fastest

Sizes run from the largest (LARGEST_BYTES, or what a link the cluster caps carries in TARGET_SECONDS
if less) down by factors of 4, taking turns. Nothing is paced: an emulated cap (spec.network.bandwidth,
nic.py) is the runtime's own rule, a message of S bytes lasting at least 8S/B, which the models apply
to the link measured here (models.Nic.cap_bits_per_second); timing it too would only add the machine's
noise to a number known exactly. A ping-pong measures both directions together. Well under a second on a
loopback; about a second on a network capped at any rate (the sizes shrink with the cap).
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from ringleader.api.trial import Trial
from ringleader.contract import keys

LARGEST_BYTES = 4 * 1024 * 1024
"""LARGEST_BYTES is the largest message probed: a model's exchange is megabytes; larger adds time, not information."""
TARGET_SECONDS = 0.025
"""TARGET_SECONDS caps the largest message on a link the cluster caps to what it carries in this long (25 ms)."""
SIZES = 5
"""SIZES is how many sizes are probed, each a quarter of the previous: two are needed to tell latency from bandwidth,
and more let the fit (a median of slopes) pass over one that a loaded machine delayed."""
REPEATS = 9
"""REPEATS is how many times each size is timed, after one untimed warm-up; the fastest is kept, since a shared
machine's load only ever adds (a wait for a core), and the sizes take turns, so a burst of load lands on all."""


def sizes(bits_per_second: float | None) -> list[int]:
    """The probed sizes on a link of `bits_per_second` (None: not capped by the network), smallest first: from the
    largest down by factors of 4 (multiples of 4 bytes: float32)."""
    largest = LARGEST_BYTES if not bits_per_second else min(LARGEST_BYTES, bits_per_second * TARGET_SECONDS / 8)
    return sorted(max(4, int(largest / 4 ** i) // 4 * 4) for i in range(SIZES))


def pair(trial: Trial) -> tuple[int, int] | None:
    """(first worker rank, the lowest other rank): the two ranks whose messages are timed; None with one rank."""
    first = trial.worker_slots()[0].rank
    others = [slot.rank for slot in trial.slots() if slot.rank != first]
    return (first, min(others)) if others else None


def measure(trial: Trial, rank: int, workers_group, shared_host: bool) -> dict | None:
    """Probe the link (every rank calls this at the same point); the document on the first worker rank, None elsewhere.

    `workers_group` is the workers' process group (None with one worker: no collective to time)."""
    network = trial.spec.network
    probed = sizes(None if network.emulated_bits_per_second() else network.bits_per_second())
    ends = pair(trial)
    point_to_point = None
    if ends is not None and rank in ends:
        samples = _ping_pong(ends, rank, probed)
        point_to_point = samples and {keys.PROBE_RANKS: list(ends), keys.PROBE_SAMPLES: samples}
    workers = [slot.rank for slot in trial.worker_slots()]
    collective = _allreduce(workers_group, probed) if workers_group is not None and rank in workers else None
    if rank != workers[0]:
        return None
    return {keys.PROBE_SHARED_HOST: shared_host,
            keys.PROBE_POINT_TO_POINT: point_to_point,
            keys.PROBE_COLLECTIVE: collective and {keys.WORKERS: len(workers), keys.PROBE_SAMPLES: collective}}


def _ping_pong(ends: tuple[int, int], rank: int, probed: list[int]) -> list[list[float]]:
    """[bytes, one-way seconds] per size: the fastest half round trip, timed by the first of `ends`."""
    first, other = ends
    peer = other if rank == first else first
    messages = {size: torch.zeros(size // 4, dtype=torch.float32) for size in probed}
    times: dict[int, list[float]] = {size: [] for size in probed}
    for repeat in range(REPEATS + 1):
        for size in probed:
            started = time.perf_counter()
            if rank == first:
                dist.send(messages[size], peer)
                dist.recv(messages[size], peer)
            else:
                dist.recv(messages[size], peer)
                dist.send(messages[size], peer)
            if repeat:
                times[size].append((time.perf_counter() - started) / 2)
    return [[float(size), min(times[size])] for size in probed] if rank == first else []


def _allreduce(group, probed: list[int]) -> list[list[float]]:
    """[bytes, seconds] per size: the fastest allreduce of every worker, each launched together."""
    tensors = {size: torch.zeros(size // 4, dtype=torch.float32) for size in probed}
    times: dict[int, list[float]] = {size: [] for size in probed}
    for repeat in range(REPEATS + 1):
        for size in probed:
            dist.barrier(group=group)  # every worker launches together: the collective's time, not a skew
            started = time.perf_counter()
            dist.all_reduce(tensors[size], group=group)
            if repeat:
                times[size].append(time.perf_counter() - started)
    return [[float(size), min(times[size])] for size in probed]
