"""ParameterServerPodAggregation (BytePS's per-node aggregation): a pod's ranks add their gradients up, its first rank
pushes them to the servers once and shares their answer with the pod (interfaces.Synchronizer).

main.py gives each worker a `PodSynchronizer(trial, env, device, knobs, levels)`; the servers run
parameter_server.serve, which hears one worker per pod (parameter_server.pusher_ranks), so their NICs carry P pushes
and P replies, not N. One iteration of a pod of k ranks:

    gather  every other rank sends its flat gradient (and when it was ready) to the pod's first rank, which adds them
            and takes the pod's mean (the servers average their P pushes: the mean of every rank's gradient)
    push    the first rank's exchange/client.Client pushes that mean and installs the servers' answer, as a
            ParameterServer worker does (time/comm across pods, time/wait the servers' gate)
    share   it sends the new weights to the pod's other ranks, with what its exchange measured (when the pod's last
            rank was ready, the servers' hold, the time across, staleness, whether a worker reached the target)

The sends inside the pod are point-to-point on the trial's default group: gloo on CPU, NCCL on GPU (NVLink or PCIe;
pairs need no group of their own, so the servers take no part), and never cross the pod's emulated card. A rank
records its own bytes by level (contract/levels.py): (k-1) weights inside the pod for the first rank, one
gradient for each other, the pushes and replies across. time/wait is the pod's wait for its last rank (the ranks of
a pod share a machine and its monotonic clock) plus the servers' hold; time/comm_intra the gather and the share,
time/comm_inter the exchange with the servers. Under BSP only (api/variants.py): the pod waits for its ranks.
With one rank per pod every rank is its pod's first and nothing moves inside: a ParameterServer worker.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

import torch
import torch.distributed as dist

from ringleader.api.trial import Trial
from ringleader.contract import environment as contract
from ringleader.contract import keys
from ringleader.contract import levels as levels_
from ringleader.runtime import compression, exchange, interfaces, parameter_server, settings, timing

TAG_GRADIENT, TAG_READY, TAG_WEIGHTS, TAG_ANSWER, TAG_VERDICT = 81, 82, 83, 84, 85
"""Tags of the pod's point-to-point messages on the default group (gloo matches per (peer, tag); NCCL keeps order)."""
ANSWER = ("arrived", "held", "across", "staleness", "stop")
"""What the first rank sends with the weights, as float64 in this order."""


class _Across:
    """The timer the first rank's client records on: its time/comm is the exchange across pods; what it adds is kept
    for the pod's other ranks."""

    def __init__(self, timer: interfaces.Timer):
        self.timer = timer
        self.added: dict[str, float] = {}

    def phase(self, name: str) -> Any:
        return self.timer.phase(name)

    def add(self, name: str, value: float) -> None:
        self.timer.add(name, value)
        self.added[name] = self.added.get(name, 0.0) + value
        if name == keys.TIME_COMM:
            self.timer.add(keys.TIME_COMM_INTER, value)

    def set(self, name: str, value: float) -> None:
        self.timer.set(name, value)
        self.added[name] = value

    def span(self, name: str, start: float, end: float, track: str = timing.TRACK_MAIN,
             args: dict | None = None) -> None:
        self.timer.span(name, start, end, track, args)


