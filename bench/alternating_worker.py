"""One rank of bench_ring_vs_ddp.py's alternating comparison: ringleader's ring and DDP, iteration by iteration, in one
process.

Started by bench_ring_vs_ddp.py (once per rank, environment as for ddp_worker.py). By hand:

    for rank in 0 1; do RANK=$rank WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29512 GLOO_SOCKET_IFNAME=lo \
      OMP_NUM_THREADS=1 RINGLEADER_TRIAL_FILE=/tmp/trial.json RINGLEADER_OUTPUT_DIR=/tmp/alt \
      .venv/bin/python bench/alternating_worker.py & done; wait

Two identical models (same seed) train side by side: one the way runtime/worker.py trains it
(IterationTimer phases and layer hooks, RingSynchronizer, RankRecorder), one under
DistributedDataParallel; each step runs one iteration of each, the order alternating by step, on
the same process group. A load spike on the shared machine lasts many iterations, so it hits both
alike, which separate runs cannot promise. Writes <output>/alternating-rank-<r>.json:
{"rank", "ring": [...], "ddp": [...]} seconds per iteration, by a clock outside both, and
{"phases": {"ring": {phase: [...]}, "ddp": {phase: [...]}}}: forward, backward (DDP's includes the
wait for its last buckets), comm (the ring's exposed wait after backward: its time/comm + time/wait) and
update, per iteration.
"""

from __future__ import annotations

import datetime
import json
import pathlib
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.parallel as parallel

import harness
from ringleader.api import constants
from ringleader.contract import environment as contract
from ringleader.contract import keys, records
from ringleader.runtime import data, main, models, optimizers, ring, settings, timing


def train() -> None:
    # -----------------------------------------------------------------------------------------
    # configuration: the same trial file ringleader's ranks read
    env = contract.PodEnvironment.from_environ()
    rank, world = env.rank, env.world_size
    trial = main.load_trial(env.trial_file)
    output = pathlib.Path(env.output_dir)
    spec = trial.spec
    slot = trial.slots()[rank]
    iterations, batch_size, warmup = spec.model.iterations, spec.model.batch_size, spec.model.warmup_iterations
    # -----------------------------------------------------------------------------------------

    torch.set_num_threads(main.cpu_threads(slot))
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=harness.PEER_TIMEOUT_SECONDS))
    cpu = torch.device("cpu")
    torch.manual_seed(spec.data.synthetic.seed + rank)
    ring_model = models.build(spec.model, spec.data.synthetic)
    ddp_model = parallel.DistributedDataParallel(models.build(spec.model, spec.data.synthetic))
    dataset = data.SyntheticDataset(spec.data.synthetic, models.input_spec(spec.model, spec.data.synthetic, ring_model),
                                    shard=slot.index, shards=len(trial.worker_slots()))
    timer = timing.IterationTimer(rank, cpu, range(warmup, warmup + settings.RankSettings().trace_iterations))
    timer.watch_layers(ring_model)
    synchronizer = ring.RingSynchronizer(trial, env, cpu)
    synchronizer.attach(ring_model, optimizers.factory(spec.model.optimizer))
    ddp_optimizer = optimizers.factory(spec.model.optimizer)(ddp_model.parameters())
    recorder = records.RankRecorder(output / "records", trial.name, rank, constants.ROLE_WORKER, warmup)
    seconds: dict[str, list[float]] = {"ring": [], "ddp": []}
    phases: dict[str, dict[str, list[float]]] = {"ring": {}, "ddp": {}}

    def note(variant: str, phase: str, value: float) -> None:
        phases[variant].setdefault(phase, []).append(value)

    def ring_iteration(step: int) -> None:
        # runtime/worker.py's iteration
        started = time.perf_counter()
        timer.begin(step)
        with timer.phase(keys.TIME_DATA):
            inputs, labels = dataset.batch(step, batch_size)  # (B, 3, H, W), (B,)
        with timer.phase(keys.TIME_FORWARD):
            loss = models.loss(ring_model(inputs), labels)
        with timer.phase(keys.TIME_BACKWARD):
            synchronizer.backward(loss)  # the ring's hooks launch bucket allreduces here
        synchronizer.synchronize(step, timer)
        metrics = timer.finish()
        metrics[keys.LOSS] = loss.item()
        recorder.log_iteration(step, metrics)
        seconds["ring"].append(time.perf_counter() - started)
        for phase, key in (("forward", keys.TIME_FORWARD), ("backward", keys.TIME_BACKWARD),
                           ("update", keys.TIME_UPDATE)):
            note("ring", phase, metrics[key])
        note("ring", "comm", metrics[keys.TIME_COMM] + metrics[keys.TIME_WAIT])  # DDP's waits are all in backward

    def ddp_iteration(step: int) -> None:
        started = time.perf_counter()
        inputs, labels = dataset.batch(step, batch_size)
        forward = time.perf_counter()
        loss = models.loss(ddp_model(inputs), labels)
        backward = time.perf_counter()
        ddp_optimizer.zero_grad(set_to_none=True)
        loss.backward()  # DDP allreduces its buckets here and waits for them at the end
        update = time.perf_counter()
        ddp_optimizer.step()
        ended = time.perf_counter()
        loss.item()
        seconds["ddp"].append(time.perf_counter() - started)
        note("ddp", "forward", backward - forward)
        note("ddp", "backward", update - backward)
        note("ddp", "comm", 0.0)  # inside backward: DDP waits for its buckets before backward returns
        note("ddp", "update", ended - update)

    for step in range(iterations):
        first, second = (ring_iteration, ddp_iteration) if step % 2 == 0 else (ddp_iteration, ring_iteration)
        first(step)
        second(step)
    recorder.close()
    synchronizer.close()
    output.mkdir(parents=True, exist_ok=True)
    (output / f"alternating-rank-{rank}.json").write_text(json.dumps({"rank": rank, **seconds, "phases": phases}))
    dist.destroy_process_group()


if __name__ == "__main__":
    train()
    sys.exit(0)
