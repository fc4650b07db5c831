"""One rank of test_ring_buckets.py: RingSynchronizer beside a reference (plain backward, allreduce, divide), on gloo.

Run as a script, once per rank, with RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1 and MASTER_PORT set; writes
<argv[1]>/rank-<r>.json with what the test asserts: the ring's gradients and weights against the reference's,
whether every gradient is still a view of its bucket, and the arrival stamps, iteration by iteration.
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
from ringleader.runtime import optimizers, ring, settings, timing

ITERATIONS = 4
SET_TO_NONE_AT = 2  # this iteration starts from gradients set to None, as model.zero_grad() would leave them


class Branchy(torch.nn.Module):
    """Two layers every rank uses, a head only rank 0 uses, and one nobody uses."""

    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32))
        self.rank0_head = torch.nn.Linear(32, 4)
        self.unused = torch.nn.Linear(32, 4)
        self.head = torch.nn.Linear(32, 4)

    def forward(self, x, rank: int):  # x: (B, 8) -> (B, 4)
        hidden = self.body(x)
        out = self.head(hidden)
        return out + self.rank0_head(hidden) if rank == 0 else out


def main(output: pathlib.Path) -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=30))
    spec = spec_.ExperimentSpec.model_validate({
        "architecture": "RingAllReduce", "workers": {"replicas": world},
        "model": {"optimizer": {"learningRate": 0.1, "momentum": 0.9, "weightDecay": 0.01}}})
    trial = trial_.Trial(experiment="buckets", name="buckets-0", index=0, spec=spec)
    env = contract.PodEnvironment("worker", rank, world, "127.0.0.1", 1, "trial.json", str(output))
    torch.manual_seed(rank)  # different initial weights: attach() must make them the same
    model = Branchy()
    synchronizer = ring.RingSynchronizer(trial, env, torch.device("cpu"), knobs=settings.RankSettings(bucket_bytes=512))
    synchronizer.attach(model, optimizers.factory(spec.model.optimizer))
    reference = copy.deepcopy(model)  # the weights after attach's broadcast
    reference_optimizer = optimizers.factory(spec.model.optimizer)(reference.parameters())
    parameters, reference_parameters = list(model.parameters()), list(reference.parameters())
    timer = timing.IterationTimer(rank, torch.device("cpu"))
    report = {"rank": rank, "bucketBytes": [b.bytes for b in synchronizer.buckets], "iterations": []}

    for step in range(ITERATIONS):
        generator = torch.Generator().manual_seed(100 * step + rank)
        inputs, labels = torch.randn(16, 8, generator=generator), torch.randint(0, 4, (16,), generator=generator)

        # the ring, as worker.py drives it
        if step == SET_TO_NONE_AT:
            model.zero_grad(set_to_none=True)
        timer.begin(step)
        synchronizer.backward(torch.nn.functional.cross_entropy(model(inputs, rank), labels))
        synchronizer.synchronize(step, timer)
        timer.finish()

        # the reference: plain gradients, summed by one allreduce each, divided, then the same optimizer
        reference.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(reference(inputs, rank), labels).backward()
        for parameter in reference_parameters:
            if parameter.grad is None:
                parameter.grad = torch.zeros_like(parameter)
            dist.all_reduce(parameter.grad)
            parameter.grad.div_(world)
        reference_optimizer.step()

        report["iterations"].append({
            "gradientDifference": max((p.grad - r.grad).abs().max().item()
                                      for p, r in zip(parameters, reference_parameters)),
            "weightDifference": max((p - r).abs().max().item() for p, r in zip(parameters, reference_parameters)),
            "gradientsAreBucketViews": all(
                p.grad.data_ptr() == bucket.grads[i].data_ptr()
                for bucket in synchronizer.buckets for i, p in enumerate(bucket.parameters)),
            "unusedGradientIsZero": bool((model.unused.weight.grad == 0).all()),
            "rank0HeadGradient": model.rank0_head.weight.grad.abs().sum().item(),
            "arrivalStamps": synchronizer.buckets[-1].stamps.tolist(),
        })
    synchronizer.close()
    output.mkdir(parents=True, exist_ok=True)
    (output / f"rank-{rank}.json").write_text(json.dumps(report))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
    # Leave as `python -m ringleader.runtime` does, without interpreter finalization: a thread still inside a
    # TCPStore call when the interpreter tears down aborts the process ("terminate called without an active
    # exception"), a finished rank turned failed on a busy machine. The report is written by now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
