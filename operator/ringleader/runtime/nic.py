"""A rank's emulated network card for `spec.network.bandwidth` (enforcement Emulated): one rule for every transfer.

Used by ring.py (a bucket's allreduce) and exchange/link.py (a parameter server's, a worker's or a peer's
messages). The card is full duplex, as models/cost_models.py prices a link: a sending side and a
receiving side, each carrying one transfer after another at the link's rate, so S bytes hold a side for
8*S/bandwidth seconds. A transfer reserves its bytes on the sides it uses, from the moment it may start
or the moment the side frees, whichever is later:

    send       a message leaving: the sending side (exchange)
    receive    a message arriving: the receiving side, from when its sending turn began; messages from all
               senders take it one after another in that order, whatever order they are seen in (exchange)
    exchange   a ring allreduce step, which receives as much as it sends at once: both sides (ring)

Both sides are clocks, not threads: nothing waits while a reservation is made, and pacing is a sleep until
the reservation ends (`pace`, or `remaining` for a reader that can be woken sooner). The real transfer and
the threads' wake-ups thus run under the emulated 8*S/bandwidth instead of adding to it. Only slower-than-
real links can be emulated, and no latency is added; the sleep is accounted where the transfer is
(time/comm), as a slower card's would be.

A card is a pod's (`pod_card`): only what leaves the pod crosses it (contract/levels.py), and a pod of several ranks
shares one card, as its containers share one eth0. Their processes keep its two clocks in a small file of the
machine's temporary directory (JSON), read and written under an exclusive lock (perf_counter is the machine's monotonic
clock, the same in every process). A collective step every rank of the pod takes part in (a ring's) is reserved
once, by the first of them to ask, under a key they all count alike (`exchange(..., key=)`).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import fcntl
import itertools
import json
import os
import pathlib
import tempfile
import threading
import time
from typing import Iterator

from ringleader.api.trial import Trial
from ringleader.contract import levels as levels_

KEPT_KEYS = 256
"""KEPT_KEYS: how many keyed reservations a card remembers; far more than a pod's ranks can be apart (one
iteration's)."""
_turn_ids = itertools.count()


@dataclasses.dataclass
class Turn:
    """One message's time on the receiving side (time.perf_counter())."""

    start: float  # when its sender's turn began: the earliest it can take the receiving side
    seconds: float  # S/B
    ends: float = 0.0  # as scheduled now; a message whose sending turn began earlier, seen later, can push it back
    key: tuple[int, int] = dataclasses.field(default_factory=lambda: (os.getpid(), next(_turn_ids)))
    """key tells the turn apart on a card its pod's processes share, where each reads its own copy."""


@dataclasses.dataclass
class _Sides:
    """A card's two clocks: what its reservations so far leave (perf_counter times)."""

    egress_free_at: float = 0.0  # when the sending side is done with what it was given
    ingress_free_at: float = 0.0  # when the receiving side's turns that are over ended
    turns: list[Turn] = dataclasses.field(default_factory=list)  # the receiving side's turns not over yet, by start
    keyed: dict[int, float] = dataclasses.field(default_factory=dict)  # a keyed exchange's end, the latest KEPT_KEYS

    def dumps(self) -> bytes:
        """As the pod's shared file holds it: JSON, which a reader only parses (a file in a shared temporary directory
        is never unpickled)."""
        return json.dumps([self.egress_free_at, self.ingress_free_at,
                           [[t.start, t.seconds, t.ends, list(t.key)] for t in self.turns],
                           [[key, end] for key, end in self.keyed.items()]]).encode()

    @classmethod
    def loads(cls, data: bytes) -> _Sides:
        egress, ingress, turns, keyed = json.loads(data)
        return cls(float(egress), float(ingress),
                   [Turn(float(start), float(seconds), float(ends), (int(key[0]), int(key[1])))
                    for start, seconds, ends, key in turns],
                   {int(key): float(end) for key, end in keyed})


