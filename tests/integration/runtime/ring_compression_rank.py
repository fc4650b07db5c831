"""One rank of test_ring_compression.py: RingSynchronizer under each spec.compression method, beside a reference
average of the same gradients (plain allreduce), on gloo.

Run as a script, once per rank, with RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1 and MASTER_PORT set; writes
<argv[1]>/rank-<r>.json: per method and iteration, the averaged gradient's distance from the reference, the
weights (for the ranks to compare), and what the timer recorded.
"""

from __future__ import annotations

import copy
import datetime
import json
import os
import pathlib
import sys

import torch
import torch.distributed as dist

from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.contract import environment as contract
from ringleader.contract import keys
from ringleader.runtime import optimizers, ring, timing

METHODS = ("None", "FP16", "BF16", "PowerSGD", "TopK")
ITERATIONS = 4


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def run(method: str, rank: int, world: int, output: pathlib.Path) -> list[dict]:
    spec = spec_.ExperimentSpec.model_validate({
        "architecture": "RingAllReduce", "workers": {"replicas": world},
        "compression": {"method": method, "rank": 2, "ratio": 0.1}, "model": {"optimizer": {"learningRate": 0.1}}})
    trial = trial_.Trial(experiment="compression", name="compression-0", index=0, spec=spec)
    env = contract.PodEnvironment("worker", rank, world, "127.0.0.1", 1, "trial.json", str(output))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4))
    synchronizer = ring.RingSynchronizer(trial, env, torch.device("cpu"), bucket_bytes=2048)
    synchronizer.attach(model, optimizers.factory(spec.model.optimizer))
    timer = timing.IterationTimer(rank, torch.device("cpu"))
    iterations = []
    for step in range(ITERATIONS):
        generator = torch.Generator().manual_seed(100 * step + rank)
        inputs, labels = torch.randn(16, 8, generator=generator), torch.randint(0, 4, (16,), generator=generator)
        # the reference: this step's gradients on the same weights, averaged by a plain allreduce
        reference = copy.deepcopy(model)
        torch.nn.functional.cross_entropy(reference(inputs), labels).backward()
        expected = flat(p.grad for p in reference.parameters())
        dist.all_reduce(expected)
        expected /= world

        timer.begin(step)
        with timer.phase(keys.TIME_BACKWARD):  # as worker.py times it: the hooks encode inside
            synchronizer.backward(torch.nn.functional.cross_entropy(model(inputs), labels))
        synchronizer.synchronize(step, timer)
        metrics = timer.finish()
        averaged = flat(p.grad for p in model.parameters())
        iterations.append({
            "relativeError": float((averaged - expected).norm() / expected.norm()),
            "gradient": averaged.tolist(),
            "weights": flat(model.parameters()).tolist(),
            "sent": metrics[keys.BYTES_SENT], "uncompressed": metrics[keys.BYTES_UNCOMPRESSED],
            "codec": metrics[keys.TIME_CODEC], "backward": metrics[keys.TIME_BACKWARD],
        })
    synchronizer.close()
    return iterations


def main(output: pathlib.Path) -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=30))
    report = {method: run(method, rank, world, output) for method in METHODS}
    output.mkdir(parents=True, exist_ok=True)
    (output / f"rank-{rank}.json").write_text(json.dumps(report))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
