"""The training loop of a worker rank: data, forward, backward, then the synchronizer; called by main.py.

The loop is the same for every architecture and paradigm: what happens after backward (allreduce,
push/pull, waiting on a staleness bound, the update) belongs to the `Synchronizer` it is given.
"""

from __future__ import annotations

import torch

from ringleader.api import trial as trial_
from ringleader.contract import keys, progress, records
from ringleader.contract import environment as contract
from ringleader.runtime import data, interfaces, models, optimizers, settings, straggler, timing


def train(trial: trial_.Trial, env: contract.PodEnvironment, synchronizer: interfaces.Synchronizer,
          recorder: records.RankRecorder, device: torch.device,
          trace_iterations: int = settings.Settings().trace_iterations) -> None:
    """Run this worker's iterations, recording each one, then close the synchronizer."""
    slot = trial.slots()[env.rank]
    spec = trial.spec
    # -----------------------------------------------------------------------------------------
    # configuration (from the trial; logged once by the lowest worker rank in main.py)
    iterations = spec.model.iterations            # iterations this worker runs
    warmup = spec.model.warmup_iterations         # recorded, flagged, left out of the summary
    batch_size = spec.model.batch_size            # per-worker minibatch, in samples
    slowdown = slot.slowdown_percent              # >100: an emulated straggler
    trace_steps = range(warmup, warmup + trace_iterations)  # traced after warm-up (RINGLEADER_TRACE_ITERATIONS)
    progress_every = max(1, iterations // 10)     # a progress line every ~10%
    # -----------------------------------------------------------------------------------------

    torch.manual_seed(spec.data.synthetic.seed + env.rank)  # dropout-like randomness differs by rank
    model = models.build(spec.model, spec.data.synthetic).to(device)
    dataset = data.SyntheticDataset(spec.data.synthetic, models.input_spec(spec.model, spec.data.synthetic, model),
                                    shard=slot.index, shards=len(trial.worker_slots()))
    slow = straggler.Straggler(slowdown, device)
    timer = timing.IterationTimer(env.rank, device, trace_steps, label=f"rank {env.rank} ({slot.hostname})")
    # Hook order matters: the straggler delays a gradient before the timer and the synchronizer see it.
    slow.attach(model)
    timer.watch_layers(model)
    synchronizer.attach(model, optimizers.factory(spec.model.optimizer))
    model.train()

    try:
        for step in range(iterations):
            timer.begin(step)

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
                model.zero_grad(set_to_none=True)
                loss.backward()
                slow.stretch()

            # communicate, wait, update: the synchronizer times its own phases
            synchronizer.synchronize(step, timer)

            # time and log: finish() is the iteration's one device sync, after which loss.item() is free
            metrics = timer.finish()
            metrics[keys.LOSS] = loss.item()
            recorder.log_iteration(step, metrics)
            if (step + 1) % progress_every == 0 or step + 1 == iterations:
                print(progress.progress_line(step + 1, iterations, metrics[keys.LOSS],
                                             metrics[keys.TIME_ITERATION]), flush=True)
    finally:
        # stop: release the peers even when this rank fails, so nobody waits for it longer than needed
        synchronizer.close()
    recorder.write_trace(timer.trace())
    recorder.write_layers(timer.layers())
    recorder.summary_extras["parameterDigest"] = models.digest(model)
