"""HierarchicalRingAllReduce (Horovod's hierarchical allreduce): the ring's synchronizer with a two-level collective.

main.py gives each worker `synchronizer(trial, env, device, knobs, levels)`: ring.RingSynchronizer (its buckets,
their launch from backward's hooks, the arrival stamps, the emulated card) summing each bucket with `TwoLevelRing`,
k ranks to a pod and P pods (api/trial.py), in three steps:

    reduce-scatter  inside the pod, a ring of its k ranks in k-1 steps: local rank i ends with the pod's sum of
                    chunk (i+1) mod k of the bucket; it sent every other chunk once to local rank i+1
    allreduce       across pods, of that chunk, among the P ranks of local index i (k rings, one per index, all
                    through the pod's one card): 2(P-1)/P of the chunk to the next pod's rank of index i
    allgather       inside the pod, the same ring: every chunk reaches every rank of the pod

So a rank sends 2(k-1)/k * S inside its pod and 2(P-1)/P * S/k across pods per bucket of S bytes, and its pod's card
carries 2(P-1)/P * S (the flat ring, pods in rank order: 2(N-1)/N * S). The steps inside the pod are point-to-point
sends on the pod's group (gloo's reduce-scatter is an allreduce underneath, which would send twice as much; on GPU the
pod's group is NCCL's, over NVLink or PCIe), the allreduce is torch.distributed's on the index's group. With one
rank per pod the steps inside are empty and the allreduce spans every worker: the flat ring. With one pod there is
nothing across.

A bucket's three steps run one after another on a thread of this rank (gloo's waits block, and every rank must
issue each group's collectives in one order: a FIFO of buckets keeps it), so the first buckets' steps overlap the
rest of backward as the flat ring's allreduces do. The thread notes when each step ran: `split` tells the part of
time/comm spent across pods (and on the card's pacing) from the part inside (time/comm_inter, time/comm_intra).
On GPU every step ends with a sync of the thread's stream, so that those times are the device's.
"""

from __future__ import annotations

import contextlib
import datetime
import queue
import threading
import time
from typing import Iterator

import torch
import torch.distributed as dist

from ringleader.api import constants
from ringleader.api.trial import Trial
from ringleader.contract import environment as contract
from ringleader.contract import keys
from ringleader.contract import levels as levels_
from ringleader.runtime import compression, ring, settings

INTRA, INTER = "intra", "inter"


class Job:
    """One tensor's hierarchical allreduce, done by the communication thread: a work ring.py waits on."""

    def __init__(self, tensor: torch.Tensor, timeout_seconds: float):
        self.tensor = tensor
        self.timeout = timeout_seconds
        self.future: torch.futures.Future = torch.futures.Future()
        self.done = threading.Event()
        self.error: BaseException | None = None

    def get_future(self) -> torch.futures.Future:
        return self.future

    def wait(self) -> bool:
        if not self.done.wait(self.timeout):
            raise RuntimeError(f"the hierarchical allreduce took longer than {self.timeout:.0f}s "
                               "(RINGLEADER_TIMEOUT_SECONDS): a rank of the pod or of another pod hangs")
        if self.error is not None:
            raise RuntimeError(f"the hierarchical allreduce failed: {self.error}") from self.error
        return True

    def finish(self, error: BaseException | None = None) -> None:
        self.error = error
        self.done.set()
        if error is None:
            self.future.set_result(None)
        else:
            self.future.set_exception(error)


