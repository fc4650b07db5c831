"""Study 1's shape: communication time per iteration of 1PS, P2P and ring allreduce as workers grow, beside the models.

Runbook (from the repository root; about 6 minutes on a loaded 2-core machine):

    .venv/bin/python bench/bench_ps_vs_ring.py                          # 1, 2, 4 workers; 200Mbit emulated and unshaped
    .venv/bin/python bench/bench_ps_vs_ring.py --bandwidths 200Mbit     # the emulated link only (about 2 minutes)
    .venv/bin/python bench/bench_ps_vs_ring.py --architectures ParameterServer RingAllReduce --workers 1 2 4 8
    .venv/bin/python bench/bench_ps_vs_ring.py --bandwidths 200Mbit --architectures PeerToPeer --workers 2 4
                                                                       # P2P against its model
    .venv/bin/python bench/bench_ps_vs_ring.py --bandwidths 200Mbit --architectures PeerToPeer --workers 2 4 \
        --iterations 30 --burners 5                                    # the same under load; where the rest goes:
    .venv/bin/python bench/bench_p2p_breakdown.py                      # (about 1 minute)

For every bandwidth x architecture x workers it runs one real trial (BSP, an mlp of ~0.47 MB at 8x8
images, one parameter server for ParameterServer) and reads time/comm and time/wait from the ranks'
iterations.jsonl (mean over workers and iterations after warm-up). Beside each it prints the
prediction of models/cost_models.py at the emulated bandwidth with zero latency:
    1PS 2*N*M/B    P2P 2*(N-1)*M/(N*B)    RA 2*(N-1)/N*M/B
The comparable measurement is comm + wait: under BSP a worker's push that reached the server early is
held (time/wait) until the others' pushes have crossed the server's NIC, which is the congestion the
model charges to communication. The models price the LAST worker served (a server's replies leave
one after another), so "slowest" (per step, the largest comm + wait among workers; the median over
steps, as a shared machine's load spikes make means jumpy; the mean is in the JSON) is what
meas/model divides; the mean worker's comm and wait are printed too. The ring's time/wait is its wait for
the last rank's backward, its time/comm the part of the allreduce after that not hidden behind backward
(all of it here: one 0.47 MB bucket, launched when backward ends). Each worker's bytes sent per
iteration are printed too (least-most), to show how evenly traffic is spread.

"slowest" also counts compute skew: a worker whose backward ended early waits, under BSP, for the last
one's gradient, and that wait is in its comm + wait (P2P carries a skew into the next step; the ring's
emulation hid it until its last bucket was carried from the last rank's launch: docs/performance.md,
section 3). "after last" (per traced step, from the end of the last worker's backward to the last
worker's new weights, from the ranks' Chrome traces, less time/update; median) leaves the skew out: it is what the
models price, which start every worker together. "spread" is that skew (first to last end of backward, median).

"/pred" judges the same trial against the product's own model: the slowest worker's time/iteration (per step, the
largest among workers; the median over steps) over what `ringleader predict` says for the trial's own architecture
(models/prediction.predict_trial on the trial's records, layers.json and link probe: the slowest worker's compute
per iteration, which holds BSP's compute skew and the loop's own work, plus the comm model on the probed link).

`--burners K` runs K CPU burners through the measurement (harness.Load), so that the load is a setting; "runq" is
the run queue measured meanwhile (runnable tasks, the ranks' and the burners' included, mean over the trial). P2P at
4 peers, 200Mbit: K=5 put it at 10-12 with the machine's other work (docs/performance.md, section 3), the issue's
"load 7-12"; the 1-minute load average lags a 30-second trial.

"unshaped" runs on raw loopback: there is no link to model, so only trends are compared (each
architecture's slowest comm+wait at N divided by its value at N=2, beside the model's ratio). With N+1
processes on 2 cores, N >= 2 is oversubscribed: every message also waits for a core, which inflates
the absolute numbers and favours fewer processes; with the emulated link, sleeps dominate and the
cores matter less. Writes bench/results/ps_vs_ring.json and prints a table. Not a test.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import tempfile

import harness
from ringleader.models import architectures, cost_models
from ringleader.api import spec as spec_
from ringleader.contract import keys, records

UNSHAPED = "unshaped"


def spec_for(architecture: str, workers: int, bandwidth: str, args: argparse.Namespace) -> dict:
    spec = {
        "architecture": architecture,
        "sync": {"paradigm": "BSP"},
        "workers": {"replicas": workers},
        "model": {"name": "mlp", "batchSize": args.batch, "iterations": args.iterations,
                  "warmupIterations": args.warmup},
        "data": {"synthetic": {"samples": 1024, "imageSize": args.image_size, "numClasses": 10}},
    }
    if architecture == "ParameterServer":
        spec["parameterServers"] = {"replicas": 1}
    if bandwidth != UNSHAPED:
        spec["network"] = {"bandwidth": bandwidth}
    return spec


def measure(trial, directory: pathlib.Path, timeout: float) -> dict:
    result = harness.run_trial(trial, directory, timeout)
    rows = [r for slot in trial.worker_slots() for r in result.iterations(slot.rank) if not r["warmup"]]

    def mean(key: str) -> float:
        return statistics.fmean((r.get(key) or 0.0) for r in rows)

    compute = statistics.fmean(sum(r.get(k) or 0.0 for k in keys.COMPUTE_PHASES) for r in rows)
    # The slowest worker of each step: a BSP server answers its workers one after another, so the mean
    # worker waits less than the last one, and the models price the last one.
    by_step = slowest_by_step(rows, lambda r: (r.get(keys.TIME_COMM) or 0.0) + (r.get(keys.TIME_WAIT) or 0.0))
    after_last = after_last_gradient(trial, result)
    return {"comm": mean(keys.TIME_COMM), "wait": mean(keys.TIME_WAIT), "compute": compute,
            "slowestIterationMedian": statistics.median(
                slowest_by_step(rows, lambda r: r.get(keys.TIME_ITERATION) or 0.0).values()),
            "predictedIteration": predicted_iteration(result),
            "slowestCommWait": statistics.fmean(by_step.values()),
            "slowestCommWaitMedian": statistics.median(by_step.values()),
            "afterLastGradientMedian": statistics.median(after_last) if after_last else None,
            "startSpreadMedian": statistics.median(start_spread(trial, result)) if after_last else None,
            "iteration": mean(keys.TIME_ITERATION), "bytesSent": mean(keys.BYTES_SENT),
            "bytesSentByWorker": bytes_by_worker(trial, result), "wallSeconds": result.seconds}


def slowest_by_step(rows: list[dict], value) -> dict[int, float]:
    """Per step, the largest `value(record)` among the workers' records."""
    by_step: dict[int, float] = {}
    for r in rows:
        by_step[r["step"]] = max(by_step.get(r["step"], 0.0), value(r))
    return by_step


