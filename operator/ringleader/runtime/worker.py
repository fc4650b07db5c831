"""The training loop of a worker rank: data, forward, backward, then the synchronizer; called by main.py.

The loop is the same for every architecture and paradigm: what happens after backward (allreduce,
push/pull, waiting on a staleness bound, the update, hearing that another worker reached the target)
belongs to the `Synchronizer` it is given. Every part of an iteration is in a phase: data, forward,
backward, the synchronizer's comm/wait/update, eval (the held-out evaluation) and other
(the loop's own recording and printing between iterations, timed by the timer).
"""

from __future__ import annotations

import time

import torch

from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.contract import keys, progress, records
from ringleader.contract import environment as contract
from ringleader.runtime import (data, datasets, evaluation, interfaces, models, netcounters, optimizers, profiling,
                                settings, straggler, timing)


def build(spec: spec_.ExperimentSpec, env: contract.PodEnvironment, shard: int, shards: int):
    """(model on the CPU, this worker's data): synthetic, or the real dataset's shard with the model shaped to it."""
    if spec.data.format == spec_.DataFormat.SYNTHETIC:
        model = models.build(spec.model, spec.data.synthetic)
        shape = models.input_spec(spec.model, spec.data.synthetic, model)
        return model, data.SyntheticDataset(spec.data.synthetic, shape, shard=shard, shards=shards)
    model = models.build(spec.model, spec.data.synthetic, datasets.describe(spec.data, env.data_dir))
    return model, datasets.shard(spec.data, env.data_dir, shard, shards)


