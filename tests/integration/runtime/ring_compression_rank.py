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
from ringleader.runtime import compression, optimizers, ring, settings, timing

METHODS = ("None", "FP16", "BF16", "PowerSGD", "TopK")
# Without error feedback PowerSGD is a function of the summed gradients alone (its factors are sums): on two ranks
# it must give what one codec gives on the average. Run as a sixth method.
POWER_SGD_ALONE = "PowerSGD without error feedback"
ITERATIONS = 4


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def run(method: str, rank: int, world: int, output: pathlib.Path) -> list[dict]:
    alone = method == POWER_SGD_ALONE
    spec = spec_.ExperimentSpec.model_validate({
        "architecture": "RingAllReduce", "workers": {"replicas": world},
        "compression": {"method": "PowerSGD" if alone else method, "rank": 2, "ratio": 0.1,
                        "errorFeedback": not alone},
        "model": {"optimizer": {"learningRate": 0.1}}})
    trial = trial_.Trial(experiment="compression", name="compression-0", index=0, spec=spec)
    env = contract.PodEnvironment("worker", rank, world, "127.0.0.1", 1, "trial.json", str(output))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4))
    synchronizer = ring.RingSynchronizer(trial, env, torch.device("cpu"),
                                         knobs=settings.RankSettings(bucket_bytes=2048))
    synchronizer.attach(model, optimizers.factory(spec.model.optimizer))
    # one codec per bucket, seeded as the ring seeds its own, fed the reference average
    local = [compression.bucket_codec(spec.compression, [p.shape for p in bucket.parameters],
                                      spec.data.synthetic.seed + bucket.index, 1) for bucket in synchronizer.buckets]
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
        if alone:
            expected = alone_on(expected, synchronizer.buckets, local, list(model.parameters()))

        timer.begin(step)
        with timer.phase(keys.TIME_BACKWARD):  # as worker.py times it: the hooks encode inside
            synchronizer.backward(torch.nn.functional.cross_entropy(model(inputs), labels))
        synchronizer.synchronize(step, timer)
        metrics = timer.finish()
        averaged = flat(p.grad for p in model.parameters())
        codecs = [bucket.codec for bucket in synchronizer.buckets]
        error = in_model_order([codec.error for codec in codecs], synchronizer.buckets, list(model.parameters())) \
            if getattr(codecs[0], "error", None) is not None else None
        iterations.append({
            "expected": expected.tolist(), "error": None if error is None else error.tolist(),
            "relativeError": float((averaged - expected).norm() / expected.norm()),
            "gradient": averaged.tolist(),
            "weights": flat(model.parameters()).tolist(),
            "sent": metrics[keys.BYTES_SENT], "uncompressed": metrics[keys.BYTES_UNCOMPRESSED],
            "codec": metrics[keys.TIME_CODEC], "backward": metrics[keys.TIME_BACKWARD],
        })
    synchronizer.close()
    return iterations


def in_model_order(per_bucket: list[torch.Tensor], buckets, parameters) -> torch.Tensor:
    """Flat tensors of the buckets (each in its parameters' order) as one flat tensor in model order."""
    pieces = {id(p): value for bucket, values in zip(buckets, per_bucket)
              for p, value in zip(bucket.parameters, values.split([p.numel() for p in bucket.parameters]))}
    return torch.cat([pieces[id(p)] for p in parameters])


def alone_on(average: torch.Tensor, buckets, codecs, parameters) -> torch.Tensor:
    """What PowerSGD's codecs make of `average` (model order) on one rank, back in model order."""
    position = {id(p): i for i, p in enumerate(parameters)}
    pieces = list(average.split([p.numel() for p in parameters]))
    for bucket, codec in zip(buckets, codecs):
        flat_bucket = torch.cat([pieces[position[id(p)]] for p in bucket.parameters])
        current = codec.encode(flat_bucket)
        while current is not None:  # one rank: each sum is the payload itself
            current = codec.advance(current)
        codec.decode(flat_bucket)
        for p, value in zip(bucket.parameters, flat_bucket.split([p.numel() for p in bucket.parameters])):
            pieces[position[id(p)]] = value
    return torch.cat(pieces)


def main(output: pathlib.Path) -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=30))
    report = {method: run(method, rank, world, output) for method in METHODS + (POWER_SGD_ALONE,)}
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
