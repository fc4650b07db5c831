"""Ring allreduce under BSP (interfaces.Synchronizer): bucketed gradients, allreduced while backward still runs.

As in PyTorch DDP: gradients are grouped, in reverse parameter order, into buckets of about
`bucket_bytes` (the first one, holding the last layers, of at most FIRST_BUCKET_BYTES, so
communication starts early in backward), and a bucket's asynchronous allreduce is launched from a
post-accumulate-grad hook as soon as its last gradient is in, so communication of the last layers
overlaps the backward of the first. Buckets are launched in bucket order on every rank (a bucket
ready early waits for its predecessors) because the collectives of all ranks must match one to one.

Unlike DDP's defaults, gradients never move: each parameter's `.grad` is a view into its bucket,
kept across iterations (`backward()` zeroes the buckets instead of setting gradients to None), so
autograd accumulates straight into the buffers the allreduce reads; and backward is seeded with
1/N instead of 1, so the allreduce's sum is already the average. No pass over the gradients copies
into a bucket, divides or copies back (bench/bench_ring_vs_ddp.py, docs/performance.md section 1).

`synchronize()` waits for the buckets still in flight (that wait, not the hidden part, is split
below) and steps the local optimizer (time/update). Bytes per rank and iteration: 2*(N-1)/N * M, the
ring's traffic for M bytes (the stamps below included), all to the next rank (bytes/inside_pod, /inside_node or
/across_nodes by where it is: contract/levels.py).

What sums a bucket is a `Collective`: `FlatRing` here, torch.distributed's allreduce of every worker; the
hierarchical ring's (hierarchical_ring.py) is the same synchronizer with a two-level one. It says what each round
sends, by level, and what the pod's emulated card carries for it (nic.py: only what leaves the pod, once for the
pod's ranks together).

Waiting for the slowest peer (time/wait) and the transfer (time/comm) are told apart without a
collective of their own (a one-element barrier on a separate gloo group cost 5-11 % of a quickstart
iteration on 2 cores): the last bucket carries one more element per rank (in its dtype), its arrival
stamp, the seconds from the moment the ring last finished communicating to the moment this rank ended its
backward and launched that bucket. That moment is the same on every rank (a collective ends
everywhere at once, give or take a wake-up), so the stamps compare without any clocks agreeing. Once
the last bucket is in, the last rank's arrival is known on this rank's own clock: the time blocked
before it is time/wait, as a parameter server's gate holding a worker is; the rest, the transfer
left after the last rank's backward (and the emulated link's pacing), is time/comm. The last rank
to arrive waits 0.

With spec.compression (runtime/compression.py), a bucket's codec encodes its gradients in the hook that
launches it (that time moves from time/backward to time/codec) and its first collective carries the encoded
payload; the last bucket's stamps, which must add up exactly, travel beside it in an allreduce of their own.
synchronize() then runs any further rounds (PowerSGD's Q, an FP16 sum redone at a smaller scale) for all
buckets together, and decodes the averages into the buckets: time/codec around the codecs' work, time/comm
around the waits; the ring has finished communicating after the last round. bytes/sent counts what the
collectives sent, bytes/uncompressed what plain allreduces would have.

gloo on CPU tensors, NCCL on CUDA tensors (main.py initializes "cpu:gloo,cuda:nccl" on GPU). On GPU
the last launch first synchronizes the device, so that a rank arrives when its device has ended
backward, not when its host has queued it, and reading the stamps synchronizes again once the
allreduces are done; both are host waits on work the iteration has to wait for anyway (an emulated
straggler syncs at every stretch already, straggler.py).
Buffers (batch-norm statistics) are broadcast once at start, not kept in sync.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Protocol

import torch
import torch.distributed as dist

from ringleader.api.trial import Trial
from ringleader.contract import buckets, keys
from ringleader.contract import environment as contract
from ringleader.contract import levels as levels_
from ringleader.runtime import compression, interfaces, nic, settings, timing

# Cap of the first bucket (the last layers): its allreduce starts after the first few gradients, not after
# `bucket_bytes` of them.
FIRST_BUCKET_BYTES = contract.FIRST_BUCKET_BYTES


class Bucket:
    """Gradients of consecutive parameters (in backward order), reduced as one flat tensor."""

    def __init__(self, index: int, parameters: list[torch.nn.Parameter], stamps: int = 0):
        self.index = index
        self.parameters = parameters
        self.sizes = [p.numel() for p in parameters]
        first = parameters[0]
        gradients = sum(self.sizes)
        self.buffer = torch.zeros(gradients + stamps, dtype=first.dtype, device=first.device)  # (numel + stamps,)
        self.gradients = self.buffer[:gradients]  # (numel,): what a codec encodes
        self.views = list(self.gradients.split(self.sizes))
        # The last bucket's arrival stamps, one per rank (RingSynchronizer._stamp_arrival); empty elsewhere.
        self.stamps = self.buffer[gradients:]  # (stamps,)
        # Each parameter's gradient, shaped like it, sharing the buffer's memory: what `.grad` is bound to.
        self.grads = [view.view_as(parameter) for view, parameter in zip(self.views, parameters)]
        self.bytes = self.buffer.numel() * self.buffer.element_size()
        self.missing = len(parameters)  # gradients not yet in, this iteration
        self.work: Any = None  # the allreduce's torch.distributed.Work in flight
        self.codec: compression.BucketCodec | None = None  # spec.compression's; None: allreduced as it is
        self.round: compression.Round | None = None  # the codec's collective in flight
        self.stamps_work = None  # a codec's bucket: the stamps' own allreduce
        self.sent = RoundTraffic(levels_.empty(), 0.0)  # what this rank sends for the bucket's first collective
        self.launched_at = 0.0
        self.completed_at: float | None = None
        self.emulated_end = 0.0

    def reset(self) -> None:
        self.missing = len(self.parameters)
        self.work = self.round = self.stamps_work = None
        self.completed_at = None


@dataclasses.dataclass(frozen=True)
class RoundTraffic:
    """What one rank sends for one round of a collective, by level, and what its pod's card carries for it."""

    by_level: dict[str, float]
    """by_level: this rank's bytes by where they go (contract/levels.py)."""
    card: float
    """card: the bytes of every rank of the pod that leave it in this round: what the pod's emulated card carries."""

    @property
    def sent(self) -> float:
        return sum(self.by_level.values())


