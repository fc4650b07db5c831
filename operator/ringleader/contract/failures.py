"""A rank's one-line failure reason (format and parse), `blame()`: which rank caused a trial's failure, and
`verdict()`: the reason word and message that name it.

The runtime prints the line (runtime/ending.py); the local launcher (launch/trials.py) and the operator
(controller/trials.py) parse it back and decide, with the same `verdict()`, which rank to name and how. Both
wait a short grace after the first failure they see, because a rank that lost a peer often exits
before the peer's own end is visible (a SIGKILLed pod's status can arrive seconds after its peer's).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Callable, Iterable

from ringleader.contract import outcomes, unpublished

PREFIX = "ringleader: "
PERMANENT = " (permanent)"
"""Marks the failure line of a rank that failed in a way no restart can fix (an import error, an invalid model
or dataset, a factory that raises): the operator then fails the trial at once instead of spending backoffLimit."""
_LINE = re.compile(r"^ringleader: rank (?:(?P<rank>\d+) \((?P<who>[^)]*)\) )?failed(?P<permanent>"
                   + re.escape(PERMANENT) + r")?: (?P<reason>.*)$")
# What a rank says when it failed only because another one did: an echo of a failure, not its cause.
LOST_CONTACT = "lost contact with "
_LOST_RANK = re.compile(r"^lost contact with rank (?P<rank>\d+)\b")
# How long the launcher and the operator wait, after the first failure they see, for the others to end.
DEFAULT_GRACE_SECONDS = 10.0
MESSAGE_CHARACTERS = 1024
"""The most of a failure's text the operator quotes in a condition or Event (kopf cuts an Event at 1024 too)."""
ELLIPSIS = "…"


def shorten_middle(text: str | None, limit: int = MESSAGE_CHARACTERS) -> str:
    """`text` on one line, cut in the middle when longer than `limit`: its start names what failed, its end
    often what to do about it ("...; install it in the image or put it on PYTHONPATH")."""
    text = " ".join((text or "").split())
    if len(text) <= limit:
        return text
    head = (limit - len(ELLIPSIS)) // 2
    return text[:head] + ELLIPSIS + text[len(text) - (limit - len(ELLIPSIS) - head):]


def failure_line(rank: int | None, who: str, reason: str, *, permanent: bool = False) -> str:
    """"ringleader: rank 1 (worker) failed: RuntimeError: boom" — one line, whatever the reason holds;
    "failed (permanent):" when no restart can fix it."""
    reason = " ".join(reason.split())
    rank_ = f"rank {rank} ({who})" if rank is not None else "rank"
    return f"{PREFIX}{rank_} failed{PERMANENT if permanent else ''}: {reason}"


def _last(lines: Iterable[str]) -> re.Match | None:
    found = None
    for line in lines:
        found = _LINE.match(line.strip()) or found
    return found


def reason_of(lines: Iterable[str]) -> str | None:
    """The reason of the last failure line among `lines` (a rank's stderr, a pod's termination message)."""
    found = _last(lines)
    return found["reason"].strip() if found else None


def rank_of(lines: Iterable[str]) -> int | None:
    """The rank the last failure line among `lines` names, if it names one."""
    found = _last(lines)
    return int(found["rank"]) if found and found["rank"] is not None else None


def is_permanent(lines: Iterable[str]) -> bool:
    """Whether the last failure line among `lines` says no restart can fix it."""
    found = _last(lines)
    return bool(found and found["permanent"])


def lost_contact(rank: int | None, detail: str) -> str:
    """The reason of a rank that lost a peer: "lost contact with rank 1 (...)", or "with a peer rank" when unknown."""
    peer = f"rank {rank}" if rank is not None else "a peer rank"
    return f"{LOST_CONTACT}{peer} (it died, hung or is unreachable): {detail}"


def is_echo(reason: str | None) -> bool:
    return reason is not None and reason.startswith(LOST_CONTACT)


def lost_rank(reason: str | None) -> int | None:
    """The rank an echo names ("lost contact with rank 1 ..." -> 1), or None."""
    match = _LOST_RANK.match(reason or "")
    return int(match["rank"]) if match else None


def ended_by_runtime(iterations: int) -> str:
    """What a rank that the runtime ended cleanly leaves as its pod's termination message (the aggregating
    worker leaves its summary): a pod that exits 0 without either ended outside the runtime's loop."""
    return f"{PREFIX}ended, {iterations} records"


def exited_early(who: str, recorded_nothing: bool) -> str:
    """The cause when a rank ended with code 0 outside the runtime's loop (os._exit(0) in user code) and its
    peers only lost contact: `who` is "rank 1 (worker-0)" locally, "pod exp-0-worker-0" on a cluster."""
    if recorded_nothing:
        return f"{who} exited with code 0 but recorded no iteration"
    return f"{who} exited with code 0 before its run ended (os._exit in user code?)"


