"""A local rank leaves when its launcher dies, without the kernel's help (macOS has no parent-death signal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

# A launcher stand-in starts a "rank" that only watches it, prints the rank's pid, then waits to be killed.
LAUNCHER = textwrap.dedent("""
    import os, subprocess, sys, time
    rank = subprocess.Popen([sys.executable, "-c",
        "import os, time; from ringleader.runtime import parent; parent.watch(int(os.environ['LAUNCHER']), 0.1); "
        "time.sleep(60)"], env={**os.environ, "LAUNCHER": str(os.getpid())})
    print(rank.pid, flush=True)
    time.sleep(60)
""")


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for whichever process adopted it to reap it."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


def test_a_rank_exits_soon_after_its_launcher_is_killed():
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    rank = int(launcher.stdout.readline())
    try:
        time.sleep(0.5)
        assert alive(rank)  # watching a live launcher, it stays
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(10)
        deadline = time.monotonic() + 10
        while alive(rank) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(rank)
    finally:
        for pid in (rank, launcher.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
