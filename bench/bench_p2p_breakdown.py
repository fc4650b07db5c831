"""Where a PeerToPeer step's time goes beyond its model: every message's hand-offs, the critical chain, each thread's
CPU and run-queue wait.

Runbook (from the repository root; about 1 minute on a loaded 2-core machine):

    .venv/bin/python bench/bench_p2p_breakdown.py                     # N = 2 and 4 peers, BSP, 200 Mbit/s emulated
    .venv/bin/python bench/bench_p2p_breakdown.py --workers 4 --iterations 60

Each run is one real trial, bench_ps_vs_ring.py's P2P point (mlp of ~0.47 MB at 8x8 images, batch
16), whose ranks run bench/p2p_probe_rank.py: the ordinary rank with the exchange's calls wrapped to
timestamp each message when queued, handed to gloo, seen by the receiver thread,
delivered past the emulated receiving NIC, and taken by the shard server or the worker. One clock
serves every process (CLOCK_MONOTONIC), so a step can be followed across ranks.

Printed per N:
- the model (2(N-1)/N * M/B), the slowest worker's comm + wait (bench_ps_vs_ring's measure) and
  the time from the last gradient to the last worker's new weights ("after last");
- the critical chain of each step's slowest peer p (largest synchronize time): the owner q whose
  reply reached p last, the push r -> q that completed q's round, and the time spent in each
  hand-off along r's start -> r's push -> q's round -> q's reply -> p's end; mean and median over
  steps. With no overheads the chain is the model: (N-1) slots of M/N on each side, the earlier
  slots spent queued behind the sender's other messages (on its emulated NIC's clock: the frame
  itself leaves at once, so that queueing is in "frame -> delivered");
- per thread of a rank, CPU and run-queue wait (ready to run, no core free) per step, from
  /proc/<pid>/task/*/schedstat: what a loaded machine costs the exchange's hand-offs.

Writes bench/results/p2p_breakdown.json. Not a test.
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import statistics
import sys
import tempfile

import bench_ps_vs_ring
import harness
from ringleader.models import architectures, cost_models
from ringleader.api import spec as spec_
from ringleader.contract import keys

PUSH, REPLY = 1, 4
PROBE = pathlib.Path(__file__).resolve().parent / "p2p_probe_rank.py"


def run(workers: int, args: argparse.Namespace, scratch: pathlib.Path) -> dict:
    spec = bench_ps_vs_ring.spec_for("PeerToPeer", workers, args.bandwidth, args)
    trial = harness.make_trial(spec, "bench-p2p-breakdown-0")
    from ringleader.runtime import models  # torch: only once the arguments are parsed
    model_bytes = models.parameter_bytes(models.build(trial.spec.model, trial.spec.data.synthetic))
    link = cost_models.Nic(spec_.parse_bandwidth(args.bandwidth))
    model = architectures.comm_seconds("PeerToPeer", workers, model_bytes, link)
    directory = scratch / f"n{workers}"
    probe = directory / "probe"
    probe.mkdir(parents=True)
    first = args.warmup + 1
    result = harness.run_trial(trial, directory / "trial", args.timeout,
                               extra_env={"PROBE_DIR": str(probe), "PROBE_FIRST_MEASURED": str(first)},
                               command=[sys.executable, str(PROBE)])
    ranks = {slot.rank: json.loads((probe / f"rank-{slot.rank}.json").read_text()) for slot in trial.worker_slots()}
    at = {}
    for document in ranks.values():
        for t, name, kind, sender, peer, count in document["events"]:
            at[(name, kind, sender, peer, count)] = t
    rows = [r for slot in trial.worker_slots() for r in result.iterations(slot.rank) if not r["warmup"]]
    slowest = bench_ps_vs_ring.slowest_by_step(rows, lambda r: r[keys.TIME_COMM] + r[keys.TIME_WAIT])
    after_last = bench_ps_vs_ring.after_last_gradient(trial, result)
    chain = critical_chain(at, sorted(ranks), range(first + 1, args.iterations + 1))
    measured_steps = args.iterations - first + 1
    threads = collections.defaultdict(lambda: [0.0, 0.0])
    for document in ranks.values():
        for name, (cpu, waited) in document["threads"].items():
            threads[name][0] += cpu / 1e9 / measured_steps / len(ranks)
            threads[name][1] += waited / 1e9 / measured_steps / len(ranks)
    return {"workers": workers, "modelBytes": model_bytes, "model": model,
            "slowestMedian": statistics.median(slowest.values()),
            "afterLastMedian": statistics.median(after_last) if after_last else None,
            "chain": chain, "threadsPerStep": dict(threads), "wallSeconds": result.seconds}


def critical_chain(at: dict, peers: list[int], counts: range) -> dict[str, list[float]]:
    """Per step (push count), the hand-offs of the slowest peer's critical chain, in seconds."""
    def local(p, q):
        return p == q

    chain: dict[str, list[float]] = collections.defaultdict(list)
    for c in counts:
        starts = {p: at.get(("sync_start", 0, p, p, c)) for p in peers}
        ends = {p: at.get(("sync_end", 0, p, p, c)) for p in peers}
        if None in starts.values() or None in ends.values():
            continue
        p = max(peers, key=lambda r: ends[r] - starts[r])
        # The reply that reached p last (a peer's own reply is routed at once, when queued).
        reached = {q: at.get(("queued", REPLY, q, p, c)) if local(p, q) else at.get(("delivered", REPLY, q, p, c))
                   for q in peers}
        if None in reached.values():
            continue
        q = max(peers, key=lambda o: reached[o])
        handled = {r: at.get(("handled", PUSH, r, q, c)) for r in peers}
        if None in handled.values():
            continue
        r = max(peers, key=lambda w: handled[w])  # the push that completed q's round
        parts = {"waiting for the last pusher to start": starts[r] - starts[p],
                 "pusher: start -> push queued (pack)": at[("queued", PUSH, r, q, c)] - starts[r]}
        if not local(r, q):
            parts.update(hops("push", at, PUSH, r, q, c))
            parts["server: push delivered -> taken"] = handled[r] - at[("delivered", PUSH, r, q, c)]
        else:
            parts["server: own push queued -> taken"] = handled[r] - at[("queued", PUSH, r, q, c)]
        parts["server: round complete -> reply queued"] = at[("queued", REPLY, q, p, c)] - handled[r]
        if not local(q, p):
            parts.update(hops("reply", at, REPLY, q, p, c))
        taken = max(at.get(("taken", REPLY, o, p, c), reached[q]) for o in peers)  # p reads mailboxes in owner order
        parts["worker: reply reached -> taken"] = taken - reached[q]
        parts["worker: taken -> synchronize returns (install)"] = ends[p] - taken
        total = ends[p] - starts[p]
        if abs(sum(parts.values()) - total) > 1e-6:
            raise AssertionError(f"chain of step {c} does not add up: {parts} vs {total}")
        chain["total: slowest peer's synchronize"].append(total)
        for name, seconds in parts.items():
            chain[name].append(seconds)
    return dict(chain)


