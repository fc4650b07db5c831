"""One owner's shard of the parameters: applies pushed gradients with the spec's optimizer, answers workers as its gate
says.

Run by parameter_server.serve (a ParameterServer's ps rank) and by peer_to_peer's server thread
(every peer owns a shard). Every shard server holds a gate of the paradigm (paradigms.py says why
their decisions agree): after applying a push it answers each worker its gate releases with the
shard's new weights and the shard's clock, so a worker goes on once every owner has answered; no
owner waits on another, and no worker asks twice. A BSP owner is its own shard's barrier. Under
DSSP, owner 0 runs the controller and its answer carries the grant; the worker relays the grant
(GRANT) to the other owners, whose gates follow it.
Stopping at a target: the evaluating worker tells every owner (STOP) before it says DONE; from then
on every answer carries `stop`, so each worker hears it at its next answer without waiting for
anyone, and a worker that is done no longer counts in any gate (paradigms.Gate.retire).
Aggregation: BSP averages a round's N gradients and applies them once, so everyone gets the same
new weights; ASP, SSP and DSSP apply every push at once with the learning rate divided by N, so N
pushes move the weights as far as one BSP round does (Adam included, whose step does not scale
with the gradient), keeping loss-per-sample comparable across paradigms.
Compression (spec.compression FP16 or BF16): pushes arrive and replies leave in 16 bits
(runtime/compression.MessageCodec); the shard's weights and its optimizer stay in float32.
"""

from __future__ import annotations

import queue
import time

import torch

from ringleader.contract import keys
from ringleader.runtime import compression, paradigms
from ringleader.runtime.exchange import schedule, wire
from ringleader.runtime.exchange import link as links


class ServerError(RuntimeError):
    """This shard server cannot go on (a worker died, went silent, or broke the protocol)."""


