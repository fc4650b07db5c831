"""Where and how numbers were taken: the machine, its load, the versions and the command; the launcher records it
in session.json and on the sweep run (tags ringleader.provenance.*), the runtime's usage reads `cpus` from here.

Timings on a shared machine are to be compared, not quoted: this says what they were compared on. An operator's
sweep run says it of a cluster (`at_operator`, then `of_pods`): no one machine, so no "load before and after";
the nodes the ranks ran on, their pods' CPUs and each node's load per CPU as the ranks ended, min-max.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import pathlib
import platform
import shlex
import socket
import sys
from typing import Any, Iterable, Mapping, Sequence

from ringleader.contract import keys, redaction

CGROUP_CPU_MAX = pathlib.Path("/sys/fs/cgroup/cpu.max")
"""CGROUP_CPU_MAX is cgroup v2's CPU quota of this process's group: "<quota> <period>" in microseconds, or "max"."""


CGROUP_V1_CPU = pathlib.Path("/sys/fs/cgroup/cpu")
"""CGROUP_V1_CPU holds cgroup v1's quota: cpu.cfs_quota_us (-1: none) over cpu.cfs_period_us, where there is no v2."""


def affinity() -> float:
    """The CPUs this process may be scheduled on, no quota applied: in a pod, its node's (or its cpuset's)."""
    try:
        return float(len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS
        return float(os.cpu_count() or 1)


def cpus(cpu_max: pathlib.Path = CGROUP_CPU_MAX, v1: pathlib.Path = CGROUP_V1_CPU) -> float:
    """The CPUs this process may run on: its affinity (all the machine's where there is none), capped by its
    cgroup's quota (a pod's CPU limit: "150000 100000" is 1.5; cgroup v1's cfs_quota_us over cfs_period_us)."""
    count = affinity()
    try:
        quota, period = cpu_max.read_text().split()[:2]
    except (OSError, ValueError):  # no cgroup v2 here: v1's files, if any
        try:
            quota, period = ((v1 / name).read_text().strip() for name in ("cpu.cfs_quota_us", "cpu.cfs_period_us"))
        except OSError:
            return count
    try:
        if quota not in ("max", "-1"):
            count = min(count, int(quota) / int(period))
    except ValueError:
        pass  # no quota: the affinity stands
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
            "python": platform.python_version(), "command": redaction.redact(shlex.join(argv)),
            "fileSha256": file_hash(experiment_file)}


def ended(started: dict[str, object]) -> dict[str, object]:
    return {**started, "loadAfter": load()}


EARLIER_RUNS = "earlierRuns"
"""EARLIER_RUNS: in a resumed session's provenance, the words of each run before the latest (the first, then each
earlier resume), oldest first: a report made of several runs names them all."""
EARLIER_SEPARATOR = " | "


def resumed(before: Mapping[str, object], now: dict[str, object]) -> dict[str, object]:
    """The provenance of a `--resume`: its own start (`now`), and the runs before it in EARLIER_RUNS."""
    if not before:
        return now
    earlier = _earlier(before) + [words({k: v for k, v in before.items() if k != EARLIER_RUNS})]
    return {**now, EARLIER_RUNS: earlier}


def _earlier(document: Mapping[str, object]) -> list[str]:
    """EARLIER_RUNS as a list: session.json keeps a list, a sweep run's tag (one string) joins them."""
    found = document.get(EARLIER_RUNS)
    if isinstance(found, str):
        return found.split(EARLIER_SEPARATOR) if found else []
    return [str(item) for item in found] if isinstance(found, list) else []


def words(document: Mapping[str, object]) -> str:
    """One line for a report's header: host, CPUs, load, versions, command and file; a cluster's (`at_operator`)
    names its nodes, pods, image and resource instead. A resumed session's line names each earlier run after it."""
    if OPERATOR_RINGLEADER in document:
        return _cluster_words(document)
    load_after = document.get("loadAfter")
    line = (f"{document.get('host')}: {document.get('cpus')} CPUs (quota {document.get('cpuQuota')}), load "
            f"{document.get('loadBefore')} before" + (f", {load_after} after" if load_after is not None else "")
            + f"; ringleader {document.get('ringleader')}, torch {document.get('torch')}, Python "
            f"{document.get('python')}; `{document.get('command')}`"
            + (f", file sha256 {document['fileSha256']}" if document.get("fileSha256") else ""))
    earlier = _earlier(document)
    if earlier:
        runs = "; ".join(f"run {n}: {said}" for n, said in enumerate(earlier, start=1))
        line += f" (run {len(earlier) + 1}, a resume; before it, {runs})"
    return line


