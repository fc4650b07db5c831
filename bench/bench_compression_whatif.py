"""Accuracy of `ringleader whatif` at a compressed trial's measured ratio: SF measured against SF modelled, per method.

Runbook (from the repository root; 2 to 4 minutes on a loaded 2-core machine):

    .venv/bin/python bench/bench_compression_whatif.py                          # 10 and 100 Mbit/s, five methods
    .venv/bin/python bench/bench_compression_whatif.py --methods None FP16 PowerSGD --links 10Mbit
    .venv/bin/python bench/bench_compression_whatif.py --rescore /tmp/x/runs     # score a kept run again

It runs one experiment with `ringleader run`: a 2-worker ring (BSP) of the small convnet, 30 iterations
(5 of warm-up), on the runtime's emulated link at each of `--links`, once per compression method. Then,
for each trial, the what-if model (models/whatif.py) from the trial's own worker rank, the one
`ringleader whatif TRIAL` takes, at the trial's own bandwidth and its measured compression (ratio,
rounds, codec time; whatif.basis), against the SF the trial measured in the same terms:

    SF measured  = t_batch / median iteration       (whatif.measured_scaling_factor)
    SF what-if   = t_batch / (t_batch + overhead)    (whatif.simulate)
    |error|      = |SF what-if / SF measured - 1|

It prints one row per trial (link, method, ratio, the model's overhead terms, both SFs, |error|) and
the worst |error|; the target is 10 %. Results, with the load average before and after, go to
bench/results/compression_whatif.json. Not a test: nothing asserts.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
import time

import harness
from ringleader.models import profile as profile_
from ringleader.models import whatif
from ringleader.tracking import reading

TARGET = 0.10
METHODS = ("None", "FP16", "BF16", "PowerSGD", "TopK")


def experiment(args: argparse.Namespace) -> dict:
    """The experiment file: every link x method, a 2-worker ring of the convnet."""
    return {"apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment",
            "metadata": {"name": "compression-whatif"},
            "spec": {"architecture": "RingAllReduce", "sync": {"paradigm": "BSP"}, "workers": {"replicas": 2},
                     "model": {"name": args.model, "batchSize": args.batch_size, "iterations": args.iterations,
                               "warmupIterations": args.warmup},
                     "sweep": {"matrix": {"bandwidth": list(args.links), "compression": list(args.methods)}}}}


def score(run: pathlib.Path) -> list[dict]:
    """One row per finished trial of the run: the model at its own link and measured compression, and what the
    trial measured."""
    rows = []
    for trial in reading.from_directory(run).trials:
        if trial.status != "FINISHED":
            print(f"{trial.trial.name}: {trial.status} ({trial.message}), left out", file=sys.stderr)
            continue
        rank = profile_.worker_rank(trial)
        basis = whatif.basis(trial, rank)
        bandwidth = trial.trial.spec.network.bits_per_second()
        model = whatif.simulate(basis.profile, basis.workers, bandwidth, basis.wire or 1.0,
                                batch_seconds=basis.batch_seconds, bucketing=basis.bucketing, floor=basis.floor,
                                wait_seconds=basis.wait_seconds)
        measured = whatif.measured_scaling_factor(trial.records[rank])
        rows.append({"trial": trial.trial.name, "link": trial.trial.spec.network.bandwidth,
                     "method": trial.trial.spec.compression.method.value, "ratio": model.compression,
                     "rounds": len(basis.wire.rounds) if basis.wire else 1, "buckets": len(model.buckets),
                     "batchSeconds": basis.batch_seconds, "exposedSeconds": model.replay.exposed_seconds,
                     "laterSeconds": model.later_seconds, "codecSeconds": model.codec_seconds,
                     "waitSeconds": model.wait_seconds, "measured": measured, "whatif": model.scaling_factor,
                     "absError": abs(model.scaling_factor / measured - 1.0)})
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"{'link':<8} {'method':<9} {'ratio':>6} {'t_batch':>8} {'exposed':>8} {'later':>6} {'codec':>6} "
          f"{'wait':>6} {'SF meas.':>8} {'SF model':>8} {'|err|':>6}")
    for r in rows:
        print(f"{r['link']:<8} {r['method']:<9} {r['ratio']:>6.2f} "
              + " ".join(f"{1000 * r[key]:>{width}.1f}" for key, width in (
                  ("batchSeconds", 8), ("exposedSeconds", 8), ("laterSeconds", 6), ("codecSeconds", 6),
                  ("waitSeconds", 6)))
              + f" {r['measured']:>8.3f} {r['whatif']:>8.3f} {100 * r['absError']:>5.1f}%")
    print("(milliseconds per iteration: t_batch, and the model's overhead terms: first rounds exposed after backward, "
          "later rounds, codec, wait)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--links", nargs="+", default=["10Mbit", "100Mbit"],
                        help="emulated links (spec.network.bandwidth) (default: %(default)s)")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS,
                        help="compression methods (default: all)")
    parser.add_argument("--iterations", type=int, default=30, help="iterations per trial (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up iterations (default %(default)s)")
    parser.add_argument("--model", default="cnn", help="built-in model (default %(default)s: 0.5 MB of gradients)")
    parser.add_argument("--batch-size", type=int, default=32, help="per-worker batch (default %(default)s)")
    parser.add_argument("--trial-timeout", type=int, default=120,
                        help="seconds one trial may take (default %(default)s)")
    parser.add_argument("--rescore", type=pathlib.Path, metavar="RUN",
                        help="score this `ringleader run` directory again instead of running new trials")
    parser.add_argument("--keep", type=pathlib.Path, metavar="DIR",
                        help="run into DIR and keep it (default: a temporary directory, removed)")
    args = parser.parse_args()

    load_before, started = os.getloadavg(), time.monotonic()
    if args.rescore:
        run = reading.session_directory(args.rescore)[0]
        rows = score(run)
    else:
        with tempfile.TemporaryDirectory(prefix="bench-compression-") as temporary:
            print(f"running {len(args.links) * len(args.methods)} trials", flush=True)
            run = harness.run_experiment(experiment(args), args.keep or pathlib.Path(temporary), args.trial_timeout,
                                         len(args.links) * len(args.methods))
            rows = score(run)
    load_after = os.getloadavg()

    print()
    print_table(rows)
    if rows:
        worst = max(rows, key=lambda r: r["absError"])
        print(f"worst |error| {100 * worst['absError']:.1f}% ({worst['link']}, {worst['method']}): "
              f"{'within' if worst['absError'] <= TARGET else 'MISSED'} the {100 * TARGET:.0f}% target")
    print(f"load average (1, 5, 15 min): before {' '.join(f'{x:.2f}' for x in load_before)}, "
          f"after {' '.join(f'{x:.2f}' for x in load_after)}; {time.monotonic() - started:.0f} s")
    document = {"machine": harness.machine(), "loadBefore": load_before, "loadAfter": load_after,
                "arguments": {k: (str(v) if isinstance(v, pathlib.Path) else v) for k, v in vars(args).items()},
                "run": str(run), "rows": rows}
    print(f"results: {harness.write_result('compression_whatif', document)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