class EmulatedNic:
    """A card of `bits_per_second`; None means not emulated (every transfer is free, nothing waits). With `shared`,
    a file every process of the pod opens: the card they share."""

    def __init__(self, bits_per_second: int | None, shared: str | os.PathLike | None = None):
        if bits_per_second is not None and bits_per_second <= 0:
            raise ValueError(f"bits_per_second must be positive, got {bits_per_second}")
        self.bits_per_second = bits_per_second
        self._lock = threading.Lock()
        self._sides = _Sides()
        self._shared = pathlib.Path(shared) if shared is not None and bits_per_second is not None else None
        # Never through a link someone else left in the temporary directory.
        self._file = os.open(self._shared, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600) if self._shared else None

    @property
    def active(self) -> bool:
        return self.bits_per_second is not None

    def seconds(self, nbytes: float) -> float:
        """How long `nbytes` hold one side of the card: 8*S/bandwidth."""
        return 0.0 if self.bits_per_second is None else 8.0 * nbytes / self.bits_per_second

    def send(self, nbytes: float, now: float) -> float:
        """Reserve the sending side for `nbytes` from `now` or when it frees, whichever is later; when the turn
        starts."""
        with self._held() as sides:
            start = max(now, sides.egress_free_at)
            sides.egress_free_at = start + self.seconds(nbytes)
        return start

    def receive(self, nbytes: float, start: float) -> Turn | None:
        """Reserve the receiving side for `nbytes` from `start` (the sender's turn, on this clock), once the turns
        that started before it are over; None when the card is not emulated. A turn's end can move later while
        it waits (a turn that began earlier, seen later, goes first): ask `remaining`."""
        if not self.active:
            return None
        turn = Turn(start, self.seconds(nbytes))
        with self._held() as sides:
            _schedule(sides, time.perf_counter())  # what is over stays over, whatever arrives now
            bisect.insort_right(sides.turns, turn, key=lambda t: t.start)
        return turn

    def exchange(self, nbytes: float, earliest: float, key: int | None = None) -> float:
        """Reserve both sides for `nbytes` each (a transfer that receives as much as it sends, at once), from
        `earliest` or when both are free, whichever is later; when the reservation ends. With `key`, a step of the
        pod's ranks together: reserved by the first to ask, whose end the others get."""
        with self._held() as sides:
            if key is not None and key in sides.keyed:
                return sides.keyed[key]
            _schedule(sides, time.perf_counter())
            received_until = sides.turns[-1].ends if sides.turns else sides.ingress_free_at
            start = max(earliest, sides.egress_free_at, received_until)
            sides.egress_free_at = end = start + self.seconds(nbytes)
            if self.active:
                sides.turns.append(Turn(start, end - start, end))  # it starts after every turn there: order kept
            if key is not None:
                sides.keyed[key] = end
                for old in list(sides.keyed)[:-KEPT_KEYS]:
                    del sides.keyed[old]
        return end

    def remaining(self, turn: Turn, now: float) -> float:
        """Seconds from `now` until the receiving `turn` ends, as scheduled now (at most 0 once it is over)."""
        with self._held() as sides:
            _schedule(sides, now)
            current = next((t for t in sides.turns if t.key == turn.key), None)
        return current.ends - now if current is not None else min(0.0, turn.ends - now)

    def pace(self, until: float) -> float:
        """Sleep until `until` (time.perf_counter), the end of a reservation; the seconds slept."""
        remaining = until - time.perf_counter()
        if not self.active or remaining <= 0:
            return 0.0
        time.sleep(remaining)
        return remaining

    def close(self) -> None:
        """Let go of a shared card's file (the pod's ranks opened it at their start; a later trial makes its own)."""
        if self._file is not None:
            os.close(self._file)
            self._file = None
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._shared)  # type: ignore[arg-type]

    @contextlib.contextmanager
    def _held(self) -> Iterator[_Sides]:
        """The card's clocks, this process's alone until the block ends: its own, or the pod's file, locked."""
        with self._lock:
            if self._file is None:
                yield self._sides
                return
            fcntl.flock(self._file, fcntl.LOCK_EX)
            try:
                size = os.fstat(self._file).st_size
                sides = _Sides.loads(os.pread(self._file, size, 0)) if size else _Sides()
                yield sides
                written = sides.dumps()
                os.pwrite(self._file, written, 0)
                os.ftruncate(self._file, len(written))
            finally:
                fcntl.flock(self._file, fcntl.LOCK_UN)


def _schedule(sides: _Sides, now: float) -> None:
    """Every waiting turn's end, one after another by start; turns over by `now` are dropped (the past is fixed)."""
    free = sides.ingress_free_at
    for turn in sides.turns:
        turn.ends = free = max(free, turn.start) + turn.seconds
    while sides.turns and sides.turns[0].ends <= now:
        sides.ingress_free_at = sides.turns.pop(0).ends


def pod_card(trial: Trial, rank: int, levels: levels_.Levels) -> EmulatedNic:
    """The emulated card of `rank`'s pod at spec.network.bandwidth: its own when it is alone in its pod, else the
    file its pod's ranks share, named by the trial, the pod and this start of it (Levels.start)."""
    bits = trial.spec.network.emulated_bits_per_second()
    if len(levels.pod(rank)) == 1:
        return EmulatedNic(bits)
    name = f"ringleader-card-{trial.name}-{levels.start}-pod{levels.pods[rank]}"
    return EmulatedNic(bits, pathlib.Path(tempfile.gettempdir()) / name)
