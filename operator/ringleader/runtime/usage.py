"""What a rank's process used, CPU and memory, from the kernel's own counters; runtime/main.py measures its training.

getrusage(2) counts the CPU time of every thread of the process (torch's intra-op threads, gloo's) and its peak
resident memory; no sampling thread, no dependency. CPU utilization is that CPU time over the wall time it was
spent in: from the end of the first iteration after warm-up (a Meter restarts then), so that start-up, data set
preparation and the slow first iterations do not dilute it, to the end of training. 1.0 is one CPU busy all
along, as top's 100 %. Children (a DataLoader's worker processes) are not counted.

Per iteration (`Counters`, read by worker.py): the process's CPU time while the synchronizer communicated and waited
(keys.CPU_COMM; CLOCK_PROCESS_CPUTIME_ID, every thread's, so gloo's count) and how long its cgroup's CPU quota
throttled it (keys.CPU_THROTTLED, from cpu.stat): what a byte cost the host, which a fractional CPU limit (a CFS
quota) stretches whatever the pod's QoS class. Two counter reads per iteration and one small file, no thread.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import platform
import resource
import socket
import sys
import time
from typing import Any, Iterator

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
        """keys.HOST, CPUS, MACHINE_CPUS, THREADS, CPU_SECONDS, WALL_SECONDS, CPU_UTILIZATION and PEAK_RSS_BYTES since
        then, the machine's LOAD_PER_CPU now, and the RINGLEADER, TORCH and PYTHON versions it ran with."""
        wall, cpu = time.monotonic() - self.since.wall_seconds, cpu_seconds() - self.since.cpu_seconds
        return {keys.HOST: socket.gethostname(), keys.CPUS: cpus(), keys.MACHINE_CPUS: provenance.affinity(),
                keys.THREADS: threads, keys.CPU_SECONDS: cpu,
                keys.WALL_SECONDS: wall, keys.CPU_UTILIZATION: cpu / wall if wall > 0 else None,
                keys.PEAK_RSS_BYTES: peak_rss_bytes(), keys.LOAD_PER_CPU: load_per_cpu(),
                keys.RINGLEADER: provenance.version("ringleader"), keys.TORCH: provenance.version("torch"),
                keys.PYTHON: platform.python_version()}


CPU_STATS = (
    (pathlib.Path("/sys/fs/cgroup/cpu.stat"), "throttled_usec", 1e-6),  # cgroup v2
    (pathlib.Path("/sys/fs/cgroup/cpu,cpuacct/cpu.stat"), "throttled_time", 1e-9),  # cgroup v1, nanoseconds
    (pathlib.Path("/sys/fs/cgroup/cpu/cpu.stat"), "throttled_time", 1e-9),
)
"""CPU_STATS: where a cgroup's cpu.stat may be, the field of its throttled time and that field's unit in seconds, in
the order they are tried (a pod sees its own cgroup there; a local run its machine's, which no quota throttles)."""


@dataclasses.dataclass(frozen=True)
class Throttling:
    """One cgroup's cpu.stat: `seconds()` is how long its quota has throttled it so far."""

    path: pathlib.Path
    field: str
    unit: float

    @classmethod
    def find(cls, candidates=CPU_STATS) -> Throttling | None:
        """The first readable cpu.stat with its throttled field; None where there is none (macOS, a cgroup v2 without
        the cpu controller): nothing is recorded then."""
        for path, field, unit in candidates:
            found = cls(pathlib.Path(path), field, unit)
            if found.seconds() is not None:
                return found
        return None

    def seconds(self) -> float | None:
        try:
            for line in self.path.read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == self.field:
                    return int(value) * self.unit
        except (OSError, ValueError):
            pass
        return None


class Counters:
    """A worker's per-iteration host counters (keys.CPU_COMM, keys.CPU_THROTTLED), read by worker.iterate."""

    def __init__(self, throttling: Throttling | None = None):
        self.throttling = throttling
        self.throttled = throttling.seconds() if throttling is not None else None

    @classmethod
    def open(cls) -> Counters:
        return cls(Throttling.find())

    @contextlib.contextmanager
    def communicating(self, metrics: dict[str, float]) -> Iterator[None]:
        """Adds to metrics[CPU_COMM] the process's CPU seconds, every thread's, spent inside the block."""
        started = time.process_time()
        try:
            yield
        finally:
            metrics[keys.CPU_COMM] = metrics.get(keys.CPU_COMM, 0.0) + time.process_time() - started

    def throttled_since_last(self, metrics: dict[str, float]) -> None:
        """metrics[CPU_THROTTLED]: the cgroup's throttled seconds since the last call (an iteration's, called once per
        iteration); left out where cpu.stat cannot be read."""
        if self.throttling is None:
            return
        now = self.throttling.seconds()
        if now is not None and self.throttled is not None:
            metrics[keys.CPU_THROTTLED] = max(0.0, now - self.throttled)
        self.throttled = now