@dataclasses.dataclass(frozen=True)
class Exit:
    """How one rank ended, as the launcher (a process) or the operator (a pod) sees it."""

    rank: int
    external: bool = False
    """Ended from outside: a signal, the OOM killer, an eviction, a deleted pod. The likeliest cause."""
    reason: str | None = None
    """The runtime's own failure reason, when the rank printed one."""
    permanent: bool = False
    """The rank said no restart can fix its failure (`failure_line(permanent=True)`)."""
    stopped: bool = False
    """Stopped by the launcher itself after another rank failed: never a cause."""
    order: float = 0.0
    """When it ended, in any unit that sorts in time order (ties are common: pods report whole seconds)."""

    @property
    def echo(self) -> bool:
        return self.stopped or is_echo(self.reason)


def blame(exits: Iterable[Exit]) -> Exit | int | None:
    """The rank to blame for a failed trial: its Exit, or only its number when the culprit is known only from
    its peers ("lost contact with rank 1") and its own end is not visible yet; None for no failure at all.

    Causes before echoes: an end from outside (signal, OOM, eviction), then a rank's own error, then a
    rank that only lost contact. Within a kind, the earliest, then the lowest rank. Among echoes only,
    the rank the echoes name wins, since it is the one that went away."""
    exits = list(exits)
    causes = [e for e in exits if not e.echo]
    if causes:
        return min(causes, key=lambda e: (not e.external, e.order, e.rank))
    named: dict[int, int] = {}
    for exit_ in exits:
        rank = lost_rank(exit_.reason)
        if rank is not None:
            named[rank] = named.get(rank, 0) + 1
    if named:
        rank = max(named, key=lambda r: (named[r], -r))
        return next((e for e in exits if e.rank == rank), rank)
    return min(exits, key=lambda e: (e.stopped, e.order, e.rank), default=None)


def settled(exits: Iterable[Exit], *, running: int, waited_seconds: float, grace_seconds: float) -> bool:
    """Whether blame can be decided now: nothing is still running, a cause has shown itself, or the grace is over."""
    exits = list(exits)
    if not exits:
        return False
    return running == 0 or any(not e.echo for e in exits) or waited_seconds >= grace_seconds


@dataclasses.dataclass(frozen=True)
class Early:
    """A rank that exited with code 0 outside the runtime's loop, as the backend saw it."""

    rank: int
    who: str
    """"rank 1 (worker-0)" locally, "pod exp-0-worker-0" on a cluster."""
    recorded_nothing: bool


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Why a trial failed: a word of contract/outcomes.py, the rank to name, and the message for people."""

    reason: str
    rank: int
    message: str


def stopped_responding(who: str, witness: str) -> str:
    """The cause for a rank its peers lost while it still ran: "rank 1 (worker-0) stopped responding: <witness>"."""
    return f"{who} stopped responding: {witness}"


def verdict(exits: Iterable[Exit], *, early: Early | None, who: Callable[[int], str],
            describe: Callable[[int], str]) -> Verdict:
    """The verdict on the failed ranks `exits` (at least one), once `settled()`. `early` is a rank that exited 0
    outside the runtime, which outranks peers that only lost contact; `who(rank)` names a rank ("rank 1 (worker-0)",
    "pod exp-0-worker-1"), `describe(rank)` says how a failed one ended."""
    exits = list(exits)
    culprit = blame(exits)
    if culprit is None:
        raise ValueError("verdict() needs at least one failed rank")
    if (isinstance(culprit, int) or culprit.echo) and early is not None:
        message = exited_early(early.who, early.recorded_nothing)
        if not early.recorded_nothing:  # it recorded something: what its peers saw says where it stopped
            message += f"; {describe(min(e.rank for e in exits))}"
        return Verdict(outcomes.EXITED_EARLY, early.rank, message)
    if isinstance(culprit, int):  # named by its peers, its own end not visible (yet): still running, silent
        witness = next(e.rank for e in exits if lost_rank(e.reason) == culprit)
        return Verdict(outcomes.RANK_FAILED, culprit, stopped_responding(who(culprit), describe(witness)))
    if culprit.permanent and unpublished.incomplete_of(culprit.reason):
        return Verdict(outcomes.RECORDS_INCOMPLETE, culprit.rank, describe(culprit.rank))
    return Verdict(outcomes.PERMANENT_FAILURE if culprit.permanent else outcomes.RANK_FAILED, culprit.rank,
                   describe(culprit.rank))
