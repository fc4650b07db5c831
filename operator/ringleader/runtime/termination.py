"""A pod being stopped (deleted with its experiment, preempted, its node drained) gets SIGTERM, then SIGKILL
after its grace period (30 s unless the pod says otherwise). A rank that publishes live uses that time to send
its last records and end its rank run KILLED, then exits as SIGTERM would have ended it (status 143).

The work runs on a thread of its own, woken through the signal module's wakeup file descriptor, which the
C-level handler writes at once, in whichever thread the signal lands: a Python signal handler runs only
when the main thread next executes bytecode, which a collective waiting on a dead peer may not do for
minutes. SIGTERM needs a handler installed, not its default: in a container the rank is PID 1, and the
kernel discards a signal that PID 1 leaves at its default (blocking it instead does not help: threads
that torch starts at import do not block it).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from typing import Callable

from ringleader.contract import exits

# Of Kubernetes' default 30 s grace period: the rest is for the process to go before SIGKILL.
PUBLISH_SECONDS = 20.0
_requested = threading.Event()
_sockets: tuple[socket.socket, socket.socket] | None = None  # kept open for the process's life


def requested() -> bool:
    """Whether SIGTERM came: the rank's errors that follow (peers stopped too) are not its failure."""
    return _requested.is_set()


def wait_for_exit() -> None:
    """Let the SIGTERM thread publish and end the process; returns only if it did not within its time."""
    time.sleep(PUBLISH_SECONDS + 5.0)


def on_termination(action: Callable[[], None]) -> None:
    """From now on, SIGTERM runs `action` (bounded by the caller), then ends the process with status 143.
    Call from the main thread (the signal module's rule)."""
    global _sockets
    wakeup, woken = _sockets = socket.socketpair()
    wakeup.setblocking(False)
    signal.set_wakeup_fd(wakeup.fileno(), warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, lambda signum, frame: None)  # the wakeup byte is what acts

    def wait() -> None:
        while (byte := woken.recv(1)) != bytes([signal.SIGTERM]):  # other handled signals (SIGINT) write here too
            if not byte:
                return
        _requested.set()
        print("SIGTERM: the pod is being stopped; publishing this rank's last records first", file=sys.stderr,
              flush=True)
        try:
            action()
        finally:
            sys.stdout.flush()
            os._exit(exits.signalled(signal.SIGTERM))

    threading.Thread(target=wait, name="sigterm", daemon=True).start()
