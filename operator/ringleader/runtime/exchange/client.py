"""The worker side of parameter-server and peer-to-peer synchronization: push gradient shards, wait for the OK, pull.

Used by parameter_server.WorkerSynchronizer and peer_to_peer.PeerSynchronizer, which differ only in
who the owners are. One iteration, as the DSSP paper's worker loop (push g; wait OK; pull w):

    push   every owner gets its gradient shard (owner 0, the gate, too)
    wait   owner 0 answers when the paradigm lets this worker go: OK + its shard + the gate's clock c
    pull   every other owner answers "as of clock c" with its shard
    update the new weights are copied into the model

Metrics per iteration: time/wait is how long the gate held the OK (the paradigm's doing, measured
on the server); time/update the copy into the model; time/comm the rest of the exchange
(transfers, emulated bandwidth, pulls). bytes/* count what crossed the network (a peer's own
shard does not). staleness is this step's iteration minus the gate's clock of the weights its
gradient was computed on: how many iterations of the slowest worker those weights lacked.
"""

from __future__ import annotations

import time

import torch

from ringleader.contract import keys
from ringleader.runtime import interfaces
from ringleader.runtime.exchange import shards, wire
from ringleader.runtime.exchange import link as links


def trainable(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The tensors servers keep and workers push gradients of, in model order, on every rank alike."""
    return [p for p in model.parameters() if p.requires_grad]


class Client:
    """Pushes to and pulls from `owners` (ranks; owners[0] holds the gate) through `link`."""

    def __init__(self, link: links.Link, rank: int, owners: list[int], iterations: int, timeout_seconds: float):
        self.link = link
        self.rank = rank
        self.owners = owners
        self.iterations = iterations
        self.timeout = timeout_seconds
        self.parameters: list[torch.nn.Parameter] = []
        self.plan: shards.Plan | None = None
        self.layouts: list[wire.Layout] = []
        self.push_buffers: list[torch.Tensor] = []
        self.cuda = False
        self.weights_clock = 0  # the gate's clock of the weights in the model now
        self.steps = 0  # synchronize() calls completed
        self.closed = False

    # -- start ---------------------------------------------------------------------------------

    def attach(self, model: torch.nn.Module) -> None:
        """Lay out the shards and pull the initial weights from their owners."""
        self.parameters = trainable(model)
        self.plan = shards.Plan.of(self.parameters, len(self.owners))
        self.layouts = [wire.Layout(self.plan.shard(j, self.parameters)) for j in range(len(self.owners))]
        self.cuda = any(p.is_cuda for p in self.parameters)
        self.push_buffers = [layout.empty(pin=self.cuda) for layout in self.layouts]
        for owner in self.owners:
            self.link.send(owner, wire.Message(wire.Kind.PULL, self.rank, count=0, clock=0))
        self._install([self._expect_reply(j, "initial weights") for j in range(len(self.owners))])

    # -- one iteration -----------------------------------------------------------------------------

    def synchronize(self, step: int, timer: interfaces.Timer) -> None:
        started = time.perf_counter()
        # The gradient of this step was computed on weights of clock weights_clock.
        timer.set(keys.STALENESS, float(step - self.weights_clock))
        sent = received = 0

        # push: gradient shards to their owners (on GPU, the copy to pinned memory is a device sync)
        gradients = [p.grad for p in self.parameters]
        for j, owner in enumerate(self.owners):
            payload = self.layouts[j].pack(self.plan.shard(j, gradients), out=self.push_buffers[j]) \
                if len(self.layouts[j]) else None
            push = wire.Message(wire.Kind.PUSH, self.rank, count=step + 1, payload=payload)
            self.link.send(owner, push)
            sent += self._network_bytes(owner, push)
        pushed = time.perf_counter()

        # wait: owner 0 holds the gate; its OK carries its shard and the clock the weights are at
        ok = self._expect_reply(0, f"the OK for iteration {step}")
        received += self._network_bytes(self.owners[0], ok)
        answered = time.perf_counter()

        # pull: the other shards, as of the gate's clock
        for j in range(1, len(self.owners)):
            pull = wire.Message(wire.Kind.PULL, self.rank, count=step + 1, clock=ok.clock)
            self.link.send(self.owners[j], pull)
            sent += self._network_bytes(self.owners[j], pull)
        replies = [ok]
        for j in range(1, len(self.owners)):
            replies.append(self._expect_reply(j, f"shard {j} for iteration {step}"))
            received += self._network_bytes(self.owners[j], replies[-1])
        pulled = time.perf_counter()

        # update: the new weights into the model, in place
        self._install(replies)
        self.weights_clock = ok.clock
        ended = time.perf_counter()

        update = ended - pulled
        wait = min(ok.held, answered - pushed)  # the server's hold, never more than we waited here
        timer.add(keys.TIME_WAIT, wait)
        timer.add(keys.TIME_UPDATE, update)
        timer.add(keys.TIME_COMM, max(0.0, (ended - started) - wait - update))
        timer.add(keys.BYTES_SENT, float(sent))
        timer.add(keys.BYTES_RECEIVED, float(received))
        span = getattr(timer, "span", None)  # the trace of timing.IterationTimer, when it is one
        if span is not None:
            span("push", started, pushed)
            span("wait for OK", pushed, answered, args={"held": ok.held, "clock": ok.clock})
            if len(self.owners) > 1:
                span("pull", answered, pulled)
        for p in self.parameters:
            p.grad = None  # pushed; the next backward starts from zero
        self.steps += 1

    def _expect_reply(self, j: int, what: str) -> wire.Message:
        owner = self.owners[j]
        message = links.wait(self.link.mailboxes[owner], self.timeout, f"{what} from rank {owner}")
        if message.kind != wire.Kind.REPLY:
            raise links.LinkError(f"expected a reply from rank {owner}, got {message.kind.name}")
        return message

    def _install(self, replies: list[wire.Message]) -> None:
        with torch.no_grad():
            for j, reply in enumerate(replies):
                if not len(self.layouts[j]):
                    continue
                for parameter, value in zip(self.plan.shard(j, self.parameters), self.layouts[j].views(reply.payload)):
                    parameter.copy_(value)

    def _network_bytes(self, owner: int, message: wire.Message) -> int:
        return 0 if owner == self.rank else message.wire_bytes

    # -- end -----------------------------------------------------------------------------------

    def close(self) -> None:
        """After the last iteration: tell every owner, and wait until each has heard (BYE).

        After a failure mid-run (fewer steps than iterations) nothing is sent: the process is about to
        exit, its sockets close, and the owners notice that at once."""
        if self.closed:
            return
        self.closed = True
        if self.steps < self.iterations:
            return
        for owner in self.owners:
            self.link.send(owner, wire.Message(wire.Kind.DONE, self.rank, count=self.steps))
        for owner in self.owners:
            message = links.wait(self.link.mailboxes[owner], self.timeout, f"the goodbye of rank {owner}")
            if message.kind != wire.Kind.BYE:
                raise links.LinkError(f"expected the goodbye of rank {owner}, got {message.kind.name}")
