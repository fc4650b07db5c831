"""The training loop of a worker rank: data, forward, backward, then the synchronizer; called by main.py.

The loop is the same for every architecture and paradigm: what happens after backward (allreduce,
push/pull, waiting on a staleness bound, the update, hearing that another worker reached the target)
belongs to the `Synchronizer` it is given. Every part of an iteration is in a phase: data, forward,
backward, the synchronizer's comm/wait/update, eval (the held-out evaluation) and other
(the loop's own recording and printing between iterations, timed by the timer).
"""

from __future__ import annotations

import dataclasses
import time

import torch

from ringleader.api.spec import DataFormat, ExperimentSpec, Target
from ringleader.api.trial import Trial
from ringleader.contract import keys, progress, records
from ringleader.contract import environment as contract
from ringleader.runtime import (data, datafiles, datasets, evaluation, interfaces, models, netcounters, optimizers,
                                profiling, settings, straggler, timing, usage)


def build(spec: ExperimentSpec, env: contract.PodEnvironment, shard: int, shards: int):
    """(model on the CPU, this worker's data): synthetic, or the real dataset's shard with the model shaped to it."""
    if spec.data.format == DataFormat.SYNTHETIC:
        model = models.build(spec.model, spec.data.synthetic)
        shape = models.input_spec(spec.model, spec.data.synthetic, model)
        return model, data.SyntheticDataset(spec.data.synthetic, shape, shard=shard, shards=shards)
    model = models.build(spec.model, spec.data.synthetic, datasets.describe(spec.data, env.data_dir))
    return model, datasets.shard(spec.data, env.data_dir, shard, shards)


def train(trial: Trial, env: contract.PodEnvironment, synchronizer: interfaces.Synchronizer,
          recorder: records.RankRecorder, device: torch.device,
          trace_iterations: int = settings.RankSettings().trace_iterations, interface: str | None = None,
          ranks_sharing_interface: int = 1) -> None:
    """Run this worker's iterations, recording each one, then close the synchronizer.

    `interface` (lo, eth0; None: not measured) is sampled for the network rates of the measured iterations;
    `ranks_sharing_interface` ranks send through it (all of them on the loopback), each under the emulated cap."""
    loop = prepare(trial, env, synchronizer, recorder, device, trace_iterations)
    loop.link, loop.link_rate = open_link(interface, trial.spec, ranks_sharing_interface, recorder)
    try:
        for step in range(loop.iterations):
            if iterate(loop, step):
                break
    finally:
        # stop: release the peers even when this rank fails, so nobody waits for it longer than needed
        if loop.profiled is not None:
            loop.profiled.close(loop.timer)
        synchronizer.close()
        if loop.link is not None:
            loop.link.stop()
    recorder.write_trace(loop.timer.trace())
    recorder.write_layers(loop.timer.layers())
    recorder.summary_extras["parameterDigest"] = models.digest(loop.model)


