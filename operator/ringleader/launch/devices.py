"""Which GPU each local rank gets, and the trials `ringleader run` refuses for want of GPUs; cli.py and trials.py call
it.

On a cluster the device plugin gives each pod its own GPUs, which its ranks share, one each (`cuda:LOCAL_RANK`).
Locally every rank sees every GPU, and a rank left to pick its own would share one with a peer: NCCL refuses two
ranks of a communicator on one device. So the launcher hands out the visible GPUs, `resources.gpu` of them per
pod in rank order, through the CUDA_VISIBLE_DEVICES of each of the pod's ranks, as the device plugin would. The
ring's NCCL needs its own device per rank: a ring asking for more GPUs than are visible is refused before
anything starts. Parameter servers and peers exchange over gloo, so their
GPU workers may share devices (round robin) when there are fewer GPUs than asked for.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from ringleader.api.trial import Trial
from ringleader.api import variants

VISIBLE = "CUDA_VISIBLE_DEVICES"


def visible(environ: Mapping[str, str], trials: Sequence[Trial]) -> list[str]:
    """The GPUs this run may use, as CUDA_VISIBLE_DEVICES names them: the user's own list when set, else every
    device torch sees (torch is imported only when a trial asks for a GPU: it takes seconds)."""
    if not any(slot.resources.gpu > 0 for t in trials for slot in t.slots()):
        return []
    if VISIBLE in environ:
        return [name.strip() for name in environ[VISIBLE].split(",") if name.strip()]
    import torch

    return [str(index) for index in range(torch.cuda.device_count())] if torch.cuda.is_available() else []


def _nccl(trial: Trial) -> bool:
    return variants.ARCHITECTURES[trial.spec.architecture].nccl


def _asked(trial: Trial) -> int:
    """The GPUs the trial's pods ask for together: `resources.gpu` per pod, whatever its ranks."""
    return sum(ranks[0].resources.gpu for ranks in trial.pods())


def assign(trial: Trial, gpus: Sequence[str]) -> dict[int, str]:
    """{rank: its CUDA_VISIBLE_DEVICES} for the ranks that ask for GPUs: `resources.gpu` devices per pod, shared by
    its ranks, in rank order, round robin when there are fewer (never for the ring: see refusal). {} without
    visible GPUs."""
    if not gpus:
        return {}
    assigned, next_gpu = {}, 0
    for ranks in trial.pods():
        count = ranks[0].resources.gpu
        if count > 0:
            devices = ",".join(gpus[(next_gpu + i) % len(gpus)] for i in range(count))
            assigned.update({slot.rank: devices for slot in ranks})
            next_gpu += count
    return assigned


def refusal(source: str, trials: Sequence[Trial], gpus: Sequence[str]) -> str | None:
    """Why the run cannot start for want of GPUs (one line, with the alternatives), or None."""
    for trial in trials:
        asked = _asked(trial)
        if not (asked and _nccl(trial) and asked > len(gpus)):
            continue
        here = f"{len(gpus)} {'is' if len(gpus) == 1 else 'are'} visible here"
        if gpus:
            here += f" ({VISIBLE}={','.join(gpus)})"
        per_pod = max(slot.resources.gpu for slot in trial.worker_slots())
        fewer = len(gpus) // per_pod * trial.spec.workers.pod_ranks
        ways = [f"run {fewer} worker{'s' * (fewer != 1)} (`workers.replicas: {fewer}`)"] if fewer else []
        ways.append("set `workers.resources.gpu: 0` to run the ring on gloo on the CPU")
        instead = ", or ".join(ways)
        return (f"{source}: trial {trial.name} runs the ring on NCCL, which needs a GPU of its own per rank: it "
                f"asks for {asked} GPUs and {here}. {instead[0].upper()}{instead[1:]}")
    return None
