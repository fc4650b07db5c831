"""The sync paradigms' server-side decisions: after each push, which workers get their OK (BSP, ASP, SSP, DSSP).

Pure and deterministic (no torch, no clock of its own: callers pass `now`), so the decisions are
unit-tested on scripted push sequences (tests/unit/test_paradigms.py). `exchange/server.py` runs one
gate per owner (every parameter server, every peer's shard server), each on the pushes it receives,
and a worker goes on once every owner has answered. The decisions agree across owners because the
clocks travel with the data: every push carries its sender's push count, so each owner knows t[i]
of every worker up to the pushes still in flight, and pushes from one worker arrive in order.
- BSP, ASP and SSP decide from push counts alone. An owner that has not yet heard a push sees a
  smaller clock, so it is stricter, never looser: an SSP worker goes only when every shard is
  within s of its slowest worker, and a BSP owner is its own shard's barrier (it answers when the
  round's N gradients are in). No owner waits on another's decision.
- DSSP's controller also reads push times, which differ from owner to owner, so it runs on owner 0
  alone (`DSSP`). The grant travels with the data: owner 0's answer carries it, and the worker
  relays it (a GRANT message) to the other owners, who follow it (`DSSPFollower`) and otherwise
  apply DSSP's count rule (within s_L of the slowest). Only the steps where the controller runs
  wait on owner 0's word.

Workers are indices 0..N-1. Every gate keeps t[i] (pushes received from worker i) and the set of
workers whose OK it holds. `clock` (min t over the workers still training) is the global clock:
every such worker has pushed at least that many gradients, so weights released at clock c lack at
most t[p] - c iterations of anyone's updates, which is the staleness a worker records.
A worker that is done (its last iteration, or the stop at a target) is `retire`d: it no longer
counts as the slowest, nor in a BSP round, so nobody waits for pushes that will never come.

DSSP follows its published algorithm to the letter, with these readings of what it leaves open:
argmin/argmax take the lowest index among ties (numpy's rule); before a worker's first push its
push times A[i] are both the time of its initial pull (`begin`), so its first interval runs from
the initial pull, and a worker never heard from has interval 0. As stated, a grant of r lets p
push r more times past the push that triggered it without a check, and a fast worker whose grant
ran out is granted again whenever the controller again finds r > 0; nothing bounds the sum of
grants, so against a persistent straggler the fast worker's lead is NOT bounded by s_U
(tests/unit/test_paradigms.py pins this). Each granted threshold s_L + r lies in [s_L, s_U].
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from ringleader.api import spec, variants


class ProtocolError(RuntimeError):
    """A worker broke the push/OK protocol (pushed while its OK was held): a bug, never retried."""


@dataclasses.dataclass(frozen=True)
class Grant:
    """One DSSP controller decision: `extra` iterations (r) granted to `worker` past s_L."""

    worker: int
    extra: int
    threshold: int  # s_L + r, in [s_L, s_U]


class Gate:
    """Push counts and held OKs; each paradigm says who is released after a push."""

    averages_rounds = False
    """True when the server must average a round's N gradients before releasing anyone (BSP);
    False when it applies every push at once."""

    def __init__(self, workers: int):
        if workers < 1:
            raise ValueError(f"a gate needs at least one worker, got {workers}")
        self.t = [0] * workers
        self.blocked: list[int] = []  # held OKs, in the order they were held
        self.pushed_at = [(0.0, 0.0)] * workers  # A[i] = (latest, previous) push times
        self.last_grant: Grant | None = None  # set by the push that made a DSSP grant
        self.retired: set[int] = set()  # done: no more pushes will come from these

    @property
    def workers(self) -> int:
        return len(self.t)

    @property
    def active(self) -> list[int]:
        """The workers still training (all of them, once every one is done: their counts are final)."""
        return [w for w in range(len(self.t)) if w not in self.retired] or list(range(len(self.t)))

    @property
    def clock(self) -> int:
        return min(self.t[w] for w in self.active)

    def slowest(self) -> int:
        """The worker still training with the fewest pushes (the lowest index among ties)."""
        return min(self.active, key=lambda w: (self.t[w], w))

    def begin(self, worker: int, now: float) -> None:
        """The worker pulled its initial weights at `now`: its iteration intervals count from here."""
        self.pushed_at[worker] = (now, now)

    def on_push(self, worker: int, now: float) -> list[int]:
        """Worker `worker` pushed a gradient at `now`; returns the workers to OK now, in index order."""
        if worker in self.blocked:
            raise ProtocolError(f"worker {worker} pushed again while its OK was held")
        self.last_grant = None
        self.pushed_at[worker] = (now, self.pushed_at[worker][0])
        self.t[worker] += 1
        return sorted(self._decide(worker))

    def _decide(self, worker: int) -> list[int]:
        raise NotImplementedError

    def retire(self, worker: int) -> list[int]:
        """`worker` is done and pushes no more; returns the held workers that may go now that it does not count."""
        if worker in self.blocked:
            raise ProtocolError(f"worker {worker} said it was done while its OK was held")
        self.retired.add(worker)
        return sorted(self._release_after_retire())

    def _release_after_retire(self) -> list[int]:
        return self._release_where(self._may_go)

    def _may_go(self, worker: int) -> bool:
        """Whether a held worker may go now (the paradigm's rule, re-checked when the slowest changes)."""
        return True

    def allowance(self, worker: int) -> int:
        """The push count through which `worker` may go without a check (DSSP's grants); 0: none."""
        return 0

    def on_grant(self, worker: int, through: int) -> list[int]:
        """Owner 0's controller granted `worker` pushes through count `through`; returns the workers to OK now."""
        raise ProtocolError(f"worker {worker} relayed a grant, but only DSSP grants (this gate is "
                            f"{type(self).__name__})")

    def _hold(self, worker: int) -> None:
        self.blocked.append(worker)

    def _release_where(self, may_go) -> list[int]:
        released = [w for w in self.blocked if may_go(w)]
        self.blocked = [w for w in self.blocked if w not in released]
        return released

    def _release_or_hold(self, worker: int, may_go) -> list[int]:
        """The held workers that may go now, and the pusher too if it may; else the pusher is held."""
        released = self._release_where(may_go)
        if may_go(worker):
            released.append(worker)
        else:
            self._hold(worker)
        return released


class BSP(Gate):
    """Bulk synchronous: hold every OK until all N workers pushed this iteration, then release all together."""

    averages_rounds = True

    def round_complete(self) -> bool:
        # Each worker pushes once per round, so equal counts of those still training mean the round is complete.
        return len({self.t[w] for w in self.active}) == 1

    def _decide(self, worker: int) -> list[int]:
        self._hold(worker)
        return self._release_where(lambda w: True) if self.round_complete() else []

    def _release_after_retire(self) -> list[int]:
        return self._release_where(lambda w: True) if self.blocked and self.round_complete() else []


class ASP(Gate):
    """Asynchronous: OK at once, always."""

    def _decide(self, worker: int) -> list[int]:
        return [worker]


class SSP(Gate):
    """Stale synchronous: only a worker more than `staleness` pushes ahead of the slowest waits."""

    def __init__(self, workers: int, staleness: int):
        super().__init__(workers)
        if staleness < 0:
            raise ValueError(f"SSP staleness must be >= 0, got {staleness}")
        self.staleness = staleness

    def _may_go(self, worker: int) -> bool:
        return self.t[worker] - self.clock <= self.staleness

    def _decide(self, worker: int) -> list[int]:
        return self._release_or_hold(worker, self._may_go)


class DSSP(Gate):
    """Dynamic SSP: a fast worker past s_L may get r in [0, s_U - s_L] extra
    iterations, r chosen by matching its predicted push times to the slowest worker's."""

    def __init__(self, workers: int, lower: int, upper: int):
        super().__init__(workers)
        if not 0 <= lower < upper:
            raise ValueError(f"DSSP needs 0 <= s_L < s_U, got s_L={lower}, s_U={upper}")
        self.lower = lower
        self.upper = upper
        self.r = [0] * workers
        self.granted = [0] * workers  # the push count each worker's latest grant (r > 0) runs through

    @property
    def r_max(self) -> int:
        return self.upper - self.lower

    def _fast(self) -> int:
        return max(self.active, key=lambda w: (self.t[w], -w))

    def _may_go(self, worker: int) -> bool:
        return self.t[worker] - self.clock <= self.lower

    def _decide(self, p: int) -> list[int]:
        ok = False
        if self.r[p] > 0:
            self.r[p] -= 1
            ok = True
        else:
            slow = self.slowest()
            if self.t[p] - self.t[slow] <= self.lower:
                ok = True
            elif p == self._fast():
                self.r[p] = self.controller(p, slow)
                self.last_grant = Grant(p, self.r[p], self.lower + self.r[p])
                ok = self.r[p] > 0
                if ok:
                    self.granted[p] = self.t[p] + self.r[p]  # this push and r more, unchecked
        # A push can make the slowest worker less slow, which may free workers held before.
        released = self._release_where(self._may_go)
        if ok:
            released.append(p)
        else:
            self._hold(p)
        return released

    def allowance(self, worker: int) -> int:
        return self.granted[worker]

    def controller(self, p: int, slow: int) -> int:
        """r in [0, r_max]: how many extra iterations p may run before syncing; 0 means wait now."""
        p_latest, p_previous = self.pushed_at[p]
        s_latest, s_previous = self.pushed_at[slow]
        interval_p = p_latest - p_previous
        interval_s = s_latest - s_previous
        sim_p = [p_latest + i * interval_p for i in range(self.r_max + 1)]
        sim_s = [s_latest + interval_s + k * interval_s for k in range(self.r_max + 1)]
        gaps = [min(abs(s - predicted) for s in sim_s) for predicted in sim_p]
        return gaps.index(min(gaps))  # lowest r among equal gaps


class DSSPFollower(Gate):
    """DSSP on an owner other than owner 0: the count rule (within s_L of the slowest) and owner 0's
    grants, relayed by the workers; never the controller itself."""

    def __init__(self, workers: int, lower: int, upper: int):
        super().__init__(workers)
        if not 0 <= lower < upper:
            raise ValueError(f"DSSP needs 0 <= s_L < s_U, got s_L={lower}, s_U={upper}")
        self.lower = lower
        self.granted = [0] * workers  # each worker's allowance: pushes through this count go unchecked

    def _may_go(self, w: int) -> bool:
        return self.t[w] <= self.granted[w] or self.t[w] - self.clock <= self.lower

    def _decide(self, p: int) -> list[int]:
        return self._release_or_hold(p, self._may_go)

    def allowance(self, worker: int) -> int:
        return self.granted[worker]

    def on_grant(self, worker: int, through: int) -> list[int]:
        self.granted[worker] = max(self.granted[worker], through)
        return sorted(self._release_where(lambda w: w == worker and self._may_go(w)))


GATES: dict[variants.Paradigm, Callable[[spec.SyncSpec, int, int], Gate]] = {
    variants.Paradigm.BSP: lambda sync, workers, owner: BSP(workers),
    variants.Paradigm.ASP: lambda sync, workers, owner: ASP(workers),
    variants.Paradigm.SSP: lambda sync, workers, owner: SSP(workers, _bound(sync, "staleness")),
    # DSSP's controller runs on owner 0 alone; the other owners follow its grants.
    variants.Paradigm.DSSP: lambda sync, workers, owner: (DSSP if owner == 0 else DSSPFollower)(
        workers, _bound(sync, "staleness"), _bound(sync, "max_staleness")),
}
"""GATES: per paradigm, its gate (sync, workers, owner), given the staleness fields variants.PARADIGMS says it needs."""


def _bound(sync: spec.SyncSpec, field: str) -> int:
    """A staleness bound of the paradigm's, which make_gate has found set."""
    value: int | None = getattr(sync, field)
    assert value is not None, f"make_gate refuses a {sync.paradigm} sync spec without {field}"
    return value


def make_gate(sync: spec.SyncSpec, workers: int, *, owner: int = 0) -> Gate:
    """The gate of a trial's sync spec for `workers` workers, on shard owner `owner` (0 runs DSSP's controller)."""
    paradigm = variants.Paradigm(sync.paradigm)
    for field in variants.PARADIGMS[paradigm].staleness_fields:
        if sync.model_dump(by_alias=True).get(field) is None:
            raise ValueError(f"{paradigm.value} needs sync.{field}")
    return GATES[paradigm](sync, workers, owner)