def train(trial: trial_.Trial, env: contract.PodEnvironment, synchronizer: interfaces.Synchronizer,
          recorder: records.RankRecorder, device: torch.device,
          trace_iterations: int = settings.Settings().trace_iterations, interface: str | None = None,
          ranks_sharing_interface: int = 1) -> None:
    """Run this worker's iterations, recording each one, then close the synchronizer.

    `interface` (lo, eth0; None: not measured) is sampled for the network rates of the measured iterations;
    `ranks_sharing_interface` ranks send through it (all of them on the loopback), each under the emulated cap."""
    slot = trial.slots()[env.rank]
    spec = trial.spec
    # -----------------------------------------------------------------------------------------
    # configuration (from the trial; logged once by the lowest worker rank in main.py)
    iterations = spec.model.iterations            # iterations this worker runs
    warmup = spec.model.warmup_iterations         # recorded, flagged, left out of the summary
    batch_size = spec.model.batch_size            # per-worker minibatch, in samples
    slowdown = slot.slowdown_percent              # >100: an emulated straggler
    trace_steps = range(warmup, warmup + trace_iterations)  # traced after warm-up (RINGLEADER_TRACE_ITERATIONS)
    progress_every = max(1, iterations // 10)     # a progress line every ~10%...
    progress_seconds = progress.EVERY_SECONDS     # ...and at least every 5 s
    plan = evaluation.Schedule.of(spec, slot.index)   # evaluate every K (first worker), stop at the target
    # -----------------------------------------------------------------------------------------

    torch.manual_seed(spec.data.synthetic.seed + env.rank)  # dropout-like randomness differs by rank
    model, dataset = build(spec, env, slot.index, len(trial.worker_slots()))
    model = model.to(device)
    held_out = None
    if plan is not None and plan.evaluator:
        held_out = datasets.held_out(spec.data, env.data_dir, spec.model.evaluation.max_samples)
    slow = straggler.Straggler(slowdown, device)
    timer = timing.IterationTimer(env.rank, device, trace_steps, label=f"rank {env.rank} ({slot.hostname})")
    profiled = profiling.Window.of(spec, device, recorder.directory)  # spec.profiling: PyTorch's profiler
    # Hook order matters: the straggler delays a gradient before the timer and the synchronizer see it.
    slow.attach(model)
    timer.watch_layers(model)
    synchronizer.attach(model, optimizers.factory(spec.model.optimizer))
    model.train()
    # The interface's counters, sampled by a thread of their own from the first measured iteration on.
    link = netcounters.Sampler.open(interface) if interface else None
    link_rate = (netcounters.link_bits_per_second(interface, spec.network.bits_per_second(), ranks_sharing_interface)
                 if link is not None else None)
    if link is not None:
        recorder.summary_extras[keys.LINK_INTERFACE] = netcounters.describe(interface)
        if link_rate:
            recorder.summary_extras[keys.LINK_BITS_PER_SECOND] = link_rate

    last_line = time.monotonic()  # when the last progress line was printed (the loop's start, at first)
    try:
        for step in range(iterations):
            if link is not None and step == warmup:
                link.start()
            timer.begin(step)
            if profiled is not None:
                profiled.begin(step, timer)

            # data: the batch of this step, copied to the device (the DAG model's read + h2d)
            with timer.phase(keys.TIME_DATA):
                inputs, labels = dataset.batch(step, batch_size)  # (B, 3, H, W) and (B,), or (B, T) and (B, T)
                inputs = inputs.to(device, non_blocking=True)
                labels = labels.to(device, non_blocking=True)

            # forward
            with timer.phase(keys.TIME_FORWARD):
                slow.start()
                logits = model(inputs)  # (B, C) or (B, T, V)
                loss = models.loss(logits, labels)  # scalar, stays on the device until finish()
                slow.stretch()

            # backward: gradient hooks fire per parameter here (ring buckets start allreducing now)
            with timer.phase(keys.TIME_BACKWARD):
                synchronizer.backward(loss)  # clears the last iteration's gradients first
                slow.stretch()

            # communicate, wait, update: the synchronizer times its own phases
            with timer.annotate("synchronize"):
                synchronizer.synchronize(step, timer)

            # evaluate, on the parameters the synchronizer just made (the first worker, every K iterations)
            due = plan is not None and evaluation.due(step, plan.every, iterations)
            evaluated, reached = {}, False
            if due and held_out is not None:
                with timer.phase(keys.TIME_EVAL):
                    evaluated = evaluation.evaluate(model, held_out, device)
                    reached = spec.model.target is not None and evaluation.reached(spec.model.target, evaluated)

            # stop: the evaluator's verdict reaches the others as the synchronizer allows (without waiting, but
            # under BSP); it ends the loop after this iteration
            stopping = plan is not None and plan.stop_at_target and synchronizer.should_stop(due, reached, timer)

            # time and log: finish() is the iteration's one device sync, after which loss.item() is free
            metrics = timer.finish()
            metrics[keys.LOSS] = loss.item()
            metrics.update(evaluated)
            if profiled is not None:
                if profiled.covers(step):
                    metrics["warmup"] = True  # the profiler slowed it: left out of the summary, like warm-up
                profiled.end(step, timer, last=stopping or step + 1 == iterations)
            if link is not None and step >= warmup:
                record_link_rates(link, link_rate, timer, metrics)
            recorder.log_iteration(step, metrics)
            if (step + 1) % progress_every == 0 or step + 1 == iterations or \
                    time.monotonic() - last_line >= progress_seconds:
                print(progress.progress_line(step + 1, iterations, metrics[keys.LOSS],
                                             metrics[keys.TIME_ITERATION]), flush=True)
                last_line = time.monotonic()
            if stopping:
                print(f"target {describe_target(spec.model.target)} reached"
                      f"{'' if reached else ' by the evaluating worker'}: stopping after iteration {step + 1}",
                      flush=True)
                break
    finally:
        # stop: release the peers even when this rank fails, so nobody waits for it longer than needed
        if profiled is not None:
            profiled.close(timer)
        synchronizer.close()
        if link is not None:
            link.stop()
    recorder.write_trace(timer.trace())
    recorder.write_layers(timer.layers())
    recorder.summary_extras["parameterDigest"] = models.digest(model)


def describe_target(target: spec_.Target) -> str:
    if target.accuracy_percent is not None:
        return f"accuracy {target.accuracy_percent:g}%"
    return f"loss {target.loss:g}"


def record_link_rates(link: netcounters.Sampler, link_rate: float | None, timer: timing.IterationTimer,
                      metrics: dict[str, float]) -> None:
    """The interface's rates over the iteration just finished, into its metrics and, when traced, the trace."""
    start, end = timer.interval()
    measured = link.rates(start, end)
    if measured is None:
        return
    tx, rx = measured
    metrics[keys.LINK_TX], metrics[keys.LINK_RX] = tx, rx
    if link_rate:
        metrics[keys.LINK_UTILIZATION] = 8.0 * tx / link_rate
    timer.counter(f"{link.interface} bytes/s", start, {"tx": tx, "rx": rx})