def hops(what: str, at: dict, kind: int, src: int, dst: int, c: int) -> dict[str, float]:
    queued, dequeued = at[("queued", kind, src, dst, c)], at[("dequeued", kind, src, dst, c)]
    seen, delivered = at[("seen", kind, src, dst, c)], at[("delivered", kind, src, dst, c)]
    return {f"{what}: queued -> handed to gloo": dequeued - queued,
            f"{what}: handed to gloo -> receiver thread has the frame": seen - dequeued,
            f"{what}: frame -> delivered (emulated NICs, both sides)": delivered - seen}


def report(row: dict) -> None:
    model, n = row["model"], row["workers"]
    after = row["afterLastMedian"]
    print(f"\nN={n} (run queue {row['runQueue'] or 0:.1f}): model {1e3 * model:.2f} ms; "
          f"slowest comm+wait {1e3 * row['slowestMedian']:.2f} ms ({row['slowestMedian'] / model:.2f}x); "
          "after last gradient "
          + (f"{1e3 * after:.2f} ms ({after / model:.2f}x)" if after is not None else "-"))
    chain = row["chain"]
    steps = len(chain.get("total: slowest peer's synchronize", []))
    print(f"  critical chain of the slowest peer ({steps} steps), ms, mean (median); absent hops count 0:")
    for name, values in chain.items():
        values = values + [0.0] * (steps - len(values))
        print(f"    {name:62s} {1e3 * statistics.fmean(values):7.2f} ({1e3 * statistics.median(values):6.2f})")
    print(f"    {'model: 2(N-1) slots of M/N':62s} {1e3 * model:7.2f}")
    threads = sorted(row["threadsPerStep"].items(), key=lambda kv: -(kv[1][0] + kv[1][1]))
    cpu = sum(v[0] for _, v in threads)
    waited = sum(v[1] for _, v in threads)
    print(f"  per rank and step: CPU {1e3 * cpu:.2f} ms, run-queue wait {1e3 * waited:.2f} ms; by thread (cpu / wait):")
    print("    " + ", ".join(f"{name} {1e3 * c:.2f}/{1e3 * w:.2f}" for name, (c, w) in threads if c + w > 1e-4))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--workers", nargs="+", type=int, default=[2, 4], help="peer counts (default 2 4)")
    parser.add_argument("--bandwidth", default="200Mbit", help="emulated link (default 200Mbit)")
    parser.add_argument("--image-size", type=int, default=8,
                        help="synthetic image side: mlp M = 0.47 MB at 8 (default)")
    parser.add_argument("--batch", type=int, default=16, help="per-worker batch (default 16)")
    parser.add_argument("--iterations", type=int, default=40, help="iterations per trial (default 40)")
    parser.add_argument("--warmup", type=int, default=4, help="warm-up iterations left out (default 4)")
    parser.add_argument("--timeout", type=float, default=180, help="seconds allowed per trial (default 180)")
    harness.add_load_argument(parser)
    args = parser.parse_args(argv)
    if any(n < 2 for n in args.workers):
        parser.error("--workers: every count must be at least 2 (one peer sends nothing)")

    start_machine = harness.machine()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ringleader-bench-") as scratch, \
            harness.Load(args.burners, seconds=args.timeout * len(args.workers)) as load:
        for workers in args.workers:
            since = len(load.samples)
            rows.append(run(workers, args, pathlib.Path(scratch)))
            rows[-1]["runQueue"] = load.run_queue(since)
            report(rows[-1])
    result = {"benchmark": "p2p_breakdown",
              "command": "bench/bench_p2p_breakdown.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "config": vars(args), "machineStart": start_machine, "machineEnd": harness.machine(),
              "load": load.document(), "rows": rows}
    path = harness.write_result("p2p_breakdown", result)
    print(f"\nload {start_machine['loadavg1']:.1f} -> {result['machineEnd']['loadavg1']:.1f}; {load.said()}; "
          f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
