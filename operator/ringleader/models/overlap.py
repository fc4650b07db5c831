"""Buckets of gradients sent while backward runs, first in first out on one channel: the one simulator of overlap.

Called by models/prediction.py (the ring's communication left after backward: study 2's DAG model),
models/whatif.py (the scaling factor at other links, worker counts and compression ratios) and
report/overlap_figure.py, all on an models/profile.py Profile. The bucketing rule is a parameter:

    RuntimeBuckets  the runtime's ring (contract/buckets.py): parameters in reverse order, a bucket closed once
                    it holds bucket_bytes (the first at first_bucket_bytes), or as a ring trial recorded them
    FusionWindow    Horovod's tensor fusion: gradients in ready order, a bucket closed a cycle time after its
                    first gradient or before it would pass the fusion threshold

A bucket may be sent once its last gradient is ready; each starts at max(the previous one's end, its ready
time) and lasts what `seconds(bytes)` says (a fitted collective, or a model of one). What runs past the end
of backward is the communication backward did not hide (t_c_no).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Protocol

from ringleader.models.profile import Profile
from ringleader.contract import buckets as buckets_
from ringleader.contract import environment as contract


@dataclasses.dataclass(frozen=True)
class ReplayBucket:
    """A bucket as the replay sends it: its bytes, when it may go, and how many gradients it holds."""

    size_bytes: float
    ready_seconds: float
    """ready_seconds is when the bucket's last gradient was ready: it may be sent from then on."""
    gradients: int


class Bucketing(Protocol):
    """A rule that groups a profile's gradients into buckets, in the order they are sent."""

    def buckets(self, profile: Profile) -> list[ReplayBucket]: ...

    def describe(self) -> str: ...


@dataclasses.dataclass(frozen=True)
class RuntimeBuckets:
    """The ring's buckets (runtime/ring.py): reverse parameter order, launched in bucket order."""

    bucket_bytes: float = contract.DEFAULT_BUCKET_BYTES
    first_bucket_bytes: float = contract.FIRST_BUCKET_BYTES
    recorded: tuple[float, ...] = ()
    """recorded are the sizes a ring trial recorded for its buckets, in launch order: they close as those did."""

    def buckets(self, profile: Profile) -> list[ReplayBucket]:
        backward = list(reversed(profile.gradients))
        groups = buckets_.group([g.size_bytes for g in backward], self.bucket_bytes, self.first_bucket_bytes,
                                recorded=self.recorded)
        found, ready = [], 0.0
        for members in groups:
            # launched in order: a bucket complete early still waits for its predecessors
            ready = max([ready] + [backward[i].ready_seconds for i in members])
            found.append(ReplayBucket(sum(backward[i].size_bytes for i in members), ready, len(members)))
        return found

    def describe(self) -> str:
        if self.recorded:
            return f"the runtime's buckets, as the trial recorded them ({len(self.recorded)})"
        return (f"the runtime's buckets: {self.bucket_bytes / 2 ** 20:g} MiB, the first at "
                f"{min(self.bucket_bytes, self.first_bucket_bytes) / 2 ** 20:g} MiB")


@dataclasses.dataclass(frozen=True)
class FusionWindow:
    """Horovod's tensor fusion, as docs/whatif.md compares it: a window opens at a bucket's first gradient."""

    window_seconds: float = 0.005
    """window_seconds is the cycle time (Horovod's default, 5 ms): gradients ready within it of a bucket's first
    share the bucket."""
    cap_bytes: float = 64 * 1024 * 1024
    """cap_bytes is the fusion threshold (Horovod's default, 64 MiB): a bucket never grows past it (a bigger
    gradient goes alone)."""

    def buckets(self, profile: Profile) -> list[ReplayBucket]:
        buckets: list[ReplayBucket] = []
        opened = size = last = 0.0
        count = 0
        for gradient in profile.in_ready_order():
            if count and (gradient.ready_seconds - opened >= self.window_seconds
                          or size + gradient.size_bytes > self.cap_bytes):
                buckets.append(ReplayBucket(size, last, count))
                count, size = 0, 0.0
            if not count:
                opened = gradient.ready_seconds
            count += 1
            size += gradient.size_bytes
            last = gradient.ready_seconds
        if count:
            buckets.append(ReplayBucket(size, last, count))
        return buckets

    def describe(self) -> str:
        return (f"fusion: cycle time {1000 * self.window_seconds:g} ms, threshold "
                f"{self.cap_bytes / 2 ** 20:g} MiB")


@dataclasses.dataclass(frozen=True)
class Replay:
    """Backward replayed with its buckets sent on one channel; seconds from the start of backward."""

    buckets: tuple[ReplayBucket, ...]
    starts: tuple[float, ...]
    ends: tuple[float, ...]
    backward_seconds: float

    @property
    def exposed_seconds(self) -> float:
        """The communication left when backward ends (study 2's t_c_no; whatif's overhead): 0 when all is hidden."""
        return max(0.0, max(self.ends, default=0.0) - self.backward_seconds)


def replay(profile: Profile, bucketing: Bucketing, seconds: Callable[[float], float]) -> Replay:
    """Bucket the profile's gradients, then send the buckets first in first out, each at max(channel free, ready)
    for `seconds(its bytes)`."""
    buckets = bucketing.buckets(profile)
    starts, ends = [], []
    free = 0.0
    for bucket in buckets:
        start = max(free, bucket.ready_seconds)
        free = start + seconds(bucket.size_bytes)
        starts.append(start)
        ends.append(free)
    return Replay(tuple(buckets), tuple(starts), tuple(ends), profile.backward_seconds)