class TwoLevelRing:
    """ring.Collective: reduce-scatter inside the pod, allreduce across pods by local index, allgather inside."""

    def __init__(self, trial: Trial, rank: int, levels: levels_.Levels, device: torch.device, timeout_seconds: float):
        pods = [[slot.rank for slot in pod] for pod in trial.pods() if pod[0].role == constants.ROLE_WORKER]
        timeout = datetime.timedelta(seconds=timeout_seconds)
        # Every rank makes every group, in one order: torch.distributed creates groups collectively.
        pod_groups = [dist.new_group(ranks=pod, timeout=timeout) for pod in pods]
        index_groups = [dist.new_group(ranks=[pod[i] for pod in pods], timeout=timeout) for i in range(len(pods[0]))]
        mine = next(p for p, pod in enumerate(pods) if rank in pod)
        self.pod = pods[mine]
        self.k, self.pods = len(self.pod), len(pods)
        self.local = self.pod.index(rank)
        self.next, self.previous = self.pod[(self.local + 1) % self.k], self.pod[(self.local - 1) % self.k]
        self.pod_group, self.index_group = pod_groups[mine], index_groups[self.local]
        self.across = levels.between(rank, pods[(mine + 1) % self.pods][self.local])  # the next pod's rank of my index
        self.device = device
        self.timeout = timeout_seconds
        self.jobs: queue.Queue[Job | None] = queue.Queue()
        self.steps: list[tuple[str, float, float]] = []  # (INTRA or INTER, start, end) since the last split
        self.thread: threading.Thread | None = None

    # -- ring.Collective -------------------------------------------------------------------------

    def launch(self, round_: compression.Round) -> Job:
        if round_.gather:
            raise ValueError("the hierarchical ring sums; a gathering codec (TopK) needs RingAllReduce")
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, daemon=True, name="ringleader-hierarchical-ring")
            self.thread.start()
        job = Job(round_.payload, self.timeout)
        self.jobs.put(job)
        return job

    def traffic(self, nbytes: float, element_size: int = 4, gather: bool = False) -> ring.RoundTraffic:
        """By chunk: inside, every chunk but the one this rank ends the reduce-scatter with (i+1) and the one it
        receives first in the allgather (i+2); across, its chunk's 2(P-1)/P. The card: every index's chunk across."""
        chunks = chunk_bytes(nbytes, element_size, self.k)
        share = 2.0 * (self.pods - 1) / self.pods
        by_level = levels_.empty()
        if self.k > 1:
            by_level[levels_.POD] += 2 * nbytes - chunks[(self.local + 1) % self.k] - chunks[(self.local + 2) % self.k]
        by_level[self.across] += share * chunks[(self.local + 1) % self.k]  # nothing with one pod
        return ring.RoundTraffic(by_level, share * nbytes)

    def split(self, start: float, end: float, paced_from: float) -> dict[str, float]:
        inter = sum(_overlap(start, end, s, e) for level, s, e in self.steps if level == INTER)
        inter += _overlap(start, end, paced_from, end)  # the card's pacing: bytes across pods
        self.steps = [step for step in self.steps if step[2] > end]
        total = max(0.0, end - start)
        return {keys.TIME_COMM_INTER: min(inter, total), keys.TIME_COMM_INTRA: max(0.0, total - inter)}

    def close(self) -> None:
        if self.thread is not None:
            self.jobs.put(None)
            self.thread.join(self.timeout)
            self.thread = None

    # -- the communication thread --------------------------------------------------------------

    def _run(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        while (job := self.jobs.get()) is not None:
            try:
                self._allreduce(job.tensor)
            except BaseException as error:  # noqa: BLE001 - the waiting rank raises it, naming the collective
                job.finish(error)
                return  # a failed step leaves the groups out of step: nothing after it can match
            job.finish()

    def _allreduce(self, tensor: torch.Tensor) -> None:
        chunks = list(tensor.tensor_split(self.k)) if self.k > 1 else [tensor]
        mine = (self.local + 1) % self.k
        with self._step(INTRA):
            for step in range(self.k - 1):  # reduce-scatter: send chunk i-s, add chunk i-s-1 from the previous rank
                sent, received = chunks[(self.local - step) % self.k], chunks[(self.local - step - 1) % self.k]
                incoming = torch.empty_like(received)
                self._exchange(sent, incoming)
                received.add_(incoming)
        with self._step(INTER):
            if self.pods > 1 and chunks[mine].numel():
                dist.all_reduce(chunks[mine], group=self.index_group)
        with self._step(INTRA):
            for step in range(self.k - 1):  # allgather: send chunk i+1-s, take chunk i-s from the previous rank
                self._exchange(chunks[(self.local + 1 - step) % self.k], chunks[(self.local - step) % self.k])

    def _exchange(self, sent: torch.Tensor, received: torch.Tensor) -> None:
        """One step of the pod's ring: `sent` to the next local rank while `received` comes from the previous."""
        operations = []
        if sent.numel():
            operations.append(dist.P2POp(dist.isend, sent, self.next, self.pod_group))
        if received.numel():
            operations.append(dist.P2POp(dist.irecv, received, self.previous, self.pod_group))
        for work in dist.batch_isend_irecv(operations) if operations else []:
            work.wait()

    @contextlib.contextmanager
    def _step(self, level: str) -> Iterator[None]:
        """Time one step of the thread (on GPU, to the end of its work on the device) into `steps`."""
        started = time.perf_counter()
        yield
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()  # this is a device sync (the thread's stream)
        self.steps.append((level, started, time.perf_counter()))


def chunk_bytes(nbytes: float, element_size: int, k: int) -> list[float]:
    """The bytes of each of the k chunks tensor_split cuts a tensor of `nbytes` into (the first ones one element
    longer where k does not divide it)."""
    per, extra = divmod(int(round(nbytes)) // element_size, k)
    return [float(element_size * (per + (1 if i < extra else 0))) for i in range(k)]


def _overlap(start: float, end: float, s: float, e: float) -> float:
    return max(0.0, min(end, e) - max(start, s))


def synchronizer(trial: Trial, env: contract.PodEnvironment, device: torch.device,
                 knobs: settings.RankSettings = settings.RankSettings(),
                 levels: levels_.Levels | None = None) -> ring.RingSynchronizer:
    """The hierarchical ring's synchronizer of this worker (runtime/main.py SYNCHRONIZERS)."""
    levels = levels or levels_.Levels.of(trial)
    collective = TwoLevelRing(trial, env.rank, levels, device, knobs.timeout_seconds)
    return ring.RingSynchronizer(trial, env, device, knobs, levels, collective=collective)
