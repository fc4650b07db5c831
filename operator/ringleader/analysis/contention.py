"""Whether a trial's ranks shared too few CPUs, from the usage in its summary (runtime/usage.py); used by
findings.py, which calls such timings contended and names no winner among them."""

from __future__ import annotations

from typing import Any, Mapping

from ringleader.contract import keys


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def crowded(summary: Mapping[str, Any] | None) -> str | None:
    """Where a trial's ranks (its `summary`'s usage) had more threads than their machine's CPUs, in words:
    "3 ranks (3 threads) had 2 CPUs, 1.2 of them busy on average"; None where every machine had a CPU per thread."""
    usage = (summary or {}).get(keys.USAGE)
    if not isinstance(usage, dict):
        return None
    hosts: dict[str, list[dict]] = {}
    for used in usage.values():
        if isinstance(used, dict) and isinstance(used.get(keys.CPUS), (int, float)):
            hosts.setdefault(str(used.get(keys.HOST)), []).append(used)
    crowded = []
    for ranks in hosts.values():
        cpus = min(used[keys.CPUS] for used in ranks)
        threads = sum(int(used.get(keys.THREADS) or 1) for used in ranks)
        if threads > cpus:
            crowded.append((len(ranks), threads, cpus, sum(used.get(keys.CPU_UTILIZATION) or 0.0 for used in ranks)))
    if not crowded:
        return None
    if len(crowded) == 1:
        count, threads, cpus, busy = crowded[0]
        return (f"{_plural(count, 'rank')} ({_plural(threads, 'thread')}) had {cpus:g} CPUs, {busy:.1f} of them busy "
                "on average")
    shapes = sorted({f"{_plural(threads, 'thread')} on {cpus:g} CPUs" for _, threads, cpus, _ in crowded})
    return f"{len(crowded)} machines had fewer CPUs than their ranks' threads ({', '.join(shapes)})"
