"""What ringleader's per-iteration instrumentation (timer, records, network counters' sampler) costs a training loop.

Runbook (from the repository root; about a minute on a loaded 2-core machine):

    .venv/bin/python bench/bench_overhead.py                  # micro, 6 worker.train pairs, alternating loop
    .venv/bin/python bench/bench_overhead.py --alternating-iterations 4000 --image-size 16 --pairs 0

The runtime has no switch that turns its instrumentation off (worker.py always times and records),
so the cost is measured two ways, in one process, one intra-op thread:

1. micro: the exact calls one ring iteration makes on the timer and recorder (begin, four phases,
   four add()s, a comm and a bucket span, finish, the loopback's rates from the 10 Hz sampler (runtime/netcounters.py,
   its thread running), log_iteration writing and flushing a JSONL line, and one
   gradient-ready hook per parameter), in a tight loop with nothing to time, minus the same loop
   empty; both outside and inside the trace window (the first 20 steps after warm-up are traced).
   That is the instrumentation's cost per iteration, in microseconds, independent of the model.
2. loop: runtime/worker.py's real `train()` (one worker, so the ring synchronizer only steps the
   optimizer) against a bare loop of the same model, data, optimizer and phases with no timer, no
   hooks and no records, interleaved in pairs (alternating which goes first). Iteration times of both
   come from one clock outside the instrumentation (perf_counter at each logged iteration), steady
   state after warm-up; overhead per pair = median instrumented / median bare - 1.

3. alternating: instrumented and bare iterations alternate in ONE loop, on two identical models, the
   instrumented one making worker.py's calls; overhead = median over steps of (instrumented / bare of
   the same step) - 1, overall and per chunk of steps (median, min, max over chunks). A third, bare
   copy of the model runs in the same rotation as an A/A control: its "overhead" is the resolution.
   A load spike lasts many iterations, so it hits both kinds alike: the end-to-end number to trust.

On a shared, loaded machine (2) is noisier than the effect it measures (run medians move by 2-4x with
the load; its spread is reported only to show that); (1) divided by the bare iteration time of (3),
and (3) itself, are the numbers to quote. Target: < 2%.
Writes bench/results/overhead.json and prints a table. Not a test: nothing here asserts a timing.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import tempfile
import time

import harness
import torch

from ringleader.api import constants
from ringleader.contract import environment as contract
from ringleader.contract import keys, records
from ringleader.runtime import data, models, netcounters, optimizers, ring, settings, timing, worker


# ---------------------------------------------------------------------------------------------
# 1. micro


def instrumented_calls(directory: pathlib.Path, iterations: int, parameters: int, traced: bool) -> float:
    """Seconds per iteration of the timer/recorder calls a ring worker makes, with empty phases."""
    timer = timing.IterationTimer(0, torch.device("cpu"), range(0, iterations) if traced else range(0))
    # What watch_layers() registers on each parameter; called directly, as backward would call it.
    hooks = [timer._ready_hook(f"layer{i}.weight") for i in range(parameters)]
    recorder = records.RankRecorder(directory, "micro-0", 0)
    phases = [timer.phase(name) for name in (keys.TIME_DATA, keys.TIME_FORWARD, keys.TIME_BACKWARD,
                                              keys.TIME_UPDATE)]
    link = netcounters.Sampler.open(netcounters.LOOPBACK)  # its thread runs, as in a rank; None off Linux
    if link is not None:
        link.start()
    started = time.perf_counter()
    for step in range(iterations):
        timer.begin(step)
        for index, phase in enumerate(phases):
            with phase:
                if index == 2:
                    for hook in hooks:
                        hook(None)
        now = time.perf_counter()
        timer.add(keys.TIME_WAIT, 0.0)
        timer.add(keys.TIME_COMM, 0.0)
        timer.span("comm", now, now, timing.TRACK_MAIN)
        timer.span("allreduce bucket 0", now, now, timing.TRACK_COMM, {"bytes": 4})
        timer.add(keys.BYTES_SENT, 1.0)
        timer.add(keys.BYTES_RECEIVED, 1.0)
        metrics = timer.finish()
        metrics[keys.LOSS] = 1.0
        if link is not None:
            worker.record_link_rates(link, 1e9, timer, metrics)
        recorder.log_iteration(step, metrics)
    elapsed = time.perf_counter() - started
    if link is not None:
        link.stop()
    recorder.close()
    return elapsed / iterations


def empty_calls(iterations: int, parameters: int) -> float:
    """The same loop shape with nothing in it: what the Python loop itself costs."""
    hooks = [lambda _p: None for _ in range(parameters)]
    started = time.perf_counter()
    for _step in range(iterations):
        for index in range(4):
            if index == 2:
                for hook in hooks:
                    hook(None)
    return (time.perf_counter() - started) / iterations


def micro(directory: pathlib.Path, iterations: int, parameters: int, repeats: int) -> dict:
    steady, traced = [], []
    for repeat in range(repeats):
        empty = empty_calls(iterations, parameters)
        steady.append(instrumented_calls(directory / f"s{repeat}", iterations, parameters, False) - empty)
        traced.append(instrumented_calls(directory / f"t{repeat}", iterations, parameters, True) - empty)
    return {"steadyMicroseconds": harness.spread([1e6 * s for s in steady]),
            "tracedMicroseconds": harness.spread([1e6 * s for s in traced])}


# ---------------------------------------------------------------------------------------------
# 2. loop


class ClockedRecorder(records.RankRecorder):
    """A RankRecorder that also notes when each iteration was logged, by a clock outside the timer."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.clock: list[float] = []

    def log_iteration(self, step: int, metrics: dict[str, float]) -> None:
        self.clock.append(time.perf_counter())
        super().log_iteration(step, metrics)


