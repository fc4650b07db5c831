"""The byte counters of this rank's network interface, sampled at 10 Hz by a daemon thread; started by worker.py.

The interface is the pod's eth0 (its default route's) in a cluster and the loopback (lo) under `ringleader run`, where
every rank of the machine sends through it: its counters then count all their traffic, not this rank's, and records say
so (`describe`). The thread samples only during measured iterations and keeps the last KEEP_SAMPLES samples; the
training thread asks it, after each iteration, for the tx and rx rates over that iteration (`rates`), and
reads the files itself only until the thread has taken two samples. Linux only (/sys/class/net): elsewhere,
or when the counters cannot be read, `Sampler.open` says so once in the rank log and returns None, and
nothing is recorded.
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib
import threading
import time
from typing import Callable, Sequence

SYS_NET = pathlib.Path("/sys/class/net")
PROC_ROUTE = pathlib.Path("/proc/net/route")
LOOPBACK = "lo"
POD_INTERFACE = "eth0"
SAMPLE_SECONDS = 0.1
"""10 Hz: fine enough for iterations of a few hundred ms, two small file reads a period cost nothing measurable."""
KEEP_SAMPLES = 64
"""6.4 s of history at 10 Hz: an iteration longer than that is measured over the samples kept, its last 6.4 s."""
JOIN_SECONDS = 1.0


@dataclasses.dataclass(frozen=True)
class Sample:
    at: float
    """time.perf_counter() when the counters were read (the clock of runtime/timing.py)."""
    rx: int
    """bytes received by the interface since it came up."""
    tx: int
    """bytes sent by the interface since it came up."""


def read_counters(interface: str, root: pathlib.Path = SYS_NET) -> tuple[int, int] | None:
    """(rx bytes, tx bytes) of the interface; None when they cannot be read (not Linux, no such interface)."""
    statistics = root / interface / "statistics"
    try:
        return int((statistics / "rx_bytes").read_text()), int((statistics / "tx_bytes").read_text())
    except (OSError, ValueError):
        return None


def nominal_bits_per_second(interface: str, root: pathlib.Path = SYS_NET) -> float | None:
    """The link speed the interface reports (/sys/class/net/<if>/speed, Mbit/s); None when it reports none:
    the loopback and most virtual interfaces (veth, a pod's eth0 on many CNIs) have no speed, or -1."""
    try:
        megabits = int((root / interface / "speed").read_text())
    except (OSError, ValueError):
        return None
    return megabits * 1e6 if megabits > 0 else None


def pod_interface(route_table: pathlib.Path = PROC_ROUTE) -> str:
    """The interface of the default route (/proc/net/route), which a pod's traffic to its peers leaves by:
    eth0 with nearly every CNI; POD_INTERFACE when the table cannot be read or has no default route."""
    try:
        lines = route_table.read_text().splitlines()[1:]
    except OSError:
        return POD_INTERFACE
    for line in lines:
        fields = line.split()
        if len(fields) > 1 and fields[1] == "00000000":  # destination 0.0.0.0: the default route
            return fields[0]
    return POD_INTERFACE


def describe(interface: str) -> str:
    """How records label the interface: the loopback is shared by every local rank, so its rates are theirs."""
    if interface == LOOPBACK:
        return f"{interface} (loopback, shared by every rank on this machine: its rates count all their traffic)"
    return interface


def rates(samples: Sequence[Sample], start: float, end: float) -> tuple[float, float] | None:
    """(tx, rx) bytes per second over [start, end] (perf_counter times) from samples in time order; None with
    fewer than two samples.

    The window runs from the last sample at or before `start` (the first kept, if none) to the last sample at
    or before `end`, and is at least one sampling period: a 10 Hz sampler cannot resolve a shorter iteration,
    whose rate is then that of the period it lies in, or the latest before it when that one is not over."""
    if len(samples) < 2:
        return None
    # From the newest back: an iteration that just ended is near the end of the samples.
    last = len(samples) - 1
    while last > 0 and samples[last].at > end:
        last -= 1
    first = last
    while first > 0 and samples[first].at > start:
        first -= 1
    if last <= first:  # no sample inside: the period around the iteration, else the latest before it
        first, last = (last, last + 1) if last + 1 < len(samples) else (last - 1, last)
    seconds = samples[last].at - samples[first].at
    if seconds <= 0:
        return None
    return ((samples[last].tx - samples[first].tx) / seconds, (samples[last].rx - samples[first].rx) / seconds)


class Sampler:
    """Reads the interface's counters every SAMPLE_SECONDS on a daemon thread, from start() to stop()."""

    def __init__(self, interface: str, read: Callable[[], tuple[int, int] | None],
                 period: float = SAMPLE_SECONDS, keep: int = KEEP_SAMPLES):
        self.interface, self.period = interface, period
        self._read = read
        self._samples: collections.deque[Sample] = collections.deque(maxlen=keep)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def open(cls, interface: str, root: pathlib.Path = SYS_NET, log: Callable[[str], None] = print) -> Sampler | None:
        """A sampler of the interface, or None (said once in the rank log) when its counters cannot be read."""
        if read_counters(interface, root) is None:
            log(f"network counters: {root / interface / 'statistics'} cannot be read (not Linux, or no interface "
                f"{interface}): no measured network rates for this rank")
            return None
        return cls(interface, lambda: read_counters(interface, root))

    def start(self) -> None:
        """Take a first sample now (the first measured iteration's baseline), then one every period."""
        if self._thread is not None:
            return
        self._sample()
        self._thread = threading.Thread(target=self._run, name="network-counters", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and wait for the thread, so nothing runs past the rank's last record."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(JOIN_SECONDS)

    def rates(self, start: float, end: float) -> tuple[float, float] | None:
        """(tx, rx) bytes per second over [start, end], perf_counter times (see `rates`)."""
        with self._lock:
            samples = list(self._samples)
        if len(samples) < 2:
            # The first iterations of a fast model end before the thread's second sample: read once here.
            self._sample()
            with self._lock:
                samples = list(self._samples)
        return rates(samples, start, end)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self._sample()

    def _sample(self) -> None:
        # Read and stamp under the lock: samples from this thread and the training thread stay in time order.
        with self._lock:
            counters = self._read()
            if counters is not None:  # else the interface went away: keep what was sampled
                self._samples.append(Sample(time.perf_counter(), *counters))


def link_bits_per_second(interface: str, cap_bits_per_second: float | None, ranks_sharing: int,
                         root: pathlib.Path = SYS_NET) -> float | None:
    """The link rate utilization is measured against: the emulated cap (spec.network.bandwidth, per rank, so
    times the ranks sharing the interface) when there is one, else the interface's nominal speed, else None."""
    if cap_bits_per_second:
        return cap_bits_per_second * max(1, ranks_sharing)
    return nominal_bits_per_second(interface, root)
