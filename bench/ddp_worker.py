"""One rank of the PyTorch DDP baseline of bench_ring_vs_ddp.py: the same trial, trained by DistributedDataParallel.

Started by bench_ring_vs_ddp.py, once per rank, with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
RINGLEADER_TRIAL_FILE / RINGLEADER_OUTPUT_DIR set as for a ringleader rank. By hand, from the repository root:

    for rank in 0 1; do RANK=$rank WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29511 GLOO_SOCKET_IFNAME=lo \
      OMP_NUM_THREADS=1 RINGLEADER_TRIAL_FILE=/tmp/trial.json RINGLEADER_OUTPUT_DIR=/tmp/ddp \
      .venv/bin/python bench/ddp_worker.py & done; wait

Same model, data shard, optimizer, batch, iterations, seeds and intra-op threads as ringleader's
worker (runtime/worker.py, main.py's cpu_threads); gloo; DDP's default 25 MiB buckets, as ringleader's.
Writes <output>/ddp-rank-<r>.json: {"rank", "iterationSeconds": [...]} timed the way ringleader's
timer times an iteration (from the end of the previous one to the end of this one, loss.item() included).
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

import harness  # noqa: F401  (puts operator/ on sys.path)
from ringleader.contract import environment as contract
from ringleader.runtime import data, main, models, optimizers


def train() -> None:
    # -----------------------------------------------------------------------------------------
    # configuration: the trial file ringleader's ranks read, so nothing can differ by accident
    env = contract.PodEnvironment.from_environ()
    rank, world = env.rank, env.world_size
    trial = main.load_trial(env.trial_file)
    output = pathlib.Path(env.output_dir)
    spec = trial.spec
    slot = trial.slots()[rank]
    iterations, batch_size = spec.model.iterations, spec.model.batch_size
    # -----------------------------------------------------------------------------------------

    torch.set_num_threads(main.cpu_threads(slot))
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    torch.manual_seed(spec.data.synthetic.seed + rank)
    model = models.build(spec.model, spec.data.synthetic)
    dataset = data.SyntheticDataset(spec.data.synthetic, models.input_spec(spec.model, spec.data.synthetic, model),
                                    shard=slot.index, shards=len(trial.worker_slots()))
    ddp = parallel.DistributedDataParallel(model)  # bucket_cap_mb=25 by default, as RINGLEADER_BUCKET_BYTES
    optimizer = optimizers.factory(spec.model.optimizer)(ddp.parameters())
    ddp.train()

    seconds = []
    last = time.perf_counter()
    for step in range(iterations):
        inputs, labels = dataset.batch(step, batch_size)  # (B, 3, H, W), (B,)
        loss = models.loss(ddp(inputs), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # DDP's bucket hooks allreduce during backward and wait for all at its end
        optimizer.step()
        loss.item()
        now = time.perf_counter()
        seconds.append(now - last)
        last = now

    output.mkdir(parents=True, exist_ok=True)
    (output / f"ddp-rank-{rank}.json").write_text(json.dumps({"rank": rank, "iterationSeconds": seconds}))
    dist.destroy_process_group()


if __name__ == "__main__":
    train()
    sys.exit(0)
