"""Whether a trial's ranks asked for more CPUs than their machine had, enough to have moved its timings, from the
usage in its summary (runtime/usage.py); used by findings.py, which calls such timings contended and names no
winner among them.

Demand is the threads a machine's ranks run (torch's intra-op threads, summed over its ranks), supply the CPUs
they may run on. Demand over supply alone moves nothing: ranks that mostly wait for the network leave the CPUs
idle, and none waits for one. So contention is said only where the CPUs were also busy, on average at least
BUSY_SHARE of them, or where how busy is unmeasured.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ringleader.contract import keys

BUSY_SHARE = 0.5
"""The share of a machine's CPUs its ranks kept busy on average from which, with more threads than CPUs, a
runnable thread often finds every CPU taken: below it, the CPUs sat idle more than half the time."""


@dataclasses.dataclass(frozen=True)
class Machine:
    """One machine's ranks: their CPU demand (threads) against supply (CPUs), and how many CPUs they kept busy."""

    ranks: int
    threads: int
    cpus: float
    busy: float | None
    """CPUs busy on average (the ranks' CPU utilization summed); None where a rank did not measure it."""

    @property
    def over(self) -> bool:
        return self.threads > self.cpus

    @property
    def busy_share(self) -> float | None:
        return None if self.busy is None else self.busy / self.cpus

    @property
    def contended(self) -> bool:
        """Demand over supply, and the CPUs busy enough (or not measured) for a thread to have waited for one."""
        return self.over and (self.busy_share is None or self.busy_share >= BUSY_SHARE)

    def said(self) -> str:
        """"3 threads on 2 CPUs (demand 1.5x supply), 1.7 of them busy on average (85 %)"."""
        busy = ("how busy unmeasured" if self.busy is None
                else f"{self.busy:.1f} of them busy on average ({100 * self.busy / self.cpus:.0f} %)")
        return (f"{_plural(self.threads, 'thread')} on {self.cpus:g} CPUs (demand {self.threads / self.cpus:.1f}x "
                f"supply), {busy}")


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def ranks_by_machine(usage: Mapping[Any, Any] | None) -> dict[str, list[tuple[int, Mapping[str, Any]]]]:
    """{machine: [(rank, its usage), ...]} of a summary's usage ({rank: {host, node, cpus, ...}}), the ranks that
    measured their CPUs only. The machine is the node: pods of one node share its cores whatever each one's quota
    (keys.MACHINE_CPUS). A rank that did not record its node's CPUs (an older runtime) is grouped by its host, as
    it was, since what its node had is unknown."""
    machines_: dict[str, list[tuple[int, Mapping[str, Any]]]] = {}
    for rank, used in (usage or {}).items():
        if isinstance(used, Mapping) and isinstance(used.get(keys.CPUS), (int, float)) and used[keys.CPUS] > 0:
            node = used.get(keys.NODE) if _number(used.get(keys.MACHINE_CPUS)) else None
            machines_.setdefault(str(node or used.get(keys.HOST)), []).append((int(rank), used))
    return machines_


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def supply(ranked: list[tuple[int, Mapping[str, Any]]]) -> float:
    """The CPUs a machine's ranks share: the node's (keys.MACHINE_CPUS) where every rank recorded them, else the
    fewest CPUs any of them could use (keys.CPUS, an older runtime's records)."""
    if all(_number(used.get(keys.MACHINE_CPUS)) for _, used in ranked):
        return min(float(used[keys.MACHINE_CPUS]) for _, used in ranked)
    return min(float(used[keys.CPUS]) for _, used in ranked)


def machines(usage: Mapping[str, Any] | None) -> list[Machine]:
    """A trial's machines (ranks grouped by node) as its summary's usage measured them."""
    found = []
    for ranked in ranks_by_machine(usage if isinstance(usage, Mapping) else None).values():
        ranks = [used for _, used in ranked]
        utilizations = [used.get(keys.CPU_UTILIZATION) for used in ranks]
        measured = [float(u) for u in utilizations if isinstance(u, (int, float))]
        busy = sum(measured) if len(measured) == len(utilizations) else None
        found.append(Machine(len(ranks), sum(int(used.get(keys.THREADS) or 1) for used in ranks), supply(ranked),
                             busy))
    return found


def crowded(usage: Mapping[str, Any] | None) -> str | None:
    """Where a trial's ranks (its summary's `usage`) asked more CPUs than they had while keeping them busy, in
    words: "3 ranks ran 3 threads on 2 CPUs (demand 1.5x supply), 1.7 of them busy on average (85 %)"; None
    where contention cannot have moved its timings."""
    contended = [machine for machine in machines(usage) if machine.contended]
    if not contended:
        return None
    if len(contended) == 1:
        [machine] = contended
        return f"{_plural(machine.ranks, 'rank')} ran {machine.said()}"
    shapes = sorted({machine.said() for machine in contended})
    return f"{len(contended)} machines' ranks ran more threads than CPUs ({'; '.join(shapes)})"