@dataclasses.dataclass
class Loop:
    """What a worker's iterations use, made once by `prepare`: its configuration, the model on its device with
    the hooks on it, its data, and the optional parts (held-out data, profiler, link counters)."""

    spec: ExperimentSpec
    device: torch.device
    plan: evaluation.EvaluationSchedule | None  # evaluate every K (first worker), stop at the target
    model: torch.nn.Module
    dataset: data.SyntheticDataset | datasets.Shard
    held_out: datafiles.Images | None
    synchronizer: interfaces.Synchronizer
    recorder: records.RankRecorder
    slow: straggler.Straggler  # slot.slowdown_percent > 100: an emulated straggler
    timer: timing.IterationTimer
    profiled: profiling.Window | None  # spec.profiling: PyTorch's profiler
    counters: usage.Counters = dataclasses.field(default_factory=usage.Counters.open)  # CPU_COMM, CPU_THROTTLED
    link: netcounters.Sampler | None = None  # the interface's counters, from the first measured iteration on
    link_rate: float | None = None  # bits/s LINK_UTILIZATION is measured against
    last_line: float = dataclasses.field(default_factory=time.monotonic)  # when the last progress line was printed

    @property
    def iterations(self) -> int:
        """Iterations this worker runs."""
        return self.spec.model.iterations

    @property
    def warmup(self) -> int:
        """Iterations recorded, flagged and left out of the summary."""
        return self.spec.model.warmup_iterations

    @property
    def batch_size(self) -> int:
        """The per-worker minibatch, in samples."""
        return self.spec.model.batch_size

    @property
    def progress_every(self) -> int:
        """A progress line every ~10% of the iterations (and at least every progress.EVERY_SECONDS)."""
        return max(1, self.iterations // 10)


def prepare(trial: Trial, env: contract.PodEnvironment, synchronizer: interfaces.Synchronizer,
            recorder: records.RankRecorder, device: torch.device, trace_iterations: int) -> Loop:
    """The model and data on their device, hooked in the order that matters: the straggler delays a gradient
    before the timer and the synchronizer see it. The configuration is logged once, by main.py."""
    slot = trial.slots()[env.rank]
    spec = trial.spec
    warmup = spec.model.warmup_iterations
    plan = evaluation.EvaluationSchedule.of(spec, slot.index)
    torch.manual_seed(spec.data.synthetic.seed + env.rank)  # dropout-like randomness differs by rank
    model, dataset = build(spec, env, slot.index, len(trial.worker_slots()))
    model = model.to(device)
    held_out = None
    if plan is not None and plan.evaluator:
        held_out = datasets.held_out(spec.data, env.data_dir, plan.max_samples)
    slow = straggler.Straggler(slot.slowdown_percent, device)
    # traced after warm-up (RINGLEADER_TRACE_ITERATIONS)
    timer = timing.IterationTimer(env.rank, device, range(warmup, warmup + trace_iterations),
                                  label=f"rank {env.rank} ({slot.label})")
    profiled = profiling.Window.of(spec, device, recorder.directory)
    slow.attach(model)
    timer.watch_layers(model)
    synchronizer.attach(model, optimizers.factory(spec.model.optimizer))
    model.train()
    return Loop(spec=spec, device=device, plan=plan, model=model, dataset=dataset, held_out=held_out,
                synchronizer=synchronizer, recorder=recorder, slow=slow, timer=timer, profiled=profiled)


def open_link(interface: str | None, spec: ExperimentSpec, ranks_sharing_interface: int,
              recorder: records.RankRecorder) -> tuple[netcounters.Sampler | None, float | None]:
    """The interface's sampler (a thread of its own, started at the first measured iteration) and its link rate;
    both noted in the rank's summary."""
    link = netcounters.Sampler.open(interface) if interface else None
    if not interface or link is None:
        return None, None
    link_rate = netcounters.link_bits_per_second(interface, spec.network.bits_per_second(), ranks_sharing_interface)
    recorder.summary_extras[keys.LINK_INTERFACE] = netcounters.describe(interface)
    if link_rate:
        recorder.summary_extras[keys.LINK_BITS_PER_SECOND] = link_rate
    return link, link_rate


def iterate(loop: Loop, step: int) -> bool:
    """One iteration, in its phases; True when it was the last (the target was reached)."""
    timer, slow, synchronizer, plan = loop.timer, loop.slow, loop.synchronizer, loop.plan
    if loop.link is not None and step == loop.warmup:
        loop.link.start()
    timer.begin(step)
    if loop.profiled is not None:
        loop.profiled.begin(step, timer)

    # data: the batch of this step, copied to the device (the DAG model's read + h2d)
    with timer.phase(keys.TIME_DATA):
        inputs, labels = loop.dataset.batch(step, loop.batch_size)  # (B, 3, H, W) and (B,), or (B, T) and (B, T)
        inputs = inputs.to(loop.device, non_blocking=True)
        labels = labels.to(loop.device, non_blocking=True)

    # forward
    with timer.phase(keys.TIME_FORWARD):
        slow.start()
        logits = loop.model(inputs)  # (B, C) or (B, T, V)
        loss = models.loss(logits, labels)  # scalar, stays on the device until finish()
        slow.stretch()

    # backward: gradient hooks fire per parameter here (ring buckets start allreducing now)
    with timer.phase(keys.TIME_BACKWARD):
        synchronizer.backward(loss)  # clears the last iteration's gradients first
        slow.stretch()

    # communicate, wait, update: the synchronizer times its own phases; the process's CPU time meanwhile is what its
    # bytes cost the host (gloo's threads included)
    with timer.annotate("synchronize"), loop.counters.communicating(timer.metrics):
        synchronizer.synchronize(step, timer)

    # evaluate, on the parameters the synchronizer just made (the first worker, every K iterations)
    due = plan is not None and evaluation.due(step, plan.every, loop.iterations)
    evaluated, reached = {}, False
    if due and loop.held_out is not None:
        with timer.phase(keys.TIME_EVAL):
            evaluated = evaluation.evaluate(loop.model, loop.held_out, loop.device)
            reached = loop.spec.model.target is not None and evaluation.reached(loop.spec.model.target, evaluated)

    # stop: the evaluator's verdict reaches the others as the synchronizer allows (without waiting, but
    # under BSP); it ends the loop after this iteration
    stopping = plan is not None and plan.stop_at_target and synchronizer.should_stop(due, reached, timer)

    # time and log: finish() is the iteration's one device sync, after which loss.item() is free
    metrics = timer.finish()
    metrics[keys.LOSS] = loss.item()
    loop.counters.throttled_since_last(metrics)
    metrics.update(evaluated)
    log(loop, step, metrics, stopping)
    target = loop.spec.model.target
    if stopping and target is not None:  # a worker stops only at a target
        print(f"target {describe_target(target)} reached"
              f"{'' if reached else ' by the evaluating worker'}: stopping after iteration {step + 1}", flush=True)
    return stopping


def log(loop: Loop, step: int, metrics: dict[str, float], last: bool) -> None:
    """The iteration's record (with the profiler's flag and the link's rates) and, now and then, a progress line."""
    if loop.profiled is not None:
        if loop.profiled.covers(step):
            metrics[keys.WARMUP] = True  # the profiler slowed it: left out of the summary, like warm-up
        loop.profiled.end(step, loop.timer, last=last or step + 1 == loop.iterations)
    if loop.link is not None and step >= loop.warmup:
        record_link_rates(loop.link, loop.link_rate, loop.timer, metrics)
    loop.recorder.log_iteration(step, metrics)
    if (step + 1) % loop.progress_every == 0 or step + 1 == loop.iterations or \
            time.monotonic() - loop.last_line >= progress.EVERY_SECONDS:
        print(progress.progress_line(step + 1, loop.iterations, metrics[keys.LOSS], metrics[keys.TIME_ITERATION]),
              flush=True)
        loop.last_line = time.monotonic()


def describe_target(target: Target) -> str:
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
