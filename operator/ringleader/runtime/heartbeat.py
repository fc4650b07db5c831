"""A rank's heartbeat and stall watchdog: counters in the trial's TCPStore and a file touched on disk; started by
`main.py`.

Every INTERVAL_SECONDS a thread of the rank adds 1 to its beat counter and publishes its progress (the
iterations it recorded) beside it, and touches rank-<r>/heartbeat (its time says when the rank was last
alive). Beats say the process is alive; progress says its training is. A rank blocked in a collective,
waiting on a peer, still beats; a stopped (SIGSTOP), dead or frozen one goes quiet.

Two readers. A rank whose collective failed asks which peers stopped beating, so its failure line names the
rank that went away ("lost contact with rank 1") instead of "a peer". And the same thread watches for a
stall: when a rank whose heartbeat stopped made no progress for the stall timeout (runtime/settings.py,
60 s by default), the rank fails at once naming it ("rank 1 (worker-1) made no progress for 60 s"),
instead of waiting out the communication timeout (300 s) and being blamed itself. A rank that still
beats is only slow, perhaps, so it is named after ALIVE_FACTOR (5) stall timeouts without progress. `Watchdog` decides
who; it works the same in a pod and under `ringleader run`, since every rank watches its peers through the store.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import pathlib
import threading
import time
from typing import Callable

import torch.distributed as dist

HEARTBEAT_FILE = "heartbeat"
INTERVAL_SECONDS = 0.5
# Long enough for several beats of a live rank on a loaded machine, short enough to add little to a failure.
PROBE_SECONDS = 2.0
# A store call must not hang the rank: a stopped store host would otherwise block the probe for good.
STORE_TIMEOUT = datetime.timedelta(seconds=5)
# Added to a rank's progress when it is done training: it then waits for the others, legitimately idle.
DONE = 1 << 48
# The rank hosting the TCPStore (torch.distributed's env:// rendezvous: MASTER_ADDR is rank 0).
STORE_HOST = 0
# A rank whose heartbeat goes on is alive: its one iteration may just be long (a big model on a slow CPU),
# so it is called stalled only after this many stall timeouts; a silent one after one.
ALIVE_FACTOR = 5


def _key(rank: int) -> str:
    return f"ringleader/heartbeat/{rank}"


def _progress_key(rank: int) -> str:
    return f"ringleader/progress/{rank}"


@dataclasses.dataclass
class _Seen:
    value: int
    since: float
    """since when (monotonic seconds) the value has not changed."""


class Watchdog:
    """Who stopped a trial: fed what every rank's counters read, it names the rank that made no progress for
    `stall_seconds`, once one did. Pure bookkeeping: time is passed in (monotonic seconds)."""

    def __init__(self, rank: int, world_size: int, names: dict[int, str], stall_seconds: float, now: float = 0.0):
        self.rank, self.world_size, self.names, self.stall_seconds = rank, world_size, names, stall_seconds
        self._beats: dict[int, _Seen] = {}
        self._progress: dict[int, _Seen] = {}
        self._answered = now
        """_answered is when the store last answered a read."""

    def _name(self, rank: int) -> str:
        return f"rank {rank} ({self.names.get(rank, 'unknown')})"

    def observe(self, now: float, beats: dict[int, int], progress: dict[int, int]) -> None:
        """Counters read from the store at `now`."""
        self._answered = now
        for seen, values in ((self._beats, beats), (self._progress, progress)):
            for rank, value in values.items():
                if rank not in seen or seen[rank].value != value:
                    seen[rank] = _Seen(value, now)

    def verdict(self, now: float) -> tuple[int | None, str] | None:
        """None while the trial progresses; else (the rank to blame or None when it cannot be told, the reason)."""
        limit = self.stall_seconds
        if now - self._answered >= limit and self.rank != STORE_HOST:
            # A stopped store host does not close its sockets: a read then waits forever, whatever its timeout.
            return STORE_HOST, (f"{self._name(STORE_HOST)} made no progress for {limit:g} s: the rendezvous store it "
                                "hosts did not answer (stopped or frozen)")
        # Unchanged in reads that came back: a store that stopped answering is not evidence of a stall (above).
        stalled = {r: seen for r, seen in self._progress.items()
                   if seen.value < DONE and self._answered - seen.since >= self._patience(r)}
        if not stalled:
            return None
        if self.rank not in stalled:  # this rank goes on (ASP, SSP), so the stalled ones stopped by themselves
            culprit = min(stalled, key=lambda r: (stalled[r].value, r))
            return culprit, self._no_progress(culprit)
        silent = [r for r in stalled if self._silent(r)]
        if silent:  # stopped, dead or frozen: the likeliest cause of everyone else waiting
            culprit = min(silent)
            return culprit, self._no_progress(culprit)
        lowest = min(seen.value for seen in stalled.values())
        behind = [r for r, seen in stalled.items() if seen.value == lowest]
        if len(behind) == 1:
            culprit = behind[0]
            return culprit, self._no_progress(culprit)
        ranks = ", ".join(str(r) for r in sorted(stalled))
        return None, (f"no rank made progress for {limit * ALIVE_FACTOR:g} s (ranks {ranks} at iteration {lowest}), "
                      "though every one is alive: a hang inside a collective or native code")

    def _silent(self, rank: int) -> bool:
        # Half the stall timeout: a stopped rank's last beats come up to a beat after its last iteration, and a
        # live rank's beat thread is never held up that long, even on a loaded machine.
        seen = self._beats.get(rank)
        return seen is not None and self._answered - seen.since >= self.stall_seconds / 2

    def _patience(self, rank: int) -> float:
        return self.stall_seconds if self._silent(rank) else self.stall_seconds * ALIVE_FACTOR

    def _no_progress(self, rank: int) -> str:
        why = (" (and no heartbeat: stopped, frozen or dead)" if self._silent(rank)
               else " (its heartbeat goes on: stuck inside an iteration?)")
        return f"{self._name(rank)} made no progress for {self._patience(rank):g} s{why}"


class Heartbeat:
    """Beats every INTERVAL_SECONDS until the process ends (daemon threads: they never hold the exit up); with a
    stall timeout, a second thread watches the trial's progress and calls `on_stall(culprit, reason)` once it
    stopped."""

    def __init__(self, master_addr: str, master_port: int, rank: int, world_size: int, directory: pathlib.Path,
                 progress: Callable[[], int] = lambda: 0, names: dict[int, str] | None = None,
                 stall_seconds: float | None = None,
                 on_stall: Callable[[int | None, str], None] | None = None):
        self.rank, self.world_size = rank, world_size
        self.path = directory / HEARTBEAT_FILE
        self.path.touch()
        self._progress = progress
        self._sent = 0
        self._done = False
        self._lock = threading.Lock()
        self._watchdog = (Watchdog(rank, world_size, names or {}, stall_seconds, time.monotonic()) if stall_seconds
                          else None)
        self._check_seconds = max(INTERVAL_SECONDS, stall_seconds / 10) if stall_seconds else 0.0
        # A client of its own: the default group's store is used by the training thread meanwhile.
        self._store = dist.TCPStore(master_addr, master_port, is_master=False, timeout=STORE_TIMEOUT,
                                    wait_for_workers=False)
        threading.Thread(target=self._beat, name=f"heartbeat-rank-{rank}", daemon=True).start()
        if self._watchdog is not None and on_stall is not None:
            # Apart from the beats: a store read can block for good, and that too must end in a verdict.
            threading.Thread(target=self._watch, args=(self._watchdog, on_stall), name=f"watchdog-rank-{rank}",
                             daemon=True).start()

    def finished(self) -> None:
        """This rank is done training: from now on it waits for the others, and is never called stalled."""
        self._done = True

    def _beat(self) -> None:
        next_read = time.monotonic()
        while True:
            try:
                self._store.add(_key(self.rank), 1)
                progress = self._progress() + (DONE if self._done else 0)
                if progress != self._sent:
                    self._store.add(_progress_key(self.rank), progress - self._sent)
                    self._sent = progress
                if self._watchdog is not None and time.monotonic() >= next_read:
                    self._read_peers(self._watchdog)
                    next_read = time.monotonic() + self._check_seconds
            except Exception:  # noqa: BLE001 - the store host is gone: peers learn it from their own failed calls; keep the file
                pass
            try:
                os.utime(self.path)
            except OSError:
                pass
            time.sleep(INTERVAL_SECONDS)

    def _read_peers(self, watchdog: Watchdog) -> None:
        ranks = range(self.world_size)
        beats = {r: self._store.add(_key(r), 0) for r in ranks}
        progress = {r: self._store.add(_progress_key(r), 0) for r in ranks}
        with self._lock:
            watchdog.observe(time.monotonic(), beats, progress)

    def _watch(self, watchdog: Watchdog, on_stall: Callable[[int | None, str], None]) -> None:
        while not self._done:
            time.sleep(self._check_seconds)
            with self._lock:
                verdict = watchdog.verdict(time.monotonic())
            if verdict is not None and not self._done:
                on_stall(*verdict)
                return

    def silent_peers(self) -> list[int] | None:
        """The peers that did not beat during PROBE_SECONDS; None when the store itself cannot be reached.

        Called after a communication error: it costs PROBE_SECONDS, once, on the way out."""
        peers = [r for r in range(self.world_size) if r != self.rank]
        try:
            before = {r: self._store.add(_key(r), 0) for r in peers}
            time.sleep(PROBE_SECONDS)
            after = {r: self._store.add(_key(r), 0) for r in peers}
        except Exception:  # noqa: BLE001 - the store cannot be reached: None says so
            return None
        return [r for r in peers if after[r] == before[r]]


def lost_peer(heartbeat: Heartbeat | None) -> int | None:
    """The one peer a failed rank lost: the only silent one; None when it cannot be told.

    An unreachable store names no one: its host (rank 0) may be the cause, or may itself have exited
    because it lost another peer first."""
    silent = heartbeat.silent_peers() if heartbeat is not None else None
    return silent[0] if silent is not None and len(silent) == 1 else None
