"""A rank's heartbeat: a counter in the trial's TCPStore and a file touched on disk; started by `main.py`.

Two readers. A rank whose collective failed asks the store which peers stopped beating, so its
failure line names the rank that went away ("lost contact with rank 1") instead of "a peer". The
local launcher reads the file's modification time to name a rank that stopped making progress
(SIGSTOP, a hang in native code) long before the communication timeout fires. The beat comes from a
thread of its own, so a rank blocked in a collective, waiting on a peer, still beats: only a rank
that is itself stopped, dead or wedged goes quiet.
"""

from __future__ import annotations

import datetime
import os
import pathlib
import threading
import time

import torch.distributed as dist

HEARTBEAT_FILE = "heartbeat"
INTERVAL_SECONDS = 0.5
# Long enough for several beats of a live rank on a loaded machine, short enough to add little to a failure.
PROBE_SECONDS = 2.0
# A store call must not hang the rank: a stopped store host would otherwise block the probe for good.
STORE_TIMEOUT = datetime.timedelta(seconds=5)


def _key(rank: int) -> str:
    return f"ringleader/heartbeat/{rank}"


class Heartbeat:
    """Beats every INTERVAL_SECONDS until the process ends (a daemon thread: it never holds the exit up)."""

    def __init__(self, master_addr: str, master_port: int, rank: int, world_size: int, directory: pathlib.Path):
        self.rank, self.world_size = rank, world_size
        self.path = directory / HEARTBEAT_FILE
        self.path.touch()
        # A client of its own: the default group's store is used by the training thread meanwhile.
        self._store = dist.TCPStore(master_addr, master_port, is_master=False, timeout=STORE_TIMEOUT,
                                    wait_for_workers=False)
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-rank-{rank}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while True:
            try:
                self._store.add(_key(self.rank), 1)
            except Exception:  # the store host is gone: peers learn it from their own failed calls; keep the file
                pass
            try:
                os.utime(self.path)
            except OSError:
                pass
            time.sleep(INTERVAL_SECONDS)

    def silent_peers(self) -> list[int] | None:
        """The peers that did not beat during PROBE_SECONDS; None when the store itself cannot be reached.

        Called after a communication error: it costs PROBE_SECONDS, once, on the way out."""
        peers = [r for r in range(self.world_size) if r != self.rank]
        try:
            before = {r: self._store.add(_key(r), 0) for r in peers}
            time.sleep(PROBE_SECONDS)
            after = {r: self._store.add(_key(r), 0) for r in peers}
        except Exception:
            return None
        return [r for r in peers if after[r] == before[r]]


def lost_peer(heartbeat: Heartbeat | None) -> int | None:
    """The one peer a failed rank lost: the only silent one; None when it cannot be told.

    An unreachable store names no one: its host (rank 0) may be the cause, or may itself have exited
    because it lost another peer first."""
    silent = heartbeat.silent_peers() if heartbeat is not None else None
    return silent[0] if silent is not None and len(silent) == 1 else None
