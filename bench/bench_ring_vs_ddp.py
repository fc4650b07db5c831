"""Throughput of ringleader's RingAllReduce (BSP) against PyTorch DDP on the same model, data and ranks.

Runbook (from the repository root; about 3 minutes on a loaded 2-core machine):

    .venv/bin/python bench/bench_ring_vs_ddp.py                     # 3 interleaved pairs, mlp 3.4 MB, 2 workers
    .venv/bin/python bench/bench_ring_vs_ddp.py --pairs 6 --iterations 200 --warmup 20   # as in docs/performance.md
    # several buckets (resnet18, 44.7 MB; about 10 minutes): 6 pairs, then 120 alternating steps with the breakdown
    .venv/bin/python bench/bench_ring_vs_ddp.py --model resnet18 --image-size 16 --batch 8 --iterations 40 --warmup 5 \
        --pairs 6 --alternating-iterations 120
    # resnet50 (94 MB), 2 and 4 workers, pairs only
    .venv/bin/python bench/bench_ring_vs_ddp.py --model resnet50 --image-size 16 --batch 8 --iterations 20 --warmup 3 \
        --pairs 2 --alternating-iterations 0 --workers 4

Each pair runs both variants back to back, in alternating order (ring first in even pairs, DDP
first in odd ones) so that a drift in the machine's load hits both alike:
  ring  real ringleader ranks (`python -m ringleader.runtime` with the pod contract, gloo on loopback)
  ddp   bench/ddp_worker.py: the same trial file, trained by torch DistributedDataParallel over gloo
Throughput (samples/s) of each is computed the same way from per-iteration times after warm-up
(sum over workers of batch * iterations / seconds, as models/summary.py does); the result is the
ratio ringleader/DDP per pair, reported as median, min and max. Target: median >= 1.0. The same
ratio from each worker's median iteration is reported beside it (a load spike inflates a run's
mean more than its median).

Then one alternating run (bench/alternating_worker.py): in the same two rank processes, one iteration
of ringleader's ring path (its timer, hooks, RingSynchronizer and recorder, as worker.py calls them)
and one of DDP, on two identical models, alternate step by step; per step, DDP's seconds / ring's is
the throughput ratio, reported as the median over steps and min/max over chunks of steps. It does not
start ranks through `python -m ringleader.runtime`, but a load spike hits both alike, which separate
runs on a shared machine cannot promise: its spread is the tighter one. It also says where the time
goes: each variant's forward, backward (DDP's includes waiting for its last buckets), exposed
communication (the ring's wait after backward, time/comm + time/wait) and update, medians in ms.

Before/after a change to the ring, run the same command from a `git archive` of the old tree in /tmp
and from the new one, alternately, in the same session: the machine's load moves more than the ring.
Writes bench/results/ring_vs_ddp.json and prints a table. Not a test: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile

import harness


def spec_for(args: argparse.Namespace) -> dict:
    return {
        "architecture": "RingAllReduce",
        "workers": {"replicas": args.workers, "resources": {"cpu": str(args.threads)}},
        "model": {"name": args.model, "batchSize": args.batch, "iterations": args.iterations,
                  "warmupIterations": args.warmup, "optimizer": {"learningRate": 0.01}},
        "data": {"synthetic": {"samples": 4096, "imageSize": args.image_size, "numClasses": 10}},
    }


def throughput(per_rank_seconds: list[list[float]], batch_size: int) -> float:
    """Samples per second over all workers: each worker's batch * iterations / its seconds, summed."""
    return sum(batch_size * len(seconds) / sum(seconds) for seconds in per_rank_seconds if seconds)


def median_throughput(per_rank_seconds: list[list[float]], batch_size: int) -> float:
    """The same from each worker's median iteration: robust to the load spikes of a shared machine."""
    return sum(batch_size / statistics.median(seconds) for seconds in per_rank_seconds if seconds)


def rates(per_rank_seconds: list[list[float]], batch_size: int) -> dict:
    return {"throughput": throughput(per_rank_seconds, batch_size),
            "medianThroughput": median_throughput(per_rank_seconds, batch_size)}