def instrumented_loop(trial, directory: pathlib.Path) -> list[float]:
    """worker.train as the runtime runs it (one worker): per-iteration seconds from the outside clock."""
    env = contract.PodEnvironment(role=constants.ROLE_WORKER, rank=0, world_size=1, master_addr=harness.LOOPBACK,
                                  master_port=1, trial_file="", output_dir=str(directory))
    recorder = ClockedRecorder(directory, trial.name, 0, constants.ROLE_WORKER, trial.spec.model.warmup_iterations)
    synchronizer = ring.RingSynchronizer(trial, env, torch.device("cpu"))
    worker.train(trial, env, synchronizer, recorder, torch.device("cpu"), interface=netcounters.LOOPBACK)
    recorder.close()
    return [b - a for a, b in zip(recorder.clock, recorder.clock[1:])]


def bare_loop(trial) -> list[float]:
    """The same model, data, optimizer and phases, with nothing timed, hooked or recorded."""
    spec = trial.spec
    torch.manual_seed(spec.data.synthetic.seed)
    model = models.build(spec.model, spec.data.synthetic)
    dataset = data.SyntheticDataset(spec.data.synthetic, models.input_spec(spec.model, spec.data.synthetic, model))
    optimizer = optimizers.factory(spec.model.optimizer)([p for p in model.parameters() if p.requires_grad])
    model.train()
    clock = []
    for step in range(spec.model.iterations):
        inputs, labels = dataset.batch(step, spec.model.batch_size)  # (B, 3, H, W), (B,)
        loss = models.loss(model(inputs), labels)
        model.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss.item()
        clock.append(time.perf_counter())
    return [b - a for a, b in zip(clock, clock[1:])]


def loop(trial, directory: pathlib.Path, pairs: int) -> dict:
    warmup = trial.spec.model.warmup_iterations
    overheads, bare_medians, instrumented_medians = [], [], []
    for pair in range(pairs):
        order = ("instrumented", "bare") if pair % 2 == 0 else ("bare", "instrumented")
        medians = {}
        for variant in order:
            seconds = instrumented_loop(trial, directory / f"{pair}") if variant == "instrumented" else bare_loop(trial)
            medians[variant] = statistics.median(seconds[warmup:])
        overheads.append(medians["instrumented"] / medians["bare"] - 1.0)
        bare_medians.append(medians["bare"])
        instrumented_medians.append(medians["instrumented"])
        print(f"pair {pair}: bare {1e3 * medians['bare']:.3f} ms, instrumented {1e3 * medians['instrumented']:.3f} ms, "
              f"overhead {100 * overheads[-1]:+.2f}%", flush=True)
    return {"overheadPercent": harness.spread([100 * o for o in overheads]),
            "bareMilliseconds": harness.spread([1e3 * s for s in bare_medians]),
            "instrumentedMilliseconds": harness.spread([1e3 * s for s in instrumented_medians])}


# ---------------------------------------------------------------------------------------------
# 3. alternating