def predicted_iteration(result: harness.TrialResult) -> float | None:
    """The product's prediction of this trial's iteration (`ringleader predict`: the slowest worker's compute per
    iteration, with the loop's own work, plus the architecture's communication on the link the trial probed); None
    where it cannot predict (the loopback: nothing to model) or has nothing to predict from."""
    try:
        predicted = result.prediction()
    except (OSError, ValueError):
        return None
    return None if predicted.cannot_predict else predicted.own.iteration_seconds


def _traced_steps(trial, result) -> dict[int, dict[int, tuple[float, float]]]:
    """Per traced step after warm-up, per worker: (end of backward, end of the exchange), wall-clock seconds from the
    ranks' Chrome traces (one clock for every rank on this machine). The exchange ends where the iteration does,
    less time/update (the copy of the new weights into the model)."""
    steps: dict[int, dict[int, tuple[float, float]]] = {}
    for slot in trial.worker_slots():
        update = {r["step"]: r.get(keys.TIME_UPDATE) or 0.0 for r in result.iterations(slot.rank) if not r["warmup"]}
        trace = json.loads((records.rank_dir(result.output_dir, trial.name, slot.rank)
                            / records.TRACE_FILE).read_text())
        backward, ended = {}, {}
        for event in trace["traceEvents"]:
            if event.get("ph") != "X":
                continue
            step, end = event["args"]["step"], (event["ts"] + event["dur"]) / 1e6
            if event["name"] == "backward":
                backward[step] = end
            elif event["name"] == f"iteration {step}":
                ended[step] = end
        for step in backward.keys() & ended.keys() & update.keys():
            steps.setdefault(step, {})[slot.rank] = (backward[step], ended[step] - update[step])
    workers = len(trial.worker_slots())
    return {step: ranks for step, ranks in steps.items() if len(ranks) == workers}


