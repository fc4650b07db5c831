"""Where a rank, or its pod's agent, leaves the pod's termination message: the trial summary or a failure line.

The kubelet keeps what a container wrote to /dev/termination-log (4 KiB of it) in the pod's status, where the
operator reads it (controller/pods.py). A pod of several ranks has one such file for all of them, so its agent
(runtime/agent.py) gives each rank a file of its own (contract.TERMINATION_FILE) and writes the pod's from theirs.
Torch-free: the agent imports it.
"""

from __future__ import annotations

import os

TERMINATION_LOG = "/dev/termination-log"
"""Where this process leaves its message: the pod's, unless `leave_in` named the file its pod's agent gave it."""
CHARACTERS = 4000  # the kubelet keeps 4 KiB of it


def leave_in(path: str | None) -> None:
    """From now on, write this process's message to `path` (its agent's file for it); None keeps the pod's own."""
    global TERMINATION_LOG
    if path:
        TERMINATION_LOG = path


def write(text: str) -> None:
    """The message, where there is one to write (a pod's file, or one its agent made): every rank the runtime ends
    leaves one, so a pod that exits 0 without it ended outside the runtime (os._exit in user code), which the
    operator blames."""
    if os.path.exists(TERMINATION_LOG) and os.access(TERMINATION_LOG, os.W_OK):
        with open(TERMINATION_LOG, "w", encoding="utf-8") as file:
            file.write(text[:CHARACTERS])
