"""A pod being stopped (deleted with its experiment, preempted, its node drained) gets SIGTERM, then SIGKILL
after its grace period (30 s unless the pod says otherwise). A rank that publishes live uses that time to send
its last records and end its rank run KILLED, then exits as SIGTERM would have ended it (status 143).

SIGTERM is blocked in every thread and taken by one thread of its own (sigwait): a Python signal handler
runs only when the main thread next executes bytecode, which a collective waiting on a dead peer may not
do for minutes. The mask must be set before any other thread starts, since threads inherit it; forked
children get SIGTERM back.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import Callable

from ringleader.contract import exits

# Of Kubernetes' default 30 s grace period: the rest is for the process to go before SIGKILL.
PUBLISH_SECONDS = 20.0
_requested = threading.Event()


def requested() -> bool:
    """Whether SIGTERM came: the rank's errors that follow (peers stopped too) are not its failure."""
    return _requested.is_set()


def wait_for_exit() -> None:
    """Let the SIGTERM thread publish and end the process; returns only if it did not within its time."""
    time.sleep(PUBLISH_SECONDS + 5.0)


def on_termination(action: Callable[[], None]) -> None:
    """From now on, SIGTERM runs `action` (bounded by the caller), then ends the process with status 143."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    os.register_at_fork(after_in_child=lambda: signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM}))

    def wait() -> None:
        signal.sigwait({signal.SIGTERM})
        _requested.set()
        print("SIGTERM: the pod is being stopped; publishing this rank's last records first", file=sys.stderr,
              flush=True)
        try:
            action()
        finally:
            sys.stdout.flush()
            os._exit(exits.signalled(signal.SIGTERM))

    threading.Thread(target=wait, name="sigterm", daemon=True).start()