class Collective(Protocol):
    """How the ring sums (or gathers) one flat tensor over every worker, and what that sends."""

    def launch(self, round_: compression.Round) -> Any:
        """Start the round's collective (asynchronous): a work with wait() and get_future()."""

    def traffic(self, nbytes: float, element_size: int = 4, gather: bool = False) -> RoundTraffic:
        """What this rank sends to allreduce a tensor of `nbytes` in elements of `element_size` bytes (`gather`: to
        gather it from every rank)."""

    def split(self, start: float, end: float, paced_from: float) -> dict[str, float]:
        """time/comm of [start, end] in its parts (TIME_COMM_INTRA, TIME_COMM_INTER), the card's pacing from
        `paced_from` on across pods; empty for a collective of one level."""

    def close(self) -> None: ...


class FlatRing:
    """torch.distributed's allreduce over every worker of `group` (gloo's ring, NCCL's): rank r sends 2(N-1)/N of each
    tensor to the next rank, a gather (N-1) payloads."""

    def __init__(self, group, ranks: list[int], rank: int, levels: levels_.Levels):
        self.group = group
        self.world = len(ranks)
        following = {r: ranks[(i + 1) % len(ranks)] for i, r in enumerate(ranks)}
        self.level = levels.between(rank, following[rank])
        # The pod's ranks whose next rank is in another pod: each sends its share across the pod's card.
        self.crossing = sum(levels.leaves_pod(r, following[r]) for r in levels.pod(rank))

    def launch(self, round_: compression.Round) -> Any:
        return round_.launch(self.world, self.group)

    def traffic(self, nbytes: float, element_size: int = 4, gather: bool = False) -> RoundTraffic:
        sent = (self.world - 1) * nbytes if gather else 2.0 * (self.world - 1) / self.world * nbytes
        return RoundTraffic({**levels_.empty(), self.level: sent}, self.crossing * sent)

    def split(self, start: float, end: float, paced_from: float) -> dict[str, float]:
        return {}

    def close(self) -> None:
        pass