class ShardServer:
    """The state of one owner's shard: weights, optimizer, push counts and held OKs."""

    def __init__(self, *, rank: int, shard: list[torch.Tensor], optimizer_factory, workers: list[int],
                 gate: paradigms.Gate, link: links.Link, owner: int = 0, owners: int = 1,
                 warmup_iterations: int = 0, name: str = "shard server",
                 codec: compression.MessageCodec = compression.PLAIN):
        # owner, owners: this server is owner `owner` of `owners` (for ParameterServer's reply order; a peer's follows
        # its rank)
        self.rank = rank
        self.name = name
        self.workers = list(workers)
        self.index = {worker: i for i, worker in enumerate(self.workers)}
        # Workers released together are answered in this order (schedule.py: no two owners start at the same worker).
        self.reply_rank = {w: i for i, w in enumerate(schedule.reply_order(self.workers, rank, owner, owners))}
        self.gate = gate
        self.averages_rounds = gate.averages_rounds
        self.link = link
        self.warmup_iterations = warmup_iterations
        # The shard's own leaf tensors: the optimizer updates these in place.
        self.parameters = [torch.nn.Parameter(t.detach().clone(), requires_grad=True) for t in shard]
        self.codec = codec  # pushes arrive and replies leave as spec.compression says
        self.layout = wire.Layout(codec.travelling(self.parameters))
        self.uncompressed = wire.Layout(self.parameters).nbytes
        self.optimizer = optimizer_factory(self.parameters) if self.parameters else None
        if self.optimizer is not None and not self.averages_rounds:
            for group in self.optimizer.param_groups:
                group["lr"] /= len(self.workers)
        self.pushes = {worker: 0 for worker in self.workers}  # t[i] as this owner has seen them
        self.ready_at = {worker: 0.0 for worker in self.workers}  # when each worker's latest push was applied
        self.done: set[int] = set()
        self.pulled: list[int] = []  # workers whose initial pull waits for the others'
        self.stopping = False  # a worker reached the target (STOP): every answer from now on says stop
        self.version = 0  # updates applied
        self.round_sum = [torch.zeros_like(p) for p in self.parameters] if self.averages_rounds else []
        self.round_seconds = 0.0

    @property
    def finished(self) -> bool:
        return len(self.done) == len(self.workers)

    @property
    def clock(self) -> int:
        return self.gate.clock

    @property
    def held(self) -> list[int]:
        """Workers waiting on this server: the OKs its gate holds."""
        return [self.workers[i] for i in self.gate.blocked]

    # -- messages ------------------------------------------------------------------------------

    def handle(self, message: wire.Message) -> dict[str, float] | None:
        """Act on one message; returns the metrics of an aggregation when one was applied."""
        if message.kind == wire.MessageKind.PUSH:
            return self._push(message)
        if message.kind == wire.MessageKind.PULL:
            self._pull(message)
        elif message.kind == wire.MessageKind.GRANT:
            self._release(self.gate.on_grant(self.index[message.sender], message.grant))
        elif message.kind == wire.MessageKind.STOP:
            self.stopping = True
        elif message.kind == wire.MessageKind.DONE:
            return self._done(message)
        elif message.kind == wire.MessageKind.LOST:
            if message.sender not in self.done:
                raise ServerError(f"{self.name} (rank {self.rank}) lost worker rank {message.sender} before it "
                                  f"finished: {message.reason}")
        else:
            raise ServerError(f"{self.name} (rank {self.rank}) got an unexpected {message.kind.name} "
                              f"from rank {message.sender}")
        return None

    def _push(self, message: wire.Message) -> dict[str, float] | None:
        worker = message.sender
        if message.count != self.pushes[worker] + 1:
            raise ServerError(f"{self.name} (rank {self.rank}): push {message.count} from worker rank {worker} "
                              f"after {self.pushes[worker]} pushes; pushes must arrive in order")
        self.pushes[worker] = message.count

        # aggregate: apply at once, or add to the round (BSP) and apply when it is complete
        started = time.perf_counter()
        gradients = self.codec.unpack(self.layout, message.expect_payload()) if self.parameters else []
        applied = False
        if self.averages_rounds:
            for total, gradient in zip(self.round_sum, gradients):
                total.add_(gradient.to(total.device))
            applied = self._apply_complete_round()
        else:
            self._apply(gradients)
            applied = True
        self.ready_at[worker] = time.perf_counter()
        self.round_seconds += self.ready_at[worker] - started

        # decide: this shard's gate says who gets an OK now
        self._release(self.gate.on_push(self.index[worker], message.received_at))
        return self._aggregated(message.count) if applied else None

    def _aggregated(self, count: int) -> dict[str, float]:
        """The metrics of the update just applied (push `count` completed it)."""
        metrics = {
            keys.SERVER_AGGREGATION: self.round_seconds,
            keys.SERVER_QUEUE_DEPTH: float(len(self.held)),
            keys.WARMUP: count <= self.warmup_iterations,
        }
        self.round_seconds = 0.0
        grant = self.gate.last_grant
        if grant is not None:
            metrics[keys.SERVER_THRESHOLD] = float(grant.threshold)
        return metrics

    def _pull(self, message: wire.Message) -> None:
        """The initial pulls are answered together, once every worker asked: all start training at the same
        moment, so a worker that took longer to start (loading its held-out set, say) is not behind by that under
        ASP. The answer starts each worker's first iteration interval (DSSP's push times)."""
        self.pulled.append(message.sender)
        if len(self.pulled) < len(self.workers):
            return
        payload = self._weights()
        for worker in self.pulled:
            self.gate.begin(self.index[worker], message.received_at)
            self._reply(worker, 0.0, payload)

    def _done(self, message: wire.Message) -> dict[str, float] | None:
        """A worker is done: say goodbye, and free those its gate held for pushes that will not come."""
        worker = message.sender
        if worker in self.held:
            raise ServerError(f"{self.name} (rank {self.rank}): worker rank {worker} sent done while waiting")
        self.done.add(worker)
        self.link.send(worker, wire.Message(wire.MessageKind.BYE, self.rank, count=self.pushes[worker]))
        # BSP: the round the others pushed may now be complete without this worker's gradient
        applied = self.averages_rounds and self._apply_complete_round()
        self._release(self.gate.retire(self.index[worker]))
        return self._aggregated(max(self.pushes.values())) if applied else None

    def _apply_complete_round(self) -> bool:
        """BSP: apply the round's average once every worker still training pushed it; whether it was applied."""
        training = [w for w in self.workers if w not in self.done]
        if not training or len({self.pushes[w] for w in training}) != 1 \
                or self.pushes[training[0]] == self.version:
            return False
        self._apply([total.div_(len(training)) for total in self.round_sum])
        for total in self.round_sum:
            total.zero_()
        return True

    # -- updates and replies ---------------------------------------------------------------------

    def _apply(self, gradients: list[torch.Tensor]) -> None:
        if self.optimizer is not None:
            for parameter, gradient in zip(self.parameters, gradients):
                parameter.grad = gradient.to(parameter.device)
            self.optimizer.step()
        self.version += 1

    def _weights(self) -> torch.Tensor | None:
        # One CPU copy serves every worker released together (they get the very same weights).
        return self.codec.pack(self.layout, list(self.parameters), self.layout.empty()) if self.parameters else None

    def _release(self, released: list[int]) -> None:
        """OK the gate's `released` workers (indices) with the weights now; a held OK waited since its push was
        applied."""
        if not released:
            return
        now = time.perf_counter()
        payload = self._weights()
        for worker in sorted((self.workers[i] for i in released), key=self.reply_rank.__getitem__):
            self._reply(worker, now - self.ready_at[worker], payload)

    def _reply(self, worker: int, held: float, payload: torch.Tensor | None) -> None:
        self.link.send(worker, wire.Message(
            wire.MessageKind.REPLY, self.rank, count=self.pushes[worker], clock=self.clock, held=held,
            version=self.version, grant=self.gate.allowance(self.index[worker]), stop=self.stopping, payload=payload,
            uncompressed=self.uncompressed if payload is not None else None))

    # -- diagnosis -------------------------------------------------------------------------------

    def silence(self, seconds: float) -> str:
        """Why nothing arrived for `seconds`: the workers that owe this server a message."""
        waiting = set(self.held)
        owing = [w for w in self.workers if w not in self.done and w not in waiting]
        suspects = owing or [w for w in self.workers if w not in self.done]
        return (f"{self.name} (rank {self.rank}) heard nothing for {seconds:.0f}s "
                f"(RINGLEADER_TIMEOUT_SECONDS); waiting on worker rank(s) {', '.join(map(str, suspects))}, "
                f"which died or hang (pushes so far: {self.pushes})")


def run(server: ShardServer, inbox: links.Delivery, timeout_seconds: float, record) -> None:
    """Handle messages until every worker is done; `record(step, metrics)` gets each aggregation."""
    while not server.finished:
        try:
            message = inbox.get(timeout_seconds)
        except queue.Empty:
            raise ServerError(server.silence(timeout_seconds)) from None
        metrics = server.handle(message)
        if metrics is not None:
            record(server.version - 1, metrics)