def after_last_gradient(trial, result) -> list[float]:
    """Per traced step, seconds from the moment the last worker's gradient was ready (its backward ended) to the
    moment the last worker had the new weights: the communication the models price, which assume every worker
    starts together. A worker that finished backward early waits for the last one under BSP (and that wait is in
    its comm + wait, so in "slowest"), but no exchange can end before the last gradient is in."""
    return [max(end for _, end in ranks.values()) - max(ready for ready, _ in ranks.values())
            for ranks in _traced_steps(trial, result).values()]


def start_spread(trial, result) -> list[float]:
    """Per traced step, seconds between the first and the last worker's end of backward (compute skew)."""
    return [max(ready for ready, _ in ranks.values()) - min(ready for ready, _ in ranks.values())
            for ranks in _traced_steps(trial, result).values()]


def bytes_by_worker(trial, result) -> dict[int, float]:
    """Each worker's mean bytes sent per iteration after warm-up: how evenly the traffic is spread."""
    by_worker = {}
    for slot in trial.worker_slots():
        sent = [r.get(keys.BYTES_SENT) or 0.0 for r in result.iterations(slot.rank) if not r["warmup"]]
        by_worker[slot.rank] = statistics.fmean(sent)
    return by_worker


def sent_range(measured: dict) -> str:
    """The least and most bytes a worker sent per iteration, in MB."""
    sent = measured["bytesSentByWorker"].values()
    return f"{min(sent) / 1e6:.3f}-{max(sent) / 1e6:.3f} MB"


def predict(architecture: str, workers: int, model_bytes: int, bandwidth: str) -> float | None:
    if bandwidth == UNSHAPED:
        return None
    link = cost_models.Nic(spec_.parse_bandwidth(bandwidth))
    return architectures.comm_seconds(architecture, workers, model_bytes, link)


