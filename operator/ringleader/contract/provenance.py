"""Where and how numbers were taken: the machine, its load, the versions and the command; the launcher records it
in session.json and on the sweep run (tags ringleader.provenance.*), the runtime's usage reads `cpus` from here.

Timings on a shared machine are to be compared, not quoted: this says what they were compared on.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import pathlib
import platform
import shlex
import socket
import sys
from typing import Mapping, Sequence

from ringleader.contract import redaction

CGROUP_CPU_MAX = pathlib.Path("/sys/fs/cgroup/cpu.max")
"""CGROUP_CPU_MAX is cgroup v2's CPU quota of this process's group: "<quota> <period>" in microseconds, or "max"."""


def cpus(cpu_max: pathlib.Path = CGROUP_CPU_MAX) -> float:
    """The CPUs this process may run on: its affinity (all the machine's where there is none), capped by its
    cgroup's quota (a pod's CPU limit: "150000 100000" is 1.5)."""
    try:
        count = float(len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS
        count = float(os.cpu_count() or 1)
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota != "max":
            count = min(count, int(quota) / int(period))
    except (OSError, ValueError):
        pass  # no cgroup v2 here, or no quota: the affinity stands
    return count


def version(package: str) -> str:
    """The installed version of `package` from its metadata (importing torch to ask would cost seconds)."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def load() -> float | None:
    """The 1-minute load average: how many processes wanted a CPU, on average, just now."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def file_hash(path: str | None) -> str | None:
    """sha256 of the experiment file (its first 16 hex digits): the same file, the same hash."""
    if not path or path == "-":
        return None
    try:
        return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def at_start(argv: Sequence[str], experiment_file: str | None) -> dict[str, object]:
    """The provenance of a run as it starts; `ended` adds the load after it."""
    return {"host": socket.gethostname(), "cpus": os.cpu_count(), "cpuQuota": cpus(),
            "loadBefore": load(), "ringleader": version("ringleader"), "torch": version("torch"),
            "python": platform.python_version(), "command": redaction.redact(shlex.join(argv)), "fileSha256": file_hash(experiment_file)}


def ended(started: dict[str, object]) -> dict[str, object]:
    return {**started, "loadAfter": load()}


def words(document: Mapping[str, object]) -> str:
    """One line for a report's header: host, CPUs, load, versions, command and file."""
    load_after = document.get("loadAfter")
    return (f"{document.get('host')}: {document.get('cpus')} CPUs (quota {document.get('cpuQuota')}), load "
            f"{document.get('loadBefore')} before" + (f", {load_after} after" if load_after is not None else "")
            + f"; ringleader {document.get('ringleader')}, torch {document.get('torch')}, Python "
            f"{document.get('python')}; `{document.get('command')}`"
            + (f", file sha256 {document['fileSha256']}" if document.get("fileSha256") else ""))


def command_line() -> list[str]:
    """This process's command line as typed: `ringleader run ...`."""
    return ["ringleader", *sys.argv[1:]] if sys.argv and sys.argv[0].endswith(("ringleader", "cli.py")) \
        else list(sys.argv)
