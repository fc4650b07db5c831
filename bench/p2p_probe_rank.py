"""One rank of a PeerToPeer trial with a timestamp at every hand-off of every message; run by bench_p2p_breakdown.py.

It runs the ordinary rank (`ringleader.runtime.main`) with the exchange's calls wrapped, not copied,
so it measures whatever the tree on PYTHONPATH does. Timestamps are time.perf_counter(), which on
Linux is CLOCK_MONOTONIC, one clock for every process of the machine, so events of different ranks
compare directly. Writes $PROBE_DIR/rank-<rank>.json: events, and the run-queue waits and CPU time of
each of the rank's threads (/proc/self/task/*/schedstat) over the measured steps.

Events, as (time, name, kind, sender, peer, count): `queued` (Link.send), `dequeued` (the frame is
handed to gloo), `seen` (a receiver thread has the frame), `delivered` (the server or
worker, awake after the emulated receiving NIC's turn, has it), `handled` (the shard server takes it), `taken`
(the worker takes a reply), `sync_start` and `sync_end` (Client.synchronize).
"""

import json
import os
import sys
import threading
import time

import torch

from ringleader.runtime import main
from ringleader.runtime.exchange import client as clients
from ringleader.runtime.exchange import link as links
from ringleader.runtime.exchange import server as servers
from ringleader.runtime.exchange import wire

RANK = int(os.environ["RANK"])
PROBE_DIR = os.environ["PROBE_DIR"]
FIRST_MEASURED = int(os.environ["PROBE_FIRST_MEASURED"])  # the push count where the thread accounting starts
EVENTS: list[tuple] = []
_thread = threading.local()


def event(name: str, kind: int, sender: int, peer: int, count: int) -> None:
    EVENTS.append((time.perf_counter(), name, int(kind), int(sender), int(peer), int(count)))


def wrap_send(original):
    def send(self, destination, message):
        event("queued", message.kind, message.sender, destination, message.count)
        original(self, destination, message)
    return send


class TimedDist:
    """torch.distributed as link.py sees it: each frame's send and receive is an event (its header names the
    message)."""

    def __init__(self, real):
        self.real = real

    def __getattr__(self, name):
        return getattr(self.real, name)

    def isend(self, tensor, dst, group=None, tag=0):
        if tag == links.TAG_FRAME:
            kind, sender, count = header(tensor)
            event("dequeued", kind, sender, dst, count)
        return self.real.isend(tensor, dst, group=group, tag=tag)

    def recv(self, tensor, src, group=None, tag=0):
        result = self.real.recv(tensor, src, group=group, tag=tag)
        if tag == links.TAG_FRAME:
            kind, sender, count = header(tensor)
            event("seen", kind, sender, RANK, count)
        return result


def header(frame) -> tuple[int, int, int]:
    """A frame's kind, sender and count (wire.py's first three header fields)."""
    kind, sender, count = frame[:wire.HEADER_BYTES].view(torch.float64)[:3].tolist()
    return int(kind), int(sender), int(count)


def wrap_get(original):
    def get(self, timeout):
        message = original(self, timeout)
        if message.sender != RANK and message.kind in (wire.MessageKind.PUSH, wire.MessageKind.REPLY):
            EVENTS.append((message.received_at, "delivered", int(message.kind), message.sender, RANK, message.count))
        return message
    return get


def wrap_handle(original):
    def handle(self, message):
        event("handled", message.kind, message.sender, RANK, message.count)
        return original(self, message)
    return handle


def wrap_wait(original):
    def wait(mailbox, timeout_seconds, what):
        message = original(mailbox, timeout_seconds, what)
        event("taken", message.kind, message.sender, RANK, message.count)
        return message
    return wait


def threads_now() -> dict[str, tuple[int, int]]:
    """Per thread of this process (its Python name, or the OS's for native threads): (CPU ns, run-queue wait ns)."""
    names = {str(t.native_id): t.name for t in threading.enumerate()}
    found: dict[str, tuple[int, int]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                cpu, waited, _ = (int(x) for x in f.read().split())
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = names.get(tid) or f"{f.read().strip()} (native)"
        except OSError:
            continue
        total = found.get(name, (0, 0))
        found[name] = (total[0] + cpu, total[1] + waited)
    return found


SNAPSHOTS: dict[str, tuple[float, dict]] = {}


def wrap_synchronize(original):
    def synchronize(self, step, timer):
        if step + 1 == FIRST_MEASURED:
            SNAPSHOTS["first"] = (time.perf_counter(), threads_now())
        event("sync_start", 0, RANK, RANK, step + 1)
        original(self, step, timer)
        event("sync_end", 0, RANK, RANK, step + 1)
        if step + 1 == self.iterations:
            SNAPSHOTS["last"] = (time.perf_counter(), threads_now())
    return synchronize


links.Link.send = wrap_send(links.Link.send)
links.dist = TimedDist(links.dist)
links.Delivery.get = wrap_get(links.Delivery.get)
links.wait = wrap_wait(links.wait)
servers.ShardServer.handle = wrap_handle(servers.ShardServer.handle)
clients.Client.synchronize = wrap_synchronize(clients.Client.synchronize)

try:
    code = main.main()
except SystemExit as exit_:
    code = exit_.code if isinstance(exit_.code, int) else 1
threads = {}
if "first" in SNAPSHOTS and "last" in SNAPSHOTS:
    (_, before), (_, after) = SNAPSHOTS["first"], SNAPSHOTS["last"]
    threads = {name: [cpu - before.get(name, (0, 0))[0], waited - before.get(name, (0, 0))[1]]
               for name, (cpu, waited) in after.items()}
with open(os.path.join(PROBE_DIR, f"rank-{RANK}.json"), "w") as f:
    json.dump({"events": EVENTS, "threads": threads}, f)
sys.stdout.flush()
os._exit(code)  # as `python -m ringleader.runtime` does: no interpreter finalization under live daemon threads