def trend(rows: list[dict]) -> None:
    """Each row's slowest comm+wait over its architecture's (same bandwidth) N=2 value, and the model's ratio."""
    link = cost_models.Nic(1.0)  # any: the ratios of the zero-latency models do not depend on B
    for row in rows:
        base = next((r for r in rows if r["bandwidth"] == row["bandwidth"]
                     and r["architecture"] == row["architecture"] and r["workers"] == 2), None)
        if base is None or base["measured"]["slowestCommWaitMedian"] <= 0:
            continue
        row["measuredVsTwoWorkers"] = (row["measured"]["slowestCommWaitMedian"]
                                       / base["measured"]["slowestCommWaitMedian"])
        two = architectures.comm_seconds(row["architecture"], 2, row["modelBytes"], link)
        row["modelVsTwoWorkers"] = (architectures.comm_seconds(row["architecture"], row["workers"], row["modelBytes"],
                                                               link) / two)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--architectures", nargs="+", default=["ParameterServer", "PeerToPeer", "RingAllReduce"],
                        help="architectures (default all three; ParameterServer runs with one server)")
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2, 4], help="worker counts (default 1 2 4)")
    parser.add_argument("--bandwidths", nargs="+", default=["200Mbit", UNSHAPED],
                        help=f"emulated link rates (spec.network.bandwidth) or {UNSHAPED!r} (default 200Mbit unshaped)")
    parser.add_argument("--image-size", type=int, default=8,
                        help="synthetic image side: mlp M = 0.47 MB at 8 (default)")
    parser.add_argument("--batch", type=int, default=16, help="per-worker batch (default 16)")
    parser.add_argument("--iterations", type=int, default=20, help="iterations per trial (default 20)")
    parser.add_argument("--warmup", type=int, default=4, help="warm-up iterations left out (default 4)")
    parser.add_argument("--timeout", type=float, default=180, help="seconds allowed per trial (default 180)")
    harness.add_load_argument(parser)
    args = parser.parse_args(argv)

    from ringleader.runtime import models  # torch: only once the arguments are parsed

    start_machine = harness.machine()
    rows = []
    trials = len(args.bandwidths) * len(args.workers) * len(args.architectures)
    with tempfile.TemporaryDirectory(prefix="ringleader-bench-") as scratch, \
            harness.Load(args.burners, seconds=args.timeout * trials) as load:
        for bandwidth in args.bandwidths:
            for workers in args.workers:
                for architecture in args.architectures:
                    trial = harness.make_trial(spec_for(architecture, workers, bandwidth, args), "bench-study1-0")
                    model_bytes = models.parameter_bytes(models.build(trial.spec.model, trial.spec.data.synthetic))
                    since = len(load.samples)
                    measured = measure(trial, pathlib.Path(scratch) / f"{bandwidth}-{architecture}-{workers}",
                                       args.timeout)
                    measured["runQueue"] = load.run_queue(since)
                    row = {"bandwidth": bandwidth, "architecture": architecture, "workers": workers,
                           "processes": trial.world_size, "modelBytes": model_bytes, "measured": measured,
                           "predictedComm": predict(architecture, workers, model_bytes, bandwidth)}
                    rows.append(row)
                    print(f"{bandwidth:>9} {architecture:>15} N={workers}: comm {1e3 * measured['comm']:8.2f} ms, "
                          f"wait {1e3 * measured['wait']:8.2f} ms, compute {1e3 * measured['compute']:7.2f} ms, "
                          f"sent/worker {sent_range(measured)} "
                          f"({measured['wallSeconds']:.0f} s)", flush=True)
    trend(rows)
    result = {
        "benchmark": "ps_vs_ring",
        "command": "bench/bench_ps_vs_ring.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "config": vars(args), "machineStart": start_machine, "machineEnd": harness.machine(), "load": load.document(),
        "rows": rows,
    }
    path = harness.write_result("ps_vs_ring", result)
    print(f"\n{'link':>9} {'architecture':>15} {'N':>2} {'procs':>5} {'comm ms':>9} {'wait ms':>9} {'comm+wait':>10} "
          f"{'slowest':>9} {'model ms':>9} {'meas/model':>10} {'after last':>10} {'/model':>6} {'spread':>7} "
          f"{'vs N=2':>7} {'model':>6} {'iter ms':>8} {'predict':>8} {'/pred':>6} {'runq':>5}")
    for row in rows:
        m = row["measured"]
        total = m["comm"] + m["wait"]
        predicted = row["predictedComm"]
        ratio = f"{m['slowestCommWaitMedian'] / predicted:.2f}" if predicted else "-"
        model_ms = f"{1e3 * predicted:.2f}" if predicted is not None else "-"
        versus = f"{row['measuredVsTwoWorkers']:.2f}" if "measuredVsTwoWorkers" in row else "-"
        model_versus = f"{row['modelVsTwoWorkers']:.2f}" if "modelVsTwoWorkers" in row else "-"
        after = m["afterLastGradientMedian"]
        after_ms = f"{1e3 * after:.2f}" if after is not None else "-"
        after_ratio = f"{after / predicted:.2f}" if after is not None and predicted else "-"
        spread_ms = f"{1e3 * m['startSpreadMedian']:.2f}" if m["startSpreadMedian"] is not None else "-"
        own = m["predictedIteration"]
        own_ms, own_ratio = (f"{1e3 * own:.2f}", f"{m['slowestIterationMedian'] / own:.2f}") if own else ("-", "-")
        print(f"{row['bandwidth']:>9} {row['architecture']:>15} {row['workers']:>2} {row['processes']:>5} "
              f"{1e3 * m['comm']:>9.2f} {1e3 * m['wait']:>9.2f} {1e3 * total:>10.2f} "
              f"{1e3 * m['slowestCommWaitMedian']:>9.2f} "
              f"{model_ms:>9} {ratio:>10} {after_ms:>10} {after_ratio:>6} {spread_ms:>7} "
              f"{versus:>7} {model_versus:>6} {1e3 * m['slowestIterationMedian']:>8.2f} {own_ms:>8} {own_ratio:>6} "
              f"{m['runQueue'] or 0:>5.1f}")
    print(f"load {start_machine['loadavg1']:.1f} -> {result['machineEnd']['loadavg1']:.1f}; {load.said()}; "
          f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