def _codec(bucket: Bucket) -> compression.BucketCodec:
    """The codec of a bucket the ring compresses: attach() gives every bucket one when spec.compression is on."""
    assert bucket.codec is not None, f"bucket {bucket.index} has no codec"
    return bucket.codec


def make_buckets(parameters: list[torch.nn.Parameter], bucket_bytes: int,
                 first_bucket_bytes: int | None = None, stamps: int = 0) -> list[Bucket]:
    """Reverse parameter order (roughly the order backward produces gradients), closed at `bucket_bytes`
    (the first bucket at `first_bucket_bytes`, if smaller), never mixing dtypes or devices (contract/buckets.py);
    the last bucket has room for `stamps` arrival stamps after its gradients."""
    ordered = list(reversed(parameters))
    kinds = [(p.dtype, p.device) for p in ordered]
    groups = buckets.group([p.numel() * p.element_size() for p in ordered], bucket_bytes,
                            first_bucket_bytes or bucket_bytes, apart=lambda i: kinds[i] != kinds[i - 1])
    return [Bucket(index, [ordered[i] for i in members], stamps if index == len(groups) - 1 else 0)
            for index, members in enumerate(groups)]


class RingSynchronizer:
    """BSP ring allreduce with bucketing and backward/communication overlap."""

    def __init__(self, trial: Trial, env: contract.PodEnvironment, device: torch.device,
                 knobs: settings.RankSettings = settings.RankSettings(), levels: levels_.Levels | None = None,
                 group=None, collective: Collective | None = None):
        workers = [slot.rank for slot in trial.worker_slots()]
        self.world = len(workers)
        self.evaluator = workers[0]  # the worker that evaluates (runtime/evaluation.py)
        self.device = device
        self.bucket_bytes = knobs.bucket_bytes
        self.group = group
        levels = levels or levels_.Levels.of(trial)
        self.collective = collective or FlatRing(group, workers, env.rank, levels)
        self.nic = nic.pod_card(trial, env.rank, levels)  # the emulated link: this rank's pod's card
        self.reserved = 0  # the pod's steps reserved on its card so far: every rank of the pod counts them alike
        self.buckets: list[Bucket] = []
        self.where: dict[torch.nn.Parameter, tuple[Bucket, int]] = {}
        self.next_launch = 0  # buckets are launched strictly in index order
        self.slot = 0  # this rank's arrival stamp in the last bucket: its rank in the group
        self.synced_at = 0.0  # when the ring last finished communicating (perf_counter): what stamps count from
        self.compression = trial.spec.compression
        self.seed = trial.spec.data.synthetic.seed  # PowerSGD's first projection, the same on every rank
        self.sent = levels_.empty()  # bytes this rank sent this iteration, by level
        self.encode_seconds = 0.0  # codecs' encoding in the launching hooks, not yet booked
        self.optimizer: torch.optim.Optimizer | None = None

    def traffic(self, tensor: torch.Tensor, gather: bool = False) -> RoundTraffic:
        """What this rank sends (and receives) to allreduce `tensor`: 2*(N-1)/N of it on the flat ring."""
        return self.collective.traffic(tensor.numel() * tensor.element_size(), tensor.element_size(), gather)

    @property
    def bytes_per_iteration(self) -> float:
        """Bytes this rank sends (and receives) per iteration: 2*(N-1)/N * M on the flat ring."""
        return sum(self.traffic(bucket.buffer).sent for bucket in self.buckets)

    def _send(self, traffic: RoundTraffic, earliest: float) -> float:
        """Count what this rank sends for a round and reserve what leaves the pod on its card (with the pod's other
        ranks, the same step); when the card has carried it."""
        for level, sent in traffic.by_level.items():
            self.sent[level] += sent
        self.reserved += 1
        return self.nic.exchange(traffic.card, earliest, key=self.reserved)

    def attach(self, model: torch.nn.Module, optimizer_factory) -> None:
        parameters = [p for p in model.parameters() if p.requires_grad]
        # Same initial weights everywhere: the seeded build already gives them; rank 0's copy makes sure.
        if self.world > 1:
            broadcast_from_first(list(model.parameters()) + list(model.buffers()), self.group)
            self.slot = dist.get_rank(self.group)
        self.synced_at = time.perf_counter()  # the broadcast ended on every rank at about this moment
        self.buckets = make_buckets(parameters, self.bucket_bytes, FIRST_BUCKET_BYTES,
                                    stamps=self.world if self.world > 1 else 0)
        for bucket in self.buckets:
            if self.world > 1:
                bucket.codec = compression.bucket_codec(self.compression, [p.shape for p in bucket.parameters],
                                                        self.seed + bucket.index, self.world)
            for position, parameter in enumerate(bucket.parameters):
                self.where[parameter] = (bucket, position)
                if self.world > 1:
                    parameter.grad = bucket.grads[position]
                    parameter.register_post_accumulate_grad_hook(self._gradient_ready)
        self.optimizer = optimizer_factory(parameters)

    def backward(self, loss: torch.Tensor) -> None:
        if self.world == 1:
            for bucket in self.buckets:
                for parameter in bucket.parameters:
                    parameter.grad = None
            loss.backward()
            return
        # Zero in place: the gradients stay views of the buckets, and autograd adds into them.
        for bucket in self.buckets:
            bucket.buffer.zero_()
        # Backward is linear in its seed: seeded with 1/N, every gradient comes out divided by N, so the
        # allreduce's sum is the average without a pass that divides.
        loss.backward(torch.full_like(loss, 1.0 / self.world))

    def _gradient_ready(self, parameter: torch.nn.Parameter) -> None:
        # Runs inside backward, once per parameter: launch the buckets now complete.
        bucket, position = self.where[parameter]
        grad = bucket.grads[position]
        assert parameter.grad is not None, "autograd sets it before a post-accumulate-grad hook runs"
        if parameter.grad.data_ptr() != grad.data_ptr():
            # Someone set this gradient to None or replaced it (autograd then made a new one): take it back.
            grad.copy_(parameter.grad)
            parameter.grad = grad
        bucket.missing -= 1
        self._launch_ready()

    def _launch_ready(self, flush: bool = False) -> None:
        while self.next_launch < len(self.buckets):
            bucket = self.buckets[self.next_launch]
            if bucket.missing > 0 and not flush:
                return
            if bucket.missing > 0:
                # Parameters that got no gradient this iteration contribute zeros (backward() zeroed them),
                # on every rank alike; one whose gradient was set to None is bound to its zeroed view again.
                for grad, parameter in zip(bucket.grads, bucket.parameters):
                    if parameter.grad is None or parameter.grad.data_ptr() != grad.data_ptr():
                        grad.zero_()
                        parameter.grad = grad
            if bucket.stamps.numel():
                self._stamp_arrival(bucket)
            if bucket.codec is None:
                bucket.launched_at = now = time.perf_counter()
                bucket.work = self.collective.launch(compression.Round(bucket.buffer))
                bucket.sent = self.traffic(bucket.buffer)
            else:
                now = self._launch_encoded(bucket)
            bucket.work.get_future().add_done_callback(
                lambda _future, b=bucket: setattr(b, "completed_at", time.perf_counter()))
            # Each bucket's allreduce sends and receives its share on the emulated card, one bucket after another,
            # from when this rank launched it; the last one's only once the last rank has (synchronize()).
            if not bucket.stamps.numel():
                bucket.emulated_end = self._send(bucket.sent, now)
            self.next_launch += 1

    def _launch_encoded(self, bucket: Bucket) -> float:
        """Encode the bucket's gradients and launch the codec's first collective (and the stamps', exact, beside
        it); when it was launched."""
        started = time.perf_counter()
        bucket.round = _codec(bucket).encode(bucket.gradients)
        bucket.launched_at = now = time.perf_counter()
        self.encode_seconds += now - started
        bucket.work = self.collective.launch(bucket.round)
        bucket.sent = self.traffic(bucket.round.payload, bucket.round.gather)
        if bucket.stamps.numel():
            bucket.stamps_work = self.collective.launch(compression.Round(bucket.stamps))
            stamps = self.traffic(bucket.stamps)
            bucket.sent = RoundTraffic({level: sent + stamps.by_level[level]
                                        for level, sent in bucket.sent.by_level.items()},
                                       bucket.sent.card + stamps.card)
        return now

    def _stamp_arrival(self, bucket: Bucket) -> None:
        """This rank has ended its backward: the seconds since the ring last finished communicating, into its
        slot of the last bucket (the others' slots hold zeros, so the allreduce's sum is every rank's stamp)."""
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()  # this is a device sync: backward has ended
        bucket.stamps[self.slot] = time.perf_counter() - self.synced_at

    def synchronize(self, step: int, timer: interfaces.Timer) -> None:
        if self.world > 1:
            # communicate and wait: launch what backward left (unused parameters), wait for every bucket; the
            # sums of gradients seeded with 1/N are the averages, already in .grad (views of the buckets)
            started = time.perf_counter()
            encoded_in_backward, self.encode_seconds = self.encode_seconds, 0.0
            self._launch_ready(flush=True)
            for bucket in self.buckets:
                bucket.work.wait()  # CPU: blocks until reduced; GPU: the compute stream waits for NCCL
                if bucket.stamps_work is not None:
                    bucket.stamps_work.wait()
            last = self.buckets[-1]
            # When the last rank arrived, on this rank's clock (GPU: reading the stamps is a device sync).
            arrived = self.synced_at + max(last.stamps.tolist())
            # When the ring finished communicating, a moment every rank shares: when the last allreduce ended (on
            # GPU the host sees that only now, by the stamps' device sync), or the emulated link, if later.
            now = time.perf_counter()
            self.synced_at = now if self.device.type == "cuda" else max(b.completed_at or now for b in self.buckets)
            # The emulated card carries the last bucket only once the last rank has launched it.
            last.emulated_end = self._send(last.sent, max(last.launched_at, arrived))
            paced_from = time.perf_counter()
            if self.nic.active:
                self.synced_at = max(self.synced_at, last.emulated_end)
                self.nic.pace(last.emulated_end)  # sleep until the emulated card has carried it all
            ended = time.perf_counter()
            # wait: blocked until the last rank arrived (the paradigm's doing); comm: the transfer after that
            wait = min(max(0.0, arrived - started), ended - started)
            timer.add(keys.TIME_WAIT, wait)
            timer.add(keys.TIME_COMM, ended - started - wait)
            for key, seconds in self.collective.split(started + wait, ended, paced_from).items():
                timer.add(key, seconds)
            if wait > 0:
                timer.span("wait", started, started + wait, timing.TRACK_MAIN)
            timer.span("comm", started + wait, ended, timing.TRACK_MAIN)
            if self.compression.compressing():
                self._book_encoding(encoded_in_backward, timer)
                self._finish_rounds(timer)
            for bucket in self.buckets:
                # A bucket's transfer ends when gloo has it and the emulated link has carried it, whichever is
                # later: the span the report's overlap figure draws (the link is probed: linkprobe.py).
                done = max(bucket.completed_at or time.perf_counter(), bucket.emulated_end, bucket.launched_at)
                timer.span(f"allreduce bucket {bucket.index}", bucket.launched_at, done,
                           timing.TRACK_COMM, {"bytes": bucket.bytes} if bucket.codec is None else {})
                bucket.reset()
            self.next_launch = 0
            # Every collective here sends what it receives: an allreduce's share, or its payload to each other rank.
            sent = sum(self.sent.values())
            timer.add(keys.BYTES_SENT, sent)
            timer.add(keys.BYTES_RECEIVED, sent)
            for level, key in levels_.BYTES_KEYS.items():
                timer.add(key, self.sent[level])
            timer.add(keys.BYTES_UNCOMPRESSED, self.bytes_per_iteration)
            self.sent = levels_.empty()
        # update: every rank applies the same averaged gradient to the same weights
        with timer.phase(keys.TIME_UPDATE):
            assert self.optimizer is not None, "attach() made it"
            self.optimizer.step()

    def _book_encoding(self, in_backward: float, timer: interfaces.Timer) -> None:
        """Move the codecs' encoding out of the phases it ran in (backward's hooks, the flush in time/comm) into
        time/codec. On GPU those phases are device time and this is host time: an approximation there."""
        timer.add(keys.TIME_BACKWARD, -in_backward)
        timer.add(keys.TIME_COMM, -self.encode_seconds)
        timer.add(keys.TIME_CODEC, in_backward + self.encode_seconds)
        self.encode_seconds = 0.0

    def _finish_rounds(self, timer: interfaces.Timer) -> None:
        """The codecs' further rounds, all buckets' together (each a collective; time/comm), then the averages
        decoded into the buckets (time/codec). Every rank decides the rounds alike, so collectives match."""
        done = [bucket.round for bucket in self.buckets]
        for _ in range(compression.FP16_RETRIES + 2):  # PowerSGD needs 2 rounds; FP16 redoes at most FP16_RETRIES
            with timer.phase(keys.TIME_CODEC):
                following = [None if previous is None else _codec(bucket).advance(previous)
                             for bucket, previous in zip(self.buckets, done)]
            if not any(following):
                break
            with timer.phase(keys.TIME_COMM):
                works, carried = [], 0.0
                for bucket, current in zip(self.buckets, following):
                    if current is None:
                        continue
                    launched = time.perf_counter()
                    works.append((bucket, launched, self.collective.launch(current)))
                    carried = self._send(self.traffic(current.payload, current.gather), launched)
                for bucket, launched, work in works:
                    work.wait()
                    timer.span(f"round of bucket {bucket.index}", launched, time.perf_counter(), timing.TRACK_COMM)
                self.nic.pace(carried)
                self.synced_at = time.perf_counter()  # the ring finished communicating (again), on every rank
            done = following
        with timer.phase(keys.TIME_CODEC):
            for bucket in self.buckets:
                _codec(bucket).decode(bucket.gradients)

    def should_stop(self, due: bool, reached: bool, timer: interfaces.Timer) -> bool:
        """After each evaluation the evaluator's verdict is broadcast, so every rank stops at the same step and no
        collective is left half-joined. BSP waits for every rank each iteration anyway; this one waits for the
        evaluation too, and is booked as time/wait."""
        if not due:
            return False
        if self.world == 1:
            return reached
        with timer.phase(keys.TIME_WAIT):
            verdict = torch.tensor([1 if reached else 0], dtype=torch.int64)  # CPU: gloo, also beside NCCL
            dist.broadcast(verdict, src=self.evaluator, group=self.group)
        return bool(verdict.item())

    def close(self) -> None:
        # Nothing is left in flight after synchronize(); on a failure mid-iteration the process exits.
        self.where.clear()
        self.collective.close()
        self.nic.close()


def broadcast_from_first(tensors: list[torch.Tensor], group=None) -> None:
    """Overwrite `tensors` with the lowest rank's values: one flat broadcast per dtype and device."""
    source = dist.get_global_rank(group, 0) if group is not None else 0
    by_kind: dict[tuple, list[torch.Tensor]] = {}
    for tensor in tensors:
        by_kind.setdefault((tensor.dtype, tensor.device), []).append(tensor)
    for same in by_kind.values():
        flat = torch.cat([t.detach().reshape(-1) for t in same])
        dist.broadcast(flat, src=source, group=group)
        for tensor, value in zip(same, flat.split([t.numel() for t in same])):
            tensor.data.copy_(value.view_as(tensor))