def run_ring(trial, directory: pathlib.Path, timeout: float) -> dict:
    result = harness.run_trial(trial, directory, timeout)
    per_rank = [[r["time/iteration"] for r in result.iterations(slot.rank) if not r["warmup"]]
                for slot in trial.worker_slots()]
    summary = result.summary()
    return {**rates(per_rank, trial.spec.model.batch_size), "wallSeconds": result.seconds,
            "commFraction": summary.get("commFraction"), "summaryThroughput": summary.get("throughput")}


def run_ddp(trial, directory: pathlib.Path, timeout: float) -> dict:
    result = harness.run_trial(trial, directory, timeout,
                               command=[sys.executable, str(harness.REPOSITORY / "bench" / "ddp_worker.py")])
    output, seconds = result.output_dir, result.seconds
    warmup = trial.spec.model.warmup_iterations
    per_rank = [json.loads((output / f"ddp-rank-{rank}.json").read_text())["iterationSeconds"][warmup:]
                for rank in range(trial.world_size)]
    return {**rates(per_rank, trial.spec.model.batch_size), "wallSeconds": seconds}


def run_alternating(trial, directory: pathlib.Path, timeout: float, chunks: int) -> dict:
    """bench/alternating_worker.py on every rank: per step, DDP's seconds / ring's (summed over ranks) is the
    throughput ratio ring/DDP of that step; the median over steps, overall and per chunk of steps."""
    result = harness.run_trial(trial, directory, timeout,
                               command=[sys.executable, str(harness.REPOSITORY / "bench" / "alternating_worker.py")])
    output, seconds = result.output_dir, result.seconds
    warmup = trial.spec.model.warmup_iterations
    ranks = [json.loads((output / f"alternating-rank-{rank}.json").read_text()) for rank in range(trial.world_size)]
    ring_steps = [sum(values) for values in zip(*(r["ring"][warmup:] for r in ranks))]
    ddp_steps = [sum(values) for values in zip(*(r["ddp"][warmup:] for r in ranks))]
    ratios = [d / r for r, d in zip(ring_steps, ddp_steps)]
    size = max(1, len(ratios) // chunks)
    by_chunk = [statistics.median(ratios[first:first + size]) for first in range(0, len(ratios) - size + 1, size)]
    # Where the time goes: each phase's median over the measured steps, averaged over the ranks, in ms.
    breakdown = {variant: {phase: 1e3 * statistics.mean(statistics.median(r["phases"][variant][phase][warmup:])
                                                        for r in ranks)
                           for phase in ranks[0]["phases"][variant]}
                 for variant in ("ring", "ddp")}
    return {"ratio": statistics.median(ratios), "chunks": harness.spread(by_chunk), "steps": len(ratios),
            "ringMilliseconds": 1e3 * statistics.median(ring_steps) / len(ranks),
            "ddpMilliseconds": 1e3 * statistics.median(ddp_steps) / len(ranks), "breakdownMilliseconds": breakdown,
            "wallSeconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3, help="interleaved (ring, ddp) pairs (default 3)")
    parser.add_argument("--workers", type=int, default=2, help="worker ranks (default 2)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per rank, both variants (default 1)")
    parser.add_argument("--model", default="mlp", help="built-in model (default mlp: 3.4 MB at 32x32)")
    parser.add_argument("--image-size", type=int, default=32, help="synthetic image side (default 32)")
    parser.add_argument("--batch", type=int, default=32, help="per-worker batch (default 32)")
    parser.add_argument("--iterations", type=int, default=300, help="iterations per run (default 300)")
    parser.add_argument("--warmup", type=int, default=30, help="warm-up iterations left out (default 30)")
    parser.add_argument("--timeout", type=float, default=240, help="seconds allowed per run (default 240)")
    parser.add_argument("--alternating-iterations", type=int, default=600,
                        help="iterations of each kind in the alternating run; 0 skips it (default 600)")
    parser.add_argument("--chunks", type=int, default=10, help="chunks of the alternating run's steps (default 10)")
    args = parser.parse_args(argv)

    trial = harness.make_trial(spec_for(args), "bench-ring-0")
    model_bytes = _model_bytes(trial)
    pairs = []
    start_machine = harness.machine()
    with tempfile.TemporaryDirectory(prefix="ringleader-bench-") as scratch:
        for pair in range(args.pairs):
            order = ("ring", "ddp") if pair % 2 == 0 else ("ddp", "ring")
            measured = {}
            for variant in order:
                directory = pathlib.Path(scratch) / f"{pair}-{variant}"
                run = run_ring if variant == "ring" else run_ddp
                measured[variant] = run(trial, directory, args.timeout)
            measured["ratio"] = measured["ring"]["throughput"] / measured["ddp"]["throughput"]
            measured["medianRatio"] = measured["ring"]["medianThroughput"] / measured["ddp"]["medianThroughput"]
            measured["order"] = list(order)
            pairs.append(measured)
            print(f"pair {pair} ({' then '.join(order)}): ring {measured['ring']['throughput']:.0f} samples/s, "
                  f"ddp {measured['ddp']['throughput']:.0f} samples/s, ratio {measured['ratio']:.3f} "
                  f"(from median iterations {measured['medianRatio']:.3f})", flush=True)

        alternating = None
        if args.alternating_iterations:
            alternating_trial = harness.make_trial(
                spec_for(argparse.Namespace(**{**vars(args), "iterations": args.alternating_iterations})),
                "bench-alt-0")
            alternating = run_alternating(alternating_trial, pathlib.Path(scratch) / "alternating", 2 * args.timeout,
                                          args.chunks)
            print(f"alternating: ring {alternating['ringMilliseconds']:.2f} ms, "
                  f"ddp {alternating['ddpMilliseconds']:.2f} ms "
                  f"per iteration (medians), ratio {alternating['ratio']:.3f}", flush=True)
            for variant, phases in alternating["breakdownMilliseconds"].items():
                print(f"  {variant} phases (median ms): "
                      + ", ".join(f"{phase} {ms:.2f}" for phase, ms in phases.items()), flush=True)

    ratio = harness.spread([p["ratio"] for p in pairs])
    median_ratio = harness.spread([p["medianRatio"] for p in pairs])
    result = {
        "benchmark": "ring_vs_ddp",
        "command": "bench/bench_ring_vs_ddp.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "config": {**vars(args), "modelBytes": model_bytes},
        "machineStart": start_machine, "machineEnd": harness.machine(),
        "pairs": pairs,
        "ratio": ratio,
        "medianIterationRatio": median_ratio,
        "ringThroughput": harness.spread([p["ring"]["throughput"] for p in pairs]),
        "ddpThroughput": harness.spread([p["ddp"]["throughput"] for p in pairs]),
        "alternating": alternating,
        "target": ">= 1.0",
    }
    path = harness.write_result("ring_vs_ddp", result)
    print(f"\n{'':24}{'median':>10}{'min':>10}{'max':>10}")
    if pairs:
        print(f"{'ring samples/s':24}"
              + "".join(f"{result['ringThroughput'][k]:>10.0f}" for k in ("median", "min", "max")))
        print(f"{'ddp samples/s':24}"
              + "".join(f"{result['ddpThroughput'][k]:>10.0f}" for k in ("median", "min", "max")))
        print(f"{'ratio ring/ddp':24}" + "".join(f"{ratio[k]:>10.3f}" for k in ("median", "min", "max")))
        print(f"{'ratio, median iteration':24}"
              + "".join(f"{median_ratio[k]:>10.3f}" for k in ("median", "min", "max")))
    if alternating:
        print(f"{'ratio, alternating':24}{alternating['ratio']:>10.3f}"
              + "".join(f"{alternating['chunks'][k]:>10.3f}" for k in ("min", "max")) + "   (min/max over chunks)")
    print(f"model {trial.spec.model.name} {model_bytes / 1e6:.2f} MB, {args.workers} workers, "
          f"load {start_machine['loadavg1']:.1f} -> {result['machineEnd']['loadavg1']:.1f}; wrote {path}")
    return 0


def _model_bytes(trial) -> int:
    from ringleader.runtime import models  # torch: only once the arguments are parsed

    return models.parameter_bytes(models.build(trial.spec.model, trial.spec.data.synthetic))


if __name__ == "__main__":
    sys.exit(main())
