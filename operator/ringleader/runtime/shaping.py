"""Bandwidth emulation for `spec.network.bandwidth` (enforcement Emulated): a transfer of S bytes lasts at least 8*S/bandwidth seconds.

Used by ring.py per bucket, and offered to the parameter-server and peer-to-peer roles: time a
transfer, then `pace(bytes, started_at)` sleeps the difference between what it took and what it
would take on the emulated link. Only slower-than-real links can be emulated, and latency is not
added. The sleep is accounted where the transfer is (time/comm), as a slower NIC would be.
"""

from __future__ import annotations

import time


class Shaper:
    """An emulated link of `bits_per_second`; None means unshaped (every call is free)."""

    def __init__(self, bits_per_second: int | None):
        if bits_per_second is not None and bits_per_second <= 0:
            raise ValueError(f"bits_per_second must be positive, got {bits_per_second}")
        self.bits_per_second = bits_per_second

    @property
    def active(self) -> bool:
        return self.bits_per_second is not None

    def seconds(self, size: float) -> float:
        """How long `size` bytes take on the emulated link."""
        return 0.0 if self.bits_per_second is None else 8.0 * size / self.bits_per_second

    def pace(self, size: float, started_at: float) -> float:
        """Sleep until a transfer of `size` bytes started at `started_at` (time.perf_counter) has lasted as long
        as the emulated link needs; returns the seconds slept."""
        if self.bits_per_second is None:
            return 0.0
        remaining = started_at + self.seconds(size) - time.perf_counter()
        if remaining <= 0:
            return 0.0
        time.sleep(remaining)
        return remaining
