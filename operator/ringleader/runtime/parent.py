"""A local rank leaves when its launcher is gone, on every OS; main.py starts it when the launcher says who it is.

On Linux the kernel already kills a rank whose launcher dies (PR_SET_PDEATHSIG, launch/processes.py);
macOS has no such signal, so a thread watches the parent process id instead: when the launcher dies,
the rank is re-parented and its parent id changes. Pods set no launcher, and watch nothing.
"""

from __future__ import annotations

import os
import sys
import threading
import time

INTERVAL_SECONDS = 1.0


def watch(launcher_pid: int, interval_seconds: float = INTERVAL_SECONDS) -> threading.Thread:
    """Exit this process (status 1) within `interval_seconds` of `launcher_pid` ceasing to be its parent."""
    def loop() -> None:
        while os.getppid() == launcher_pid:
            time.sleep(interval_seconds)
        print(f"ringleader: the launcher (pid {launcher_pid}) is gone; this rank stops", file=sys.stderr, flush=True)
        os._exit(1)

    thread = threading.Thread(target=loop, name="launcher-watch", daemon=True)
    thread.start()
    return thread
