"""The worker side of parameter-server and peer-to-peer synchronization: push gradient shards, wait for every owner's
answer.

Used by parameter_server.WorkerSynchronizer and peer_to_peer.PeerSynchronizer, which differ only in
who the owners are. One iteration, as DSSP's published worker loop (push g; wait OK; pull w), with
the pull folded into the OK: each owner answers with its shard of the new weights once its own gate
lets this worker go (paradigms.py says why the owners' gates agree).

    push   every owner gets its gradient shard, in schedule.py's rotated order (a peer's own shard,
           which skips the network, last)
    wait   every owner's answer: OK + its shard + its clock; owner 0's first, and when it carries a
           new DSSP grant, the grant is relayed (GRANT) to the other owners before waiting on them
    update the new weights are copied into the model

Stopping at a target (model.target onReached Stop) never makes a worker wait: the evaluating worker
tells every owner (STOP) and ends; the others hear it in their next answers (`stop`) and end after
that iteration; the owners stop counting a worker that is done, so nobody is held for it.

Metrics per iteration: time/wait is how long the gates held the OK (the paradigm's doing, measured
on the servers: the longest hold of any owner); time/update the copy into the model; time/comm the
rest of the exchange (transfers, emulated bandwidth); time/codec, with spec.compression, the pushes' encoding
and the replies' decoding (runtime/compression.MessageCodec). bytes/* count what crossed this rank's
network since the last iteration (exchange/link.py counts it): for a peer, its shard server's
replies and the pushes it received too; its own shard never crosses. staleness is this step's iteration minus the clock
of the weights its gradient was computed on (the smallest of the owners' clocks): how many iterations of the slowest
worker those weights lacked.
"""

from __future__ import annotations

import time

import torch

from ringleader.contract import keys, levels
from ringleader.runtime import compression, interfaces
from ringleader.runtime.exchange import schedule, shards, wire
from ringleader.runtime.exchange import link as links


COUNTED = (keys.BYTES_SENT, keys.BYTES_RECEIVED, keys.BYTES_UNCOMPRESSED, *levels.BYTES_KEYS.values())
"""COUNTED: the record keys of Client._counters, in order."""


