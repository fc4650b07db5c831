"""A rank's emulated network card for `spec.network.bandwidth` (enforcement Emulated): one rule for every transfer.

Used by ring.py (a bucket's allreduce) and exchange/link.py (a parameter server's, a worker's or a peer's
messages). The card is full duplex, as analysis/cost_models.py prices a link: a sending side and a
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
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
import time


@dataclasses.dataclass
class Turn:
    """One message's time on the receiving side (time.perf_counter())."""

    start: float  # when its sender's turn began: the earliest it can take the receiving side
    seconds: float  # S/B
    ends: float = 0.0  # as scheduled now; a message whose sending turn began earlier, seen later, can push it back


class Nic:
    """A rank's emulated card of `bits_per_second`; None means not emulated (every transfer is free, nothing waits)."""

    def __init__(self, bits_per_second: int | None):
        if bits_per_second is not None and bits_per_second <= 0:
            raise ValueError(f"bits_per_second must be positive, got {bits_per_second}")
        self.bits_per_second = bits_per_second
        self._lock = threading.Lock()
        self._egress_free_at = 0.0  # when the sending side is done with what it was given (perf_counter)
        self._ingress_free_at = 0.0  # when the receiving side's turns that are over ended
        self._turns: list[Turn] = []  # the receiving side's turns not over yet, by start

    @property
    def active(self) -> bool:
        return self.bits_per_second is not None

    def seconds(self, nbytes: float) -> float:
        """How long `nbytes` hold one side of the card: 8*S/bandwidth."""
        return 0.0 if self.bits_per_second is None else 8.0 * nbytes / self.bits_per_second

    def send(self, nbytes: float, now: float) -> float:
        """Reserve the sending side for `nbytes` from `now` or when it frees, whichever is later; when the turn starts."""
        with self._lock:
            start = max(now, self._egress_free_at)
            self._egress_free_at = start + self.seconds(nbytes)
        return start

    def receive(self, nbytes: float, start: float) -> Turn | None:
        """Reserve the receiving side for `nbytes` from `start` (the sender's turn, on this clock), once the turns
        that started before it are over; None when the card is not emulated. A turn's end can move later while
        it waits (a turn that began earlier, seen later, goes first): ask `remaining`."""
        if not self.active:
            return None
        turn = Turn(start, self.seconds(nbytes))
        with self._lock:
            self._schedule(time.perf_counter())  # what is over stays over, whatever arrives now
            bisect.insort_right(self._turns, turn, key=lambda t: t.start)
        return turn

    def exchange(self, nbytes: float, earliest: float) -> float:
        """Reserve both sides for `nbytes` each (a transfer that receives as much as it sends, at once), from
        `earliest` or when both are free, whichever is later; when the reservation ends."""
        with self._lock:
            self._schedule(time.perf_counter())
            received_until = self._turns[-1].ends if self._turns else self._ingress_free_at
            start = max(earliest, self._egress_free_at, received_until)
            self._egress_free_at = end = start + self.seconds(nbytes)
            if self.active:
                self._turns.append(Turn(start, end - start, end))  # it starts after every turn there: order kept
        return end

    def remaining(self, turn: Turn, now: float) -> float:
        """Seconds from `now` until the receiving `turn` ends, as scheduled now."""
        with self._lock:
            self._schedule(now)
        return turn.ends - now

    def pace(self, until: float) -> float:
        """Sleep until `until` (time.perf_counter), the end of a reservation; the seconds slept."""
        remaining = until - time.perf_counter()
        if not self.active or remaining <= 0:
            return 0.0
        time.sleep(remaining)
        return remaining

    def _schedule(self, now: float) -> None:
        """Every waiting turn's end, one after another by start; turns over by `now` are dropped (the past is fixed)."""
        free = self._ingress_free_at
        for turn in self._turns:
            turn.ends = free = max(free, turn.start) + turn.seconds
        while self._turns and self._turns[0].ends <= now:
            self._ingress_free_at = self._turns.pop(0).ends
