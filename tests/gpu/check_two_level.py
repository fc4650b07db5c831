"""The two-level collectives on NCCL, in one short run on a machine with 2 or more GPUs (run by hand: CI has none).

UNVERIFIED where it was written (no GPU): runtime/hierarchical_ring.py's TwoLevelRing and
runtime/pod_aggregation.py's messages inside a pod on CUDA tensors, NCCL groups per level. One process per GPU,
rank r on cuda:r, the world in pods of k ranks (k = 2 when there are 4 or more GPUs, else 1: one GPU a rank,
NCCL refuses two ranks on one); it checks, and exits 1 naming what failed:

    1. TwoLevelRing's sum of odd-sized CUDA tensors (fewer elements than ranks too) equals torch.distributed's
       allreduce, and the bytes it says each rank sends are the model's (2(k-1)/k inside, 2(P-1)/P * S/k across)
    2. RingSynchronizer with it, on a small model for 3 iterations, ends with the weights of the flat ring's
    3. the pod's point-to-point messages (a gradient to the pod's first rank, the weights back), as
       pod_aggregation.py sends them, arrive intact on CUDA

    python tests/gpu/check_two_level.py            # from the repository root, on the GPU machine (about 30 s)
    python tests/gpu/check_two_level.py --cpu      # the same checks on gloo, 4 CPU ranks in pods of 2 (what ran here)

Then, for the whole path (`ringleader run`, the pods' cards, the records), on 4 GPUs:
    ringleader run examples/two-level.yaml  with  workers.resources.gpu: 2
"""

from __future__ import annotations

import copy
import datetime
import os
import pathlib
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "operator"))

from ringleader.api import spec as spec_  # noqa: E402
from ringleader.api import trial as trial_  # noqa: E402
from ringleader.contract import environment as contract  # noqa: E402
from ringleader.contract import levels as levels_  # noqa: E402
from ringleader.runtime import compression, hierarchical_ring, optimizers, pod_aggregation, ring, settings  # noqa: E402
from ringleader.runtime import timing  # noqa: E402


def trial(architecture: str, world: int, k: int) -> trial_.Trial:
    spec = spec_.ExperimentSpec.model_validate({"architecture": architecture,
                                                "workers": {"replicas": world, "ranksPerPod": k,
                                                            "resources": {"gpu": k}}})
    return trial_.Trial(experiment="nccl", name="nccl-0", index=0, spec=spec)


def check(rank: int, world: int, k: int, port: int, cuda: bool) -> None:
    if cuda:
        torch.cuda.set_device(rank)
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    dist.init_process_group("cpu:gloo,cuda:nccl" if cuda else "gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    hierarchical = trial("HierarchicalRingAllReduce", world, k)
    levels = levels_.Levels.of(hierarchical)
    collective = hierarchical_ring.TwoLevelRing(hierarchical, rank, levels, device, 60.0)

    # 1. the sum, against NCCL's allreduce; the bytes each rank says it sends
    for numel in (1, world - 1, 1001, 262_147):
        tensor = torch.randn(max(numel, 1), device=device, generator=torch.Generator(device).manual_seed(rank + numel))
        expected = tensor.clone()
        dist.all_reduce(expected)
        collective.launch(compression.Round(tensor)).wait()
        assert torch.allclose(tensor, expected, rtol=1e-5, atol=1e-5), f"the two-level sum of {numel} elements differs"
        said = collective.traffic(tensor.numel() * 4, 4)
        pods = world // k
        assert abs(said.by_level[levels_.POD] - 2 * (k - 1) / k * tensor.numel() * 4) <= 8 * k, said
        assert abs(said.sent - said.by_level[levels_.POD] - 2 * (pods - 1) / pods * tensor.numel() * 4 / k) <= 8 * k

    # 2. a few iterations of the ring with it, against the flat ring
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).to(device)
    flat_model = copy.deepcopy(model)
    env = contract.PodEnvironment("worker", rank, world, "127.0.0.1", port, "trial.json", "/tmp/nccl-check")
    knobs = settings.RankSettings(bucket_bytes=4096)
    two_level = ring.RingSynchronizer(hierarchical, env, device, knobs, levels, collective=collective)
    flat = ring.RingSynchronizer(trial("RingAllReduce", world, k), env, device, knobs)
    optimizer = optimizers.factory(hierarchical.spec.model.optimizer)
    for synchronizer, net in ((two_level, model), (flat, flat_model)):
        synchronizer.attach(net, optimizer)
        for step in range(3):
            timer = timing.IterationTimer(rank, device)
            timer.begin(step)
            inputs = torch.randn(16, 32, device=device, generator=torch.Generator(device).manual_seed(rank * 10 + step))
            synchronizer.backward(net(inputs).square().mean())
            synchronizer.synchronize(step, timer)
            timer.finish()
    for a, b in zip(model.parameters(), flat_model.parameters()):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6), "the two-level ring trained away from the flat one"
    two_level.close()
    flat.close()

    # 3. the pod's messages on CUDA: every rank's gradient to its pod's first, the first's weights back
    pod = levels.pod(rank)
    gradient = torch.full((1000,), float(rank), device=device)
    if rank == pod[0]:
        received = [torch.empty_like(gradient) for _ in pod[1:]]
        for work in [dist.irecv(buffer, other, tag=pod_aggregation.TAG_GRADIENT)
                     for buffer, other in zip(received, pod[1:])]:
            work.wait()
        assert all(torch.all(buffer == other) for buffer, other in zip(received, pod[1:])), "a gradient arrived wrong"
        for work in [dist.isend(gradient, other, tag=pod_aggregation.TAG_WEIGHTS) for other in pod[1:]]:
            work.wait()
    else:
        dist.isend(gradient, pod[0], tag=pod_aggregation.TAG_GRADIENT).wait()
        weights = torch.empty_like(gradient)
        dist.irecv(weights, pod[0], tag=pod_aggregation.TAG_WEIGHTS).wait()
        assert torch.all(weights == pod[0]), "the weights arrived wrong"
    if cuda:
        torch.cuda.synchronize(device)
    dist.barrier()
    if rank == 0:
        print(f"ok: {world} ranks on {'NCCL' if cuda else 'gloo'}, pods of {k}: two-level sums, ring training and the "
              "pod's messages agree")
    dist.destroy_process_group()


TIMEOUT_SECONDS = 300


def main(argv: list[str]) -> int:
    cuda = "--cpu" not in argv
    gpus = torch.cuda.device_count() if cuda else 4
    if gpus < 2:
        print(f"needs 2 or more GPUs, found {gpus} (--cpu runs the checks on gloo)", file=sys.stderr)
        return 2
    k = 2 if gpus >= 4 else 1
    world = gpus - gpus % k
    port = 29000 + os.getpid() % 1000
    context = mp.start_processes(check, args=(world, k, port, cuda), nprocs=world, join=False, start_method="spawn")
    deadline = time.monotonic() + TIMEOUT_SECONDS
    try:
        while not context.join(timeout=max(1.0, deadline - time.monotonic())):  # True once every rank is done
            if time.monotonic() > deadline:
                for process in context.processes:
                    process.kill()
                print(f"failed: not done within {TIMEOUT_SECONDS} s (a collective hangs)", file=sys.stderr)
                return 1
    except mp.ProcessRaisedException as error:
        print(f"failed: {str(error).strip().splitlines()[-1]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
