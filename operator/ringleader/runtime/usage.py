"""What a rank's process used, CPU and memory, from the kernel's own counters; runtime/main.py measures its training.

getrusage(2) counts the CPU time of every thread of the process (torch's intra-op threads, gloo's) and its peak
resident memory; no sampling thread, no dependency. CPU utilization is that CPU time over the wall time it was
spent in: from the end of the first iteration after warm-up (a Meter restarts then), so that start-up, data set
preparation and the slow first iterations do not dilute it, to the end of training. 1.0 is one CPU busy all
along, as top's 100 %. Children (a DataLoader's worker processes) are not counted.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import resource
import socket
import sys
import time
from typing import Any

from ringleader.contract import keys, provenance


@dataclasses.dataclass(frozen=True)
class Start:
    """When measuring began: monotonic wall seconds and the process's CPU seconds by then."""

    wall_seconds: float
    cpu_seconds: float


def cpu_seconds() -> float:
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def start() -> Start:
    return Start(time.monotonic(), cpu_seconds())


def peak_rss_bytes() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return float(peak if sys.platform == "darwin" else 1024 * peak)  # Linux counts KiB, macOS bytes


cpus = provenance.cpus
"""cpus: the CPUs this process may run on (contract/provenance.py)."""


def load_per_cpu() -> float | None:
    """The machine's 1-minute load average per CPU: other work on the machine shows here, and nowhere else in the
    records (a band of `ringleader predict` holds up to the load its validation runs had)."""
    load = provenance.load()
    return None if load is None else round(load / (os.cpu_count() or 1), 3)


class Meter:
    """Measures from when it is made, and again from each `restart()` (RankRecorder.on_first_measured)."""

    def __init__(self) -> None:
        self.since = start()

    def restart(self) -> None:
        self.since = start()

    def measure(self, threads: int) -> dict[str, Any]:
        """keys.HOST, CPUS, THREADS, CPU_SECONDS, WALL_SECONDS, CPU_UTILIZATION and PEAK_RSS_BYTES since then, the
        machine's LOAD_PER_CPU now, and the RINGLEADER, TORCH and PYTHON versions it ran with."""
        wall, cpu = time.monotonic() - self.since.wall_seconds, cpu_seconds() - self.since.cpu_seconds
        return {keys.HOST: socket.gethostname(), keys.CPUS: cpus(), keys.THREADS: threads, keys.CPU_SECONDS: cpu,
                keys.WALL_SECONDS: wall, keys.CPU_UTILIZATION: cpu / wall if wall > 0 else None,
                keys.PEAK_RSS_BYTES: peak_rss_bytes(), keys.LOAD_PER_CPU: load_per_cpu(),
                keys.RINGLEADER: provenance.version("ringleader"), keys.TORCH: provenance.version("torch"),
                keys.PYTHON: platform.python_version()}
