"""How a gloo receiver learns that a sender was killed: one receive per peer (link.Link's threads) or one any-source
receive.

Runbook (from the repository root; about 15 s, three processes on loopback):

    .venv/bin/python bench/probe_gloo_any_source.py

Three ranks on a gloo group of their own, as exchange/endpoint.py makes one (here with a 10 s timeout).
Ranks 1 and 2 each send rank 0 two frames; rank 2 is then killed (SIGKILL) and rank 1 sends a third frame
4 s later. Rank 0 receives them either with a thread per sender, each in `dist.recv(frame, sender)` (what
link.py does; each asks for 3 frames, one more than rank 2 sends), or with one thread in
`dist.recv(frame, src=None)` asking for 6, one more than both send. Printed per design: each frame
(the sender gloo reports, the sender written in the frame, its count) and each failure, in seconds
after the kill. Not a test: it records what this torch's gloo does.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import signal
import threading
import time

import torch
import torch.distributed as dist

import harness

TAG = 71
TIMEOUT_SECONDS = 10.0
LATE_FRAME_SECONDS = 4.0  # after the kill, rank 1's third frame


def _receive(group, source: int | None, frames: int, killed_at, log: list[str]) -> None:
    """Receive `frames` frames, or until a receive fails."""
    for _ in range(frames):
        frame = torch.zeros(2)
        try:
            sender = dist.recv(frame, src=source, group=group, tag=TAG)
        except Exception as error:  # noqa: BLE001 - what gloo raises is what this probe reports
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            log.append(f"{_since(killed_at)}  receive from {'any' if source is None else source} failed: {first}")
            return
        log.append(f"{_since(killed_at)}  frame {int(frame[1])} from rank {sender} (it says rank {int(frame[0])})")


def _since(killed_at) -> str:
    return f"{time.time() - killed_at.value:+7.2f} s" if killed_at.value else "  before kill"


def _rank(rank: int, design: str, port: int, killed_at, finished) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=3, timeout=datetime.timedelta(seconds=30))
    group = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=TIMEOUT_SECONDS))
    if rank == 0:
        log: list[str] = []
        # Ranks 1 and 2 send 3 and 2 frames: rank 2's receiver, or the any-source one, asks for one that never comes.
        sources = {1: 3, 2: 3} if design == "per peer" else {None: 6}
        threads = [threading.Thread(target=_receive, args=(group, source, frames, killed_at, log), daemon=True)
                   for source, frames in sources.items()]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(LATE_FRAME_SECONDS + 2 * TIMEOUT_SECONDS)
        print(f"{design}:\n  " + "\n  ".join(log), flush=True)
        finished.set()
        os._exit(0)  # no teardown: the group may be broken
    for count in (1, 2):
        dist.send(torch.tensor([float(rank), float(count)]), 0, group=group, tag=TAG)
    time.sleep(1.0)
    if rank == 2:
        killed_at.value = time.time()
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(LATE_FRAME_SECONDS)
    dist.send(torch.tensor([float(rank), 3.0]), 0, group=group, tag=TAG)
    finished.wait(2 * TIMEOUT_SECONDS + 10)
    os._exit(0)


def main() -> None:
    for design in ("per peer", "any source"):
        port = harness.free_port()
        killed_at, finished = multiprocessing.Value("d", 0.0), multiprocessing.Event()
        ranks = [multiprocessing.Process(target=_rank, args=(r, design, port, killed_at, finished)) for r in range(3)]
        for process in ranks:
            process.start()
        for process in ranks:
            process.join(LATE_FRAME_SECONDS + 3 * TIMEOUT_SECONDS + 30)
            if process.is_alive():
                process.kill()


if __name__ == "__main__":
    main()
