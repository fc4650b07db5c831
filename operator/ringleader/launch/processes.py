"""Rank processes of a local trial: started in their own process groups, described when they exit, stopped for sure.

Used by trials.py. Each rank runs `python -m ringleader.runtime` in a new session, so a Ctrl-C on the
terminal reaches only the launcher, which then stops every group it started (SIGTERM, then SIGKILL
after a grace period). If the launcher itself is killed, the kernel kills the ranks
(PR_SET_PDEATHSIG; on macOS each rank notices its parent is gone, runtime/parent.py), so no rank
outlives it either way.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import dataclasses
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Mapping

from ringleader.api.trial import Slot
from ringleader.contract import failures

PR_SET_PDEATHSIG = 1


def _die_with(parent: int):
    """Linux: the kernel kills the rank when the launcher dies. Elsewhere (macOS) None: the rank watches its
    parent itself (runtime/parent.py, told the launcher's pid by RINGLEADER_LAUNCHER_PID)."""
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

    def setup() -> None:  # runs in the child between fork and exec: nothing but two system calls
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the launcher died before prctl took effect
            os._exit(1)
    return setup


@dataclasses.dataclass
class RankProcess:
    slot: Slot
    popen: subprocess.Popen
    stdout_path: pathlib.Path
    stderr_path: pathlib.Path
    stopped: bool = False
    """stopped is set when the launcher itself stopped this rank (another rank failed, a deadline, Ctrl-C)."""

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def stderr_tail(self, lines: int) -> list[str]:
        try:
            with open(self.stderr_path, "rb") as handle:
                handle.seek(max(0, handle.seek(0, os.SEEK_END) - 64 * 1024))
                text = handle.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return []
        return [line for line in text.splitlines() if line.strip()][-lines:]

    def exit_description(self) -> str:
        """"exited with code 3" or "was killed by signal 9 (SIGKILL)"."""
        code = self.popen.returncode
        if code is None:
            return "is still running"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = "unknown signal"
            return f"was killed by signal {-code} ({name})"
        return f"exited with code {code}"

    def signal_name(self) -> str | None:
        code = self.popen.returncode
        if code is None or code >= 0:
            return None
        try:
            return signal.Signals(-code).name
        except ValueError:
            return str(-code)

    def own_reason(self) -> str | None:
        """The runtime's one-line reason (contract/failures.py), if the rank printed one before it ended."""
        return failures.reason_of(self.stderr_tail(20))

    def failure_reason(self, tail_lines: int) -> str:
        """Why this rank failed: how it exited, the runtime's own reason line if any, and its last stderr lines."""
        text = f"rank {self.slot.rank} ({self.slot.label}) {self.exit_description()}"
        reason = self.own_reason()
        if reason:
            return f"{text}: {reason}"
        shown = self.stderr_tail(tail_lines)
        if shown:
            text += "; last stderr lines:\n" + "\n".join(f"    {line}" for line in shown)
        return text

    def exit(self, order: float) -> failures.Exit:
        """This rank's end, for failures.verdict()."""
        tail = self.stderr_tail(20)
        return failures.Exit(rank=self.slot.rank, external=self.signal_name() is not None,
                             reason=failures.reason_of(tail), permanent=failures.is_permanent(tail),
                             stopped=self.stopped, order=order)


def start(slot: Slot, environ: Mapping[str, str], cwd: pathlib.Path, stdout_path: pathlib.Path,
          stderr_path: pathlib.Path) -> RankProcess:
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
        popen = subprocess.Popen(
            [sys.executable, "-m", "ringleader.runtime"], env=dict(environ), cwd=cwd,
            stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr,
            start_new_session=True, preexec_fn=_die_with(os.getpid()),
        )
    return RankProcess(slot, popen, stdout_path, stderr_path)


def _signal_group(process: RankProcess, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)  # the rank leads its own group (start_new_session)
    except (ProcessLookupError, PermissionError):
        pass


def stop(processes: list[RankProcess], grace_seconds: float) -> None:
    """SIGTERM every group still running, SIGKILL what is left after the grace period; reap all."""
    for process in processes:
        if process.poll() is None:
            process.stopped = True
            _signal_group(process, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    for process in processes:
        try:
            process.popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for process in processes:
        # Also the groups of ranks that exited: a child they started may still be in there.
        _signal_group(process, signal.SIGKILL)
        process.popen.wait()
    # Grandchildren die a moment after SIGKILL and are reaped by init: return once they are gone (bounded).
    settled = time.monotonic() + 2.0
    while any(_group_exists(p) for p in processes) and time.monotonic() < settled:
        time.sleep(0.02)


def _group_exists(process: RankProcess) -> bool:
    try:
        os.killpg(process.pid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False
