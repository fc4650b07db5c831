"""The PeerToPeer BSP schedule in simulation: what its protocol alone costs against the model, with no thread or CPU in
the way.

Runbook (from the repository root; a few seconds, no torch, no trial):

    .venv/bin/python bench/bench_p2p_schedule.py
    .venv/bin/python bench/bench_p2p_schedule.py --workers 4 --skew-ms 2 --owner-ms 2 --install-ms 1.4

An event simulation of runtime/exchange as it is: each peer's sending NIC a FIFO clock shared by its
worker's pushes and its shard server's replies (nic.EmulatedNic.send); each receiving NIC serving one
message at a time, in the order their sending turns began (nic.EmulatedNic.receive), or, with the variant
"replies first", a waiting reply before waiting pushes (non-preemptive); pushes and replies in
schedule.py's rotated orders, a peer's own shard local; an owner answers everyone once its round's N
pushes are in (BSP). A step's compute is --compute-ms plus an exponential skew of mean --skew-ms per
worker; --pack-ms before the first push, --owner-ms between an owner's last push delivered and its
replies sent (update and packing), --install-ms between a worker's last reply and its step's end.

Printed per setting, median over steps and seeds: "slowest" (the largest sync time of a step, what
bench_ps_vs_ring.py's "slowest" divides by the model) and "after last" (from the last worker's start
to the last worker's end), each over the model 2(N-1)/N * M/B. Not a test.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import random
import statistics


def simulate(workers: int, slot: float, *, steps: int, compute: float, skew: float, pack: float, owner: float,
             install: float, replies_first: bool, seed: int) -> tuple[list[float], list[float]]:
    """Per step after the first four: the slowest worker's sync time and the time after the last start, in ms."""
    rng = random.Random(seed)
    events: list = []
    order = itertools.count()

    def at(t, action, *args):
        heapq.heappush(events, (t, next(order), action, args))

    egress_free = [0.0] * workers
    ingress_busy = [False] * workers
    waiting: list[list[tuple]] = [[] for _ in range(workers)]  # (class, sending start, kind, sender)
    pushes, replies, steps_done = [0] * workers, [0] * workers, [0] * workers
    started = [0.0] * workers
    record: dict[int, list[tuple[float, float]]] = {}

    def send(t, sender, destination, kind):
        turn = max(t, egress_free[sender])
        egress_free[sender] = turn + slot
        at(turn, arrive, destination, kind, sender, turn)

    def arrive(t, destination, kind, sender, turn):
        waiting[destination].append((0 if replies_first and kind == "reply" else 1, turn, kind, sender))
        serve(t, destination)

    def serve(t, destination):
        if ingress_busy[destination] or not waiting[destination]:
            return
        message = min(m for m in waiting[destination] if m[1] <= t)
        waiting[destination].remove(message)
        ingress_busy[destination] = True
        at(t + slot, delivered, destination, message)

    def delivered(t, destination, message):
        ingress_busy[destination] = False
        handle(t, destination, message[2])
        serve(t, destination)

    def handle(t, rank, kind):
        if kind == "push":
            pushes[rank] += 1
            if pushes[rank] == workers:
                pushes[rank] = 0
                at(t + owner, answer, rank)
        else:
            replies[rank] += 1
            if replies[rank] == workers:
                replies[rank] = 0
                at(t + install, end, rank)

    def answer(t, rank):
        for k in range(1, workers):  # schedule.reply_order: just past itself, its own worker last (local)
            send(t, rank, (rank + k) % workers, "reply")
        handle(t, rank, "reply")

    def end(t, rank):
        record.setdefault(steps_done[rank], []).append((started[rank], t))
        steps_done[rank] += 1
        if steps_done[rank] < steps:
            at(t + compute + (rng.expovariate(1 / skew) if skew else 0.0), begin, rank)

    def begin(t, rank):
        started[rank] = t
        for k in range(1, workers):  # schedule.push_order: just past itself, its own shard last (local)
            send(t + pack, rank, (rank + k) % workers, "push")
        handle(t, rank, "push")

    for rank in range(workers):
        at(rng.expovariate(1 / skew) if skew else 0.0, begin, rank)
    while events:
        t, _, action, args = heapq.heappop(events)
        action(t, *args)
    measured = [v for step, v in sorted(record.items()) if step >= 4]
    return ([max(e - s for s, e in v) for v in measured],
            [max(e for _, e in v) - max(s for s, _ in v) for v in measured])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--workers", nargs="+", type=int, default=[2, 4], help="peer counts (default 2 4)")
    parser.add_argument("--m-over-b-ms", type=float, default=18.84,
                        help="the model's bytes over the link's rate, ms "
                             "(default 18.84: bench_ps_vs_ring's mlp at 200 Mbit/s)")
    parser.add_argument("--compute-ms", type=float, default=1.9, help="a step's compute (default 1.9, as measured)")
    parser.add_argument("--skew-ms", nargs="+", type=float, default=[0.0, 1.0, 2.0, 4.0],
                        help="mean exponential compute skew per worker and step (default 0 1 2 4)")
    parser.add_argument("--pack-ms", type=float, default=0.0, help="before a worker's first push (default 0)")
    parser.add_argument("--owner-ms", type=float, default=0.0, help="an owner's update and packing (default 0)")
    parser.add_argument("--install-ms", type=float, default=0.0,
                        help="a worker's install after its last reply (default 0)")
    parser.add_argument("--steps", type=int, default=60, help="steps per run (default 60; the first 4 left out)")
    parser.add_argument("--seeds", type=int, default=20, help="runs per setting (default 20)")
    args = parser.parse_args(argv)
    print(f"{'N':>2} {'skew ms':>7} {'receiving NIC':>14} {'slowest/model':>14} {'after last/model':>17}")
    for workers in args.workers:
        slot = args.m_over_b_ms / workers
        model = 2 * (workers - 1) * slot
        for skew in args.skew_ms:
            for replies_first in (False, True):
                slowest, after = [], []
                for seed in range(args.seeds):
                    s, a = simulate(workers, slot, steps=args.steps, compute=args.compute_ms, skew=skew,
                                    pack=args.pack_ms, owner=args.owner_ms, install=args.install_ms,
                                    replies_first=replies_first, seed=seed)
                    slowest += s
                    after += a
                print(f"{workers:>2} {skew:>7.1f} {'replies first' if replies_first else 'by start':>14} "
                      f"{statistics.median(slowest) / model:>14.3f} {statistics.median(after) / model:>17.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