def alternating(trial, directory: pathlib.Path, iterations: int, chunks: int) -> dict:
    """Instrumented and bare iterations alternate in one loop, on identical models (same seed), so a
    load spike on the shared machine hits both alike. The instrumented one makes worker.py's calls
    (timer phases, layer hooks, the synchronizer's update phase, finish, log_iteration); each iteration
    is timed by a clock outside the instrumentation. Overhead: the median over steps of instrumented /
    bare of the same step, minus 1, overall and per chunk of steps (the spread)."""
    spec = trial.spec
    warmup = spec.model.warmup_iterations
    cpu = torch.device("cpu")
    env = contract.PodEnvironment(role=constants.ROLE_WORKER, rank=0, world_size=1, master_addr=harness.LOOPBACK,
                                  master_port=1, trial_file="", output_dir=str(directory))
    torch.manual_seed(spec.data.synthetic.seed)
    instrumented_model = models.build(spec.model, spec.data.synthetic)
    bare_model = models.build(spec.model, spec.data.synthetic)
    control_model = models.build(spec.model, spec.data.synthetic)
    dataset = data.SyntheticDataset(spec.data.synthetic, models.input_spec(spec.model, spec.data.synthetic, bare_model))
    timer = timing.IterationTimer(0, cpu, range(warmup, warmup + settings.RankSettings().trace_iterations))
    timer.watch_layers(instrumented_model)
    synchronizer = ring.RingSynchronizer(trial, env, cpu)
    synchronizer.attach(instrumented_model, optimizers.factory(spec.model.optimizer))
    bare_optimizers = {id(bare_model): optimizers.factory(spec.model.optimizer)(list(bare_model.parameters())),
                       id(control_model): optimizers.factory(spec.model.optimizer)(list(control_model.parameters()))}
    recorder = records.RankRecorder(directory, trial.name, 0, constants.ROLE_WORKER, warmup)
    instrumented, bare, control = [], [], []
    link = netcounters.Sampler.open(netcounters.LOOPBACK)  # sampling all along, as in a rank's measured iterations
    if link is not None:
        link.start()

    def instrumented_iteration(step: int) -> None:
        # worker.train's iteration
        started = time.perf_counter()
        timer.begin(step)
        with timer.phase(keys.TIME_DATA):
            inputs, labels = dataset.batch(step, spec.model.batch_size)  # (B, 3, H, W), (B,)
        with timer.phase(keys.TIME_FORWARD):
            loss = models.loss(instrumented_model(inputs), labels)
        with timer.phase(keys.TIME_BACKWARD):
            synchronizer.backward(loss)
        synchronizer.synchronize(step, timer)
        metrics = timer.finish()
        metrics[keys.LOSS] = loss.item()
        if link is not None and step >= warmup:
            worker.record_link_rates(link, None, timer, metrics)
        recorder.log_iteration(step, metrics)
        instrumented.append(time.perf_counter() - started)

    def bare_iteration(step: int, model: torch.nn.Module, into: list[float]) -> None:
        # the same work, nothing timed, hooked or recorded
        started = time.perf_counter()
        inputs, labels = dataset.batch(step, spec.model.batch_size)
        loss = models.loss(model(inputs), labels)
        model.zero_grad(set_to_none=True)
        loss.backward()
        bare_optimizers[id(model)].step()
        loss.item()
        into.append(time.perf_counter() - started)

    kinds = [instrumented_iteration, lambda step: bare_iteration(step, bare_model, bare),
             lambda step: bare_iteration(step, control_model, control)]
    for step in range(iterations):
        # Which kind goes first rotates too, so none always runs on caches another warmed.
        for kind in kinds[step % 3:] + kinds[:step % 3]:
            kind(step)
    if link is not None:
        link.stop()
    recorder.close()

    def overhead(of: list[float]) -> tuple[float, dict]:
        # Per step, of / bare of the same step: neighbours in time share the machine's load.
        ratios = [a / b for a, b in zip(of[warmup:], bare[warmup:])]
        size = max(1, len(ratios) // chunks)
        by_chunk = [statistics.median(ratios[first:first + size]) - 1.0
                    for first in range(0, len(ratios) - size + 1, size)]
        return 100 * (statistics.median(ratios) - 1.0), harness.spread([100 * o for o in by_chunk])

    overall, spread = overhead(instrumented)
    control_overall, control_spread = overhead(control)
    return {"overheadPercent": spread, "overallPercent": overall,
            # A/A: a second bare model against the first. Its offset is the resolution of this measurement
            # (two copies of one model need not run equally fast: memory placement, caches).
            "controlPercent": control_spread, "controlOverallPercent": control_overall,
            "bareMilliseconds": 1e3 * statistics.median(bare[warmup:]),
            "instrumentedMilliseconds": 1e3 * statistics.median(instrumented[warmup:]),
            "iterationsEach": iterations - warmup, "chunks": spread["n"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6,
                        help="interleaved (worker.train, bare) loop pairs (default 6)")
    parser.add_argument("--alternating-iterations", type=int, default=2000,
                        help="iterations of each kind in the alternating loop (default 2000)")
    parser.add_argument("--chunks", type=int, default=10, help="chunks the alternating loop is split into (default 10)")
    parser.add_argument("--iterations", type=int, default=200, help="iterations per loop run (default 200)")
    parser.add_argument("--warmup", type=int, default=20, help="warm-up iterations left out (default 20)")
    parser.add_argument("--model", default="mlp", help="built-in model (default mlp)")
    parser.add_argument("--image-size", type=int, default=32, help="synthetic image side (default 32)")
    parser.add_argument("--batch", type=int, default=32, help="batch (default 32)")
    parser.add_argument("--micro-iterations", type=int, default=20000, help="iterations per micro run (default 20000)")
    parser.add_argument("--micro-repeats", type=int, default=5, help="micro runs (default 5)")
    args = parser.parse_args(argv)

    torch.set_num_threads(1)  # as a rank with cpu "1" (runtime/main.py cpu_threads)
    trial = harness.make_trial({
        "architecture": "RingAllReduce", "workers": {"replicas": 1},
        "model": {"name": args.model, "batchSize": args.batch, "iterations": args.iterations,
                  "warmupIterations": args.warmup},
        "data": {"synthetic": {"samples": 4096, "imageSize": args.image_size}},
    }, "bench-overhead-0")
    parameters = sum(1 for p in models.build(trial.spec.model, trial.spec.data.synthetic).parameters()
                     if p.requires_grad)
    start_machine = harness.machine()
    with tempfile.TemporaryDirectory(prefix="ringleader-bench-") as scratch:
        micro_result = micro(pathlib.Path(scratch) / "micro", args.micro_iterations, parameters, args.micro_repeats)
        loop_result = loop(trial, pathlib.Path(scratch) / "loop", args.pairs) if args.pairs else None
        alternating_result = alternating(trial, pathlib.Path(scratch) / "alternating", args.alternating_iterations,
                                         args.chunks)

    bare = alternating_result["bareMilliseconds"] / 1e3
    direct = {key: 100 * micro_result[f"{key}Microseconds"]["median"] / 1e6 / bare for key in ("steady", "traced")}
    result = {
        "benchmark": "overhead",
        "command": "bench/bench_overhead.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "config": {**vars(args), "parameters": parameters},
        "machineStart": start_machine, "machineEnd": harness.machine(),
        "micro": micro_result, "loop": loop_result, "alternating": alternating_result,
        "microPercentOfBareIteration": direct,
        "target": "< 2%",
    }
    path = harness.write_result("overhead", result)
    print(f"\n{'':34}{'median':>10}{'min':>10}{'max':>10}")
    rows = [("micro, steady (us/iteration)", micro_result["steadyMicroseconds"]),
            ("micro, traced (us/iteration)", micro_result["tracedMicroseconds"])]
    if loop_result:
        rows += [("bare loop iteration (ms)", loop_result["bareMilliseconds"]),
                 ("worker.train iteration (ms)", loop_result["instrumentedMilliseconds"]),
                 ("worker.train overhead (%)", loop_result["overheadPercent"])]
    rows.append(("alternating overhead (%)", alternating_result["overheadPercent"]))
    rows.append(("alternating A/A control (%)", alternating_result["controlPercent"]))
    for label, values in rows:
        print(f"{label:34}" + "".join(f"{values[k]:>10.3f}" for k in ("median", "min", "max")))
    print(f"alternating loop: overall {alternating_result['overallPercent']:+.2f}% "
          f"(A/A control {alternating_result['controlOverallPercent']:+.2f}%); bare "
          f"{alternating_result['bareMilliseconds']:.3f} ms, "
          f"instrumented {alternating_result['instrumentedMilliseconds']:.3f} ms "
          f"(medians of {alternating_result['iterationsEach']} each)")
    print(f"micro cost / bare iteration: steady {direct['steady']:.3f}%, traced steps {direct['traced']:.3f}%")
    print(f"load {start_machine['loadavg1']:.1f} -> {result['machineEnd']['loadavg1']:.1f}; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