class PodSynchronizer:
    """A ParameterServerPodAggregation worker: its pod's first rank talks to the servers, the others to it."""

    def __init__(self, trial: Trial, env: contract.PodEnvironment, device: torch.device,
                 knobs: settings.RankSettings = settings.RankSettings(), levels: levels_.Levels | None = None):
        spec = trial.spec
        levels = levels or levels_.Levels.of(trial)
        pod = levels.pod(env.rank)
        self.rank, self.first, self.others = env.rank, pod[0], pod[1:]  # others: all but the first, this rank or not
        self.timeout = knobs.timeout_seconds
        self.evaluators_pod = trial.worker_slots()[0].rank in pod
        servers = parameter_server.server_ranks(trial) if self.leads else []
        # Every worker opens a link (its process group is made by every rank); only the first rank's has servers.
        self.link = exchange.endpoint.open_link(trial, env.rank, self.timeout, requests_from=[], replies_from=servers,
                                                levels=levels)
        self.client = exchange.client.Client(self.link, env.rank, servers, spec.model.iterations, self.timeout,
                                             compression.MessageCodec(spec.compression.method)) if self.leads else None
        self.parameters: list[torch.nn.Parameter] = []
        self.steps = 0
        self.iterations = spec.model.iterations
        self.stop_heard = False

    @property
    def leads(self) -> bool:
        """Whether this rank is its pod's first: the one that talks to the servers."""
        return self.rank == self.first

    def attach(self, model: torch.nn.Module, optimizer_factory) -> None:
        # The optimizer runs on the servers; the pod's first rank pulls the initial weights and shares them.
        self.parameters = exchange.shards.trainable(model)
        if self.client is not None:
            self.client.attach(model)
        weights = self._flat(p.detach() for p in self.parameters)
        answer = torch.zeros(len(ANSWER), dtype=torch.float64)
        if self.leads:
            self._send_all([(weights, TAG_WEIGHTS), (answer, TAG_ANSWER)])
        else:
            self._receive([(weights, TAG_WEIGHTS), (answer, TAG_ANSWER)])
            self._install(weights)

    def backward(self, loss: torch.Tensor) -> None:
        for p in self.parameters:
            p.grad = None
        loss.backward()

    def synchronize(self, step: int, timer: interfaces.Timer) -> None:
        started = time.perf_counter()
        gradient = self._flat(p.grad if p.grad is not None else torch.zeros_like(p) for p in self.parameters)
        if self.leads:
            self._lead(step, timer, started, gradient)
        else:
            self._follow(timer, started, gradient)
        self.steps += 1

    def _lead(self, step: int, timer: interfaces.Timer, started: float, gradient: torch.Tensor) -> None:
        assert self.client is not None, "the first rank has the client"
        # gather: the pod's gradients and when each was ready; their mean is what the pod pushes
        incoming = [(torch.empty_like(gradient), torch.zeros(1, dtype=torch.float64)) for _ in self.others]
        works = [dist.irecv(buffer, other, tag=TAG_GRADIENT) for (buffer, _), other in zip(incoming, self.others)]
        works += [dist.irecv(ready, other, tag=TAG_READY) for (_, ready), other in zip(incoming, self.others)]
        self._wait(works, "the gradients of the pod's other ranks")
        arrived = max([started] + [float(ready.item()) for _, ready in incoming])
        for buffer, _ in incoming:
            gradient.add_(buffer)
        gradient.div_(len(self.others) + 1)
        for parameter, view in zip(self.parameters, gradient.split([p.numel() for p in self.parameters])):
            parameter.grad = view.view_as(parameter)
        gathered = time.perf_counter()

        # push: the pod's one exchange with the servers, as a ParameterServer worker's (installs the new weights)
        across = _Across(timer)
        self.client.synchronize(step, across)
        exchanged = time.perf_counter()

        # share: the new weights, and what the exchange measured, to the pod's other ranks
        self.stop_heard = self.client.stop_heard
        answer = torch.tensor([arrived, across.added.get(keys.TIME_WAIT, 0.0), across.added.get(keys.TIME_COMM, 0.0),
                               across.added.get(keys.STALENESS, 0.0), float(self.stop_heard)], dtype=torch.float64)
        weights = self._flat(p.detach() for p in self.parameters)
        self._send_all([(weights, TAG_WEIGHTS), (answer, TAG_ANSWER)])
        ended = time.perf_counter()

        pod_wait = min(max(0.0, arrived - started), gathered - started)
        intra = (gathered - started - pod_wait) + (ended - exchanged)
        timer.add(keys.TIME_WAIT, pod_wait)
        timer.add(keys.TIME_COMM, intra)
        timer.add(keys.TIME_COMM_INTRA, intra)
        inside = len(self.others) * _nbytes(weights, answer)
        self._count(timer, inside, received=len(self.others) * _nbytes(gradient, incoming[0][1]) if incoming else 0.0)

    def _follow(self, timer: interfaces.Timer, started: float, gradient: torch.Tensor) -> None:
        ready = torch.tensor([started], dtype=torch.float64)
        weights, answer = torch.empty_like(gradient), torch.zeros(len(ANSWER), dtype=torch.float64)
        self._wait([dist.isend(gradient, self.first, tag=TAG_GRADIENT), dist.isend(ready, self.first, tag=TAG_READY)],
                   "the pod's first rank to take this rank's gradient")
        self._receive([(weights, TAG_WEIGHTS), (answer, TAG_ANSWER)])
        received = time.perf_counter()
        self._install(weights)  # update: the servers' new weights, as the pod's first rank got them
        ended = time.perf_counter()

        told = dict(zip(ANSWER, answer.tolist()))
        self.stop_heard = self.stop_heard or bool(told["stop"])
        blocked = received - started
        wait = min(max(0.0, told["arrived"] - started) + told["held"], blocked)
        comm = blocked - wait
        across = min(told["across"], comm)
        timer.set(keys.STALENESS, told["staleness"])
        timer.add(keys.TIME_WAIT, wait)
        timer.add(keys.TIME_COMM, comm)
        timer.add(keys.TIME_COMM_INTER, across)
        timer.add(keys.TIME_COMM_INTRA, comm - across)
        timer.add(keys.TIME_UPDATE, ended - received)
        self._count(timer, _nbytes(gradient, ready), received=_nbytes(weights, answer))

    def should_stop(self, due: bool, reached: bool, timer: interfaces.Timer) -> bool:
        """As a ParameterServer worker hears it, through the pod's first rank: from the servers' answers (shared
        with the weights), or, after an evaluation, from the evaluator itself (the first rank of the first pod)."""
        if self.client is not None:
            stop = self.client.should_stop(reached, timer)
        else:
            stop = self.stop_heard
        if due and self.evaluators_pod and self.others:  # a pod of more than one rank
            verdict = torch.tensor([float(stop)], dtype=torch.float64)
            with timer.phase(keys.TIME_WAIT):
                if self.leads:
                    self._send_all([(verdict, TAG_VERDICT)])
                    self._count(timer, len(self.others) * _nbytes(verdict), received=0.0)
                else:
                    self._receive([(verdict, TAG_VERDICT)])
                    self._count(timer, 0.0, received=_nbytes(verdict))
            stop = bool(verdict.item())
        if stop:
            self.iterations = self.steps
        return stop

    def close(self) -> None:
        finished = self.steps >= self.iterations
        try:
            if self.client is not None:
                self.client.close()
        finally:
            self.link.close(self.timeout if finished else 0.0)

    # -- the pod's messages ----------------------------------------------------------------------

    def _flat(self, tensors) -> torch.Tensor:
        return torch.cat([t.reshape(-1) for t in tensors]) if self.parameters else torch.zeros(0)

    def _install(self, weights: torch.Tensor) -> None:
        with torch.no_grad():
            for parameter, value in zip(self.parameters, weights.split([p.numel() for p in self.parameters])):
                parameter.copy_(value.view_as(parameter))

    def _send_all(self, messages: list[tuple[torch.Tensor, int]]) -> None:
        self._wait([dist.isend(tensor, other, tag=tag) for other in self.others for tensor, tag in messages],
                   "the pod's other ranks to take the new weights")

    def _receive(self, messages: list[tuple[torch.Tensor, int]]) -> None:
        self._wait([dist.irecv(tensor, self.first, tag=tag) for tensor, tag in messages],
                   f"the new weights from the pod's first rank (rank {self.first})")

    def _wait(self, works: list, what: str) -> None:
        for work in works:
            try:
                work.wait(datetime.timedelta(seconds=self.timeout))
            except Exception as error:  # noqa: BLE001 - gloo and NCCL raise their own kinds: the pod cannot go on
                raise exchange.link.LinkError(f"waiting for {what} failed: {str(error).splitlines()[0]}") from error

    def _count(self, timer: interfaces.Timer, inside: float, received: float) -> None:
        """This rank's bytes inside the pod, beside what its client counted across."""
        timer.add(keys.BYTES_SENT, inside)
        timer.add(keys.BYTES_RECEIVED, received)
        timer.add(keys.BYTES_UNCOMPRESSED, inside)
        timer.add(levels_.BYTES_KEYS[levels_.POD], inside)


def _nbytes(*tensors: torch.Tensor) -> float:
    return float(sum(t.numel() * t.element_size() for t in tensors))