class Client:
    """Pushes to and pulls from `owners` (ranks; owners[0] runs DSSP's controller) through `link`."""

    def __init__(self, link: links.Link, rank: int, owners: list[int], iterations: int, timeout_seconds: float,
                 codec: compression.MessageCodec = compression.PLAIN):
        self.link = link
        self.rank = rank
        self.owners = owners
        self.push_order = schedule.push_order(owners, rank)  # owner indices, rotated so that pushers do not collide
        self.iterations = iterations
        self.timeout = timeout_seconds
        self.parameters: list[torch.nn.Parameter] = []
        self.plan = shards.Partition([[] for _ in owners])  # each owner's pieces: none until attach lays them out
        self.codec = codec
        self.layouts: list[wire.Layout] = []  # of each owner's shard as it travels
        self.uncompressed: list[int] = []  # each shard's bytes before compression
        self.push_buffers: list[torch.Tensor] = []
        self.cuda = False
        self.weights_clock = 0  # the owners' smallest clock of the weights in the model now
        self.relayed = 0  # the DSSP grant (a push count) last relayed to the other owners
        self.counted = self._counters()  # the link's bytes sent, received, sent uncompressed, by level:
        # at the last record
        self.steps = 0  # synchronize() calls completed
        self.stop_heard = False  # an owner's answer said a worker reached the target
        self.closed = False

    # -- start ---------------------------------------------------------------------------------

    def attach(self, model: torch.nn.Module) -> None:
        """Lay out the shards, start the link's receivers for the largest of them, and pull the initial weights
        from their owners."""
        self.parameters = shards.trainable(model)
        self.plan = shards.Partition.of(self.parameters, len(self.owners))
        owned = [self.plan.shard(j, self.parameters) for j in range(len(self.owners))]
        self.layouts = [wire.Layout(self.codec.travelling(shard)) for shard in owned]
        self.uncompressed = [wire.Layout(shard).nbytes for shard in owned]
        self.cuda = any(p.is_cuda for p in self.parameters)
        self.push_buffers = [layout.empty(pin=self.cuda) for layout in self.layouts]
        self.link.start(max(layout.nbytes for layout in self.layouts))
        for owner in self.owners:
            self.link.send(owner, wire.Message(wire.MessageKind.PULL, self.rank, count=0, clock=0))
        self._install([self._expect_reply(j, "initial weights") for j in range(len(self.owners))])
        self.counted = self._counters()

    # -- one iteration -----------------------------------------------------------------------------

    def backward(self, loss: torch.Tensor) -> None:
        """This iteration's gradients, from None: what backward leaves is what the next push sends."""
        for p in self.parameters:
            p.grad = None
        loss.backward()

    def synchronize(self, step: int, timer: interfaces.Timer) -> None:
        started = time.perf_counter()
        # The gradient of this step was computed on weights of clock weights_clock.
        timer.set(keys.STALENESS, float(step - self.weights_clock))

        # push: gradient shards to their owners (on GPU, the copy to pinned memory is a device sync)
        gradients = [p.grad for p in self.parameters]
        encoding = 0.0
        for j in self.push_order:
            owner = self.owners[j]
            packing = time.perf_counter()
            payload = self.codec.pack(self.layouts[j], self.plan.shard(j, gradients), out=self.push_buffers[j]) \
                if len(self.layouts[j]) else None
            encoding += time.perf_counter() - packing
            push = wire.Message(wire.MessageKind.PUSH, self.rank, count=step + 1, payload=payload,
                                uncompressed=self.uncompressed[j] if payload is not None else None)
            self.link.send(owner, push)
        pushed = time.perf_counter()

        # wait: each owner answers when its gate lets this worker go, with its shard of the new weights.
        # Owner 0 first: a DSSP grant it carries must reach the others, which may hold this worker for it.
        replies = []
        for j in range(len(self.owners)):
            replies.append(self._expect_reply(j, f"shard {j} for iteration {step}"))
            if j == 0 and replies[0].grant > self.relayed:
                self.relayed = replies[0].grant
                for other in self.owners[1:]:
                    self.link.send(other, wire.Message(wire.MessageKind.GRANT, self.rank, count=step + 1,
                                                       grant=self.relayed))
        answered = time.perf_counter()

        # update: the new weights into the model, in place (decoded first, with compression)
        decoding = self._install(replies)
        self.weights_clock = min(reply.clock for reply in replies)
        self.stop_heard = self.stop_heard or any(reply.stop for reply in replies)
        ended = time.perf_counter()

        if not self.codec.compressing:  # packing is then the copy a transfer needs (communication), unpacking a view
            encoding = decoding = 0.0
        codec = encoding + decoding
        update = ended - answered - decoding
        wait = min(max(reply.held for reply in replies), answered - pushed)  # never more than we waited here
        timer.add(keys.TIME_WAIT, wait)
        timer.add(keys.TIME_UPDATE, update)
        timer.add(keys.TIME_CODEC, codec)
        timer.add(keys.TIME_COMM, max(0.0, (ended - started) - wait - update - codec))
        counted = self._counters()
        for key, now, before in zip(COUNTED, counted, self.counted):
            timer.add(key, float(now - before))
        self.counted = counted
        timer.span("push", started, pushed)
        for j, reply in enumerate(replies):
            timer.span(f"shard {j}", pushed, max(pushed, reply.received_at),
                       args={"owner": self.owners[j], "held": reply.held, "clock": reply.clock})
        for p in self.parameters:
            p.grad = None  # pushed; the next backward starts from zero
        self.steps += 1

    def _expect_reply(self, j: int, what: str) -> wire.Message:
        owner = self.owners[j]
        message = links.wait(self.link.mailboxes[owner], self.timeout, f"{what} from rank {owner}")
        if message.kind != wire.MessageKind.REPLY:
            raise links.LinkError(f"expected a reply from rank {owner}, got {message.kind.name}")
        return message

    def _counters(self) -> tuple[float, ...]:
        return (self.link.sent_bytes, self.link.received_bytes, self.link.sent_uncompressed_bytes,
                *(self.link.sent_by_level[level] for level in levels.BYTES_KEYS))

    def _install(self, replies: list[wire.Message]) -> float:
        """Copy the replies' weights into the model; the seconds spent decoding them."""
        decoding = 0.0
        with torch.no_grad():
            for j, reply in enumerate(replies):
                if not len(self.layouts[j]):
                    continue
                started = time.perf_counter()
                values = self.codec.unpack(self.layouts[j], reply.expect_payload())
                decoding += time.perf_counter() - started
                for parameter, value in zip(self.plan.shard(j, self.parameters), values):
                    parameter.copy_(value)
        return decoding

    # -- end -----------------------------------------------------------------------------------

    def should_stop(self, reached: bool, timer: interfaces.Timer) -> bool:
        """Whether this worker ends training now: its own evaluation `reached` the target (then every owner is
        told), or an owner's answer said another worker's did. Never waits; close() then ends as after the last
        iteration. Telling the owners is communication."""
        if reached and not self.stop_heard:
            with timer.phase(keys.TIME_COMM):
                for owner in self.owners:
                    self.link.send(owner, wire.Message(wire.MessageKind.STOP, self.rank, count=self.steps))
        if reached or self.stop_heard:
            self.iterations = self.steps
            return True
        return False

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
            self.link.send(owner, wire.Message(wire.MessageKind.DONE, self.rank, count=self.steps))
        for owner in self.owners:
            message = links.wait(self.link.mailboxes[owner], self.timeout, f"the goodbye of rank {owner}")
            if message.kind != wire.MessageKind.BYE:
                raise links.LinkError(f"expected the goodbye of rank {owner}, got {message.kind.name}")