# An operator's sweep run. At its creation: the operator's own versions (OPERATOR_RINGLEADER marks a cluster's
# provenance), the resource as its "command", its spec's hash and the pods' image. At the experiment's end, what the
# ranks recorded (of_pods): NODES, CPU_QUOTA and LOAD_PER_CPU_AT_END as min-max over the ranks, and the ringleader,
# torch and Python of the pods (the keys a local run uses for what trained).
OPERATOR_RINGLEADER = "operatorRingleader"
OPERATOR_PYTHON = "operatorPython"
SPEC_SHA256 = "specSha256"
IMAGE = "image"
NODES = "nodes"
CPU_QUOTA = "cpuQuota"
LOAD_PER_CPU_AT_END = "loadPerCpuAtEnd"
NAMES_SHOWN = 6  # nodes named in words; the tag keeps them all


def spec_hash(spec: Mapping[str, Any]) -> str:
    """sha256 of the spec's canonical JSON (sorted keys, no spaces), its first 16 hex digits: the same spec, the
    same hash, and nothing of its values told."""
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def at_operator(namespace: str, name: str, generation: int | None, spec: Mapping[str, Any],
                image: str) -> dict[str, object]:
    """What the operator knows of an experiment's numbers as its sweep run is made: no value of the spec (it may
    name secrets), only its hash."""
    command = f"DistributedTrainingExperiment {namespace}/{name}" + (f", generation {generation}" if generation else "")
    return {"command": command, SPEC_SHA256: spec_hash(spec), IMAGE: redaction.redact(image),
            OPERATOR_RINGLEADER: version("ringleader"), OPERATOR_PYTHON: platform.python_version()}


def of_pods(usages: Iterable[Mapping[str, Any]]) -> dict[str, object]:
    """What the ranks recorded of where they ran (each trial summary's usage, runtime/usage.py): the nodes, the CPUs
    their pods could use and each node's load per CPU as the ranks ended (min-max), the versions in the pods;
    {} when no rank recorded any."""
    used = [rank for usage in usages for rank in usage.values() if isinstance(rank, Mapping)]
    found = {NODES: ", ".join(_labels(used, keys.NODE)), CPU_QUOTA: _span(_numbers(used, keys.CPUS)),
             LOAD_PER_CPU_AT_END: _span(_numbers(used, keys.LOAD_PER_CPU)),
             "ringleader": " or ".join(_labels(used, keys.RINGLEADER)),
             "torch": " or ".join(_labels(used, keys.TORCH)), "python": " or ".join(_labels(used, keys.PYTHON))}
    return {key: value for key, value in found.items() if value}


def _labels(used: list[Mapping[str, Any]], key: str) -> list[str]:
    return sorted({value for rank in used if isinstance(value := rank.get(key), str) and value})


def _numbers(used: list[Mapping[str, Any]], key: str) -> list[float]:
    return [float(value) for rank in used
            if isinstance(value := rank.get(key), (int, float)) and not isinstance(value, bool)]


def _span(values: list[float]) -> str | None:
    """"0.5" when all are alike, "0.25-1.5" when not; None for none."""
    if not values:
        return None
    low, high = (f"{round(v, 2):g}" for v in (min(values), max(values)))
    return low if low == high else f"{low}-{high}"


def _cluster_words(document: Mapping[str, object]) -> str:
    names = [name for name in str(document.get(NODES) or "").split(", ") if name]
    shown = ", ".join(names[:NAMES_SHOWN]) + (", ..." if len(names) > NAMES_SHOWN else "")
    where = f"node {shown}" if len(names) == 1 else f"{len(names)} nodes ({shown})" if names else "the cluster"
    pods = [f"pods with CPU quota {document[CPU_QUOTA]}" if document.get(CPU_QUOTA) else None,
            f"load per CPU {document[LOAD_PER_CPU_AT_END]} at the ranks' end" if document.get(LOAD_PER_CPU_AT_END)
            else None]
    measured = ", ".join(part for part in pods if part) or "the ranks recorded no usage"
    versions = ", ".join(f"{label} {document[key]}" for label, key in (("ringleader", "ringleader"),
                                                                        ("torch", "torch"), ("Python", "python"))
                         if document.get(key))
    image = f"{versions} in image {document.get(IMAGE)}" if versions else f"image {document.get(IMAGE)}"
    return (f"{where}: {measured}; {image}; operator ringleader {document[OPERATOR_RINGLEADER]}, Python "
            f"{document.get(OPERATOR_PYTHON)}; `{document.get('command')}`"
            + (f", spec sha256 {document[SPEC_SHA256]}" if document.get(SPEC_SHA256) else ""))


def command_line() -> list[str]:
    """This process's command line as typed: `ringleader run ...`."""
    return ["ringleader", *sys.argv[1:]] if sys.argv and sys.argv[0].endswith(("ringleader", "cli.py")) \
        else list(sys.argv)
