"""This rank's messaging with its parameter servers, workers or peers: gloo point-to-point on a process group.

Used by parameter_server.py and peer_to_peer.py. A message is one frame, one gloo send (wire.py).
`send` posts it at once from the calling thread (gloo sends asynchronously, and a peer's worker and
shard server post from their own threads; one frame per message keeps each destination's order);
one receiver thread per remote rank posts a blocking receive from that rank and sorts what arrives:
requests (PUSH, PULL, DONE) into `inbox` for this rank's shard server, responses (REPLY, BYE) into
`mailboxes[rank]` for its worker. Servers thus handle pushes in arrival order, and a peer that dies
is noticed at once: a receive from a specific rank fails when that rank's socket closes (an
any-source receive would not notice: it fails only at the group's timeout, naming no one, as
bench/probe_gloo_any_source.py shows; and a gloo wait that times out closes the pair, so timeouts are
used only as the last word, never to poll). Messages to this rank itself (a peer's own shard) skip gloo.

A receiver stops after the last message its peer will send: DONE when the peer's worker asks
this rank's server, and BYE when this rank's worker asks the peer's server; so no receive is
left pending at the end. Every thread is a daemon: a failing rank exits without waiting for them.

The emulated link (spec.network.bandwidth) is this rank's card (nic.py), full duplex, as models/cost_models.py
prices it: a message reserves its sender's sending side when sent (after the messages before it), and its
receiver's receiving side from the moment its sending turn began (the header carries that moment; messages
from every sender take it in that order), S/B on each. The frame leaves at once with its sending turn written
in, and its reader (`Delivery`) gets it when its receiving turn ends, so the real transfer and the threads'
wake-ups are hidden under the emulated S/B (as the ring's are) rather than added to it, and a message is never
delivered before its bytes are here. The card is the pod's (nic.pod_card): a message to a rank of the same pod
takes no turn on it, and what is sent is counted by where it goes (contract/levels.py).
"""

from __future__ import annotations

import collections
import datetime
import queue
import threading
import time

import torch.distributed as dist

from ringleader.contract import levels as levels_
from ringleader.runtime import nic as nic_
from ringleader.runtime.exchange import wire

# The tag of this protocol's frames on its own process group; gloo matches messages per (peer, tag) in order.
TAG_FRAME = 71
IN_FLIGHT_PER_PEER = 4  # frames kept per remote rank before the oldest is waited for (twice what can be unreceived)


class Delivery:
    """The messages for one reader (this rank's shard server, or its worker's answers from one owner), each
    given out once it is in: a frame when its turn on the emulated receiving NIC ends, a message without one
    (its own rank's, news of a loss) when put; in the order they came in, one sender's in the order sent.

    The reader sleeps through the turn, not the receiver thread: a message's end of turn is then one wake-up
    from its use, where a receiver holding it would wake, then wake the reader. A message put while the reader
    sleeps wakes it, so one that comes in sooner is not held behind the one it sleeps on."""

    def __init__(self, nic: nic_.EmulatedNic):
        self.nic = nic
        self.ready = threading.Condition()
        # (message, turn, put at), in the order put
        self.waiting: list[tuple[wire.Message, nic_.Turn | None, float]] = []

    def put(self, message: wire.Message, turn: nic_.Turn | None = None) -> None:
        """`message` for the reader once `turn` is over, or at once without a turn."""
        with self.ready:
            self.waiting.append((message, turn, time.perf_counter()))
            self.ready.notify()

    def get(self, timeout: float) -> wire.Message:
        """The next message in, its `received_at` set; raises queue.Empty when none was put within `timeout` seconds."""
        deadline = time.perf_counter() + timeout
        with self.ready:
            while True:
                now = time.perf_counter()
                if self.waiting:
                    index, pause = self._next(now)
                    if pause <= 0:
                        message = self.waiting.pop(index)[0]
                        message.received_at = now
                        return message
                elif now < deadline:
                    pause = deadline - now
                else:
                    raise queue.Empty
                self.ready.wait(pause)

    def _next(self, now: float) -> tuple[int, float]:
        """Which waiting message is in first (of each sender's, only the oldest can be), and in how many seconds."""
        firsts: dict[int, int] = {}
        for index, (message, _, _) in enumerate(self.waiting):
            firsts.setdefault(message.sender, index)
        pauses = {}
        for index in firsts.values():
            _, turn, put_at = self.waiting[index]
            pauses[index] = self.nic.remaining(turn, now) if turn else put_at - now
        index = min(pauses, key=pauses.__getitem__)
        return index, pauses[index]


class Link:
    """Messages between this rank and `requests_from` (whose workers ask this rank's server) and
    `replies_from` (whose servers answer this rank's worker), on `group`."""

    def __init__(self, group, rank: int, *, requests_from: list[int], replies_from: list[int],
                 nic: nic_.EmulatedNic, levels: levels_.Levels | None = None):
        self.group = group
        self.rank = rank
        self.levels = levels
        self.requests_from = set(requests_from)
        self.replies_from = set(replies_from)
        self.nic = nic
        self.inbox = Delivery(nic)
        self.mailboxes = {r: Delivery(nic) for r in self.replies_from}
        # Sending: the frames in flight (gloo needs them alive until sent), under one lock with the sending turns,
        # so that a frame's turn and its place in its destination's order agree.
        self._sending = threading.Lock()
        self._in_flight: collections.deque = collections.deque()  # (destination, gloo work), oldest first
        self._broken: set[int] = set()
        # What crossed the network, for this rank's records: a peer's NIC carries its worker's pushes and its
        # shard server's replies alike. Sent bytes count when sent, received bytes when arrived.
        self._counting = threading.Lock()
        self.sent_bytes = 0
        self.received_bytes = 0
        self.sent_uncompressed_bytes = 0  # what sent_bytes would have been without spec.compression
        self.sent_by_level = levels_.empty()  # sent_bytes by where they went
        self._remote = sorted((self.requests_from | self.replies_from) - {rank})
        self._receivers: list[threading.Thread] = []

    def start(self, largest_payload: int) -> Link:
        """Start receiving frames whose payloads are at most `largest_payload` bytes (the largest shard as it
        travels)."""
        self._receivers = [threading.Thread(target=self._receive_from, args=(peer, largest_payload), daemon=True,
                                            name=f"ringleader-recv-{peer}") for peer in self._remote]
        for thread in self._receivers:
            thread.start()
        return self

    # -- sending -------------------------------------------------------------------------------

    def send(self, destination: int, message: wire.Message) -> None:
        """Send `message` to `destination` (delivered in order per destination); never waits for the transfer."""
        if destination == self.rank:
            self._route(message)
            return
        with self._counting:
            self.sent_bytes += message.wire_bytes
            self.sent_uncompressed_bytes += message.uncompressed_bytes
            self.sent_by_level[self._level(destination)] += message.wire_bytes
        with self._sending:
            if destination in self._broken:
                return
            # The emulated card takes the message now, or when the previous one has left; inside the pod, no card.
            now = time.perf_counter()
            started = self.nic.send(message.wire_bytes, now) if self._leaves_pod(destination) else now
            message.sent_at = started + (time.time() - time.perf_counter())
            message.lead = started - now
            try:
                self._in_flight.append((destination, dist.isend(wire.encode(message), destination, group=self.group,
                                                                tag=TAG_FRAME)))
            except Exception as error:  # noqa: BLE001 - the destination died: everyone waiting on it must hear
                self._fail_send(destination, error)
            # A frame sent rounds of messages ago has long arrived (a rank has at most a push and a reply on the
            # way to each peer): its wait returns at once, or says it failed.
            while len(self._in_flight) > IN_FLIGHT_PER_PEER * len(self._remote):
                self._settle(*self._in_flight.popleft())

    def _settle(self, destination: int, work, timeout_seconds: float | None = None) -> None:
        try:
            if timeout_seconds is None:
                work.wait()
            else:
                work.wait(datetime.timedelta(seconds=timeout_seconds))
        except Exception as error:  # noqa: BLE001 - a failed send, whatever gloo raises, means the peer is lost
            self._fail_send(destination, error)

    def _fail_send(self, destination: int, error: Exception) -> None:
        if destination not in self._broken:
            self._broken.add(destination)
            self._lost(destination, f"sending to rank {destination} failed: {_first_line(error)}")

    # -- receiving -----------------------------------------------------------------------------

    def _receive_from(self, peer: int, largest_payload: int) -> None:
        awaiting = set()
        if peer in self.requests_from:
            awaiting.add(wire.MessageKind.DONE)
        if peer in self.replies_from:
            awaiting.add(wire.MessageKind.BYE)
        try:
            while awaiting:
                frame = wire.empty_frame(largest_payload)
                dist.recv(frame, peer, group=self.group, tag=TAG_FRAME)
                seen = time.perf_counter()
                message = wire.decode(frame)
                with self._counting:
                    self.received_bytes += message.wire_bytes
                turn = receiving_turn(self.nic, message.wire_bytes, message.sent_at, seen, message.lead) \
                    if self._leaves_pod(peer) else None
                self._route(message, turn)
                awaiting.discard(message.kind)
        except Exception as error:  # noqa: BLE001 - the peer died or hung past the timeout
            self._lost(peer, f"receiving from rank {peer} failed: {_first_line(error)}")

    def _level(self, other: int) -> str:
        return levels_.NETWORK if self.levels is None else self.levels.between(self.rank, other)

    def _leaves_pod(self, other: int) -> bool:
        return self.levels is None or self.levels.leaves_pod(self.rank, other)

    def _route(self, message: wire.Message, turn: nic_.Turn | None = None) -> None:
        if message.kind in wire.REQUESTS:
            self.inbox.put(message, turn)
        else:
            self.mailboxes[message.sender].put(message, turn)

    def _lost(self, peer: int, reason: str) -> None:
        lost = wire.Message(wire.MessageKind.LOST, peer, reason=reason)
        self.inbox.put(lost)
        for mailbox in self.mailboxes.values():
            mailbox.put(lost)

    def fail_worker(self, reason: str) -> None:
        """Tell this rank's worker that its own shard server failed (peer-to-peer)."""
        failed = wire.Message(wire.MessageKind.FAILED, self.rank, reason=reason)
        for mailbox in self.mailboxes.values():
            mailbox.put(failed)

    # -- ending --------------------------------------------------------------------------------

    def close(self, timeout_seconds: float) -> None:
        """Wait for the frames in flight, then for the receivers, which stop by themselves after their peers' last
        message."""
        deadline = time.monotonic() + timeout_seconds
        with self._sending:
            while self._in_flight and time.monotonic() < deadline:
                destination, work = self._in_flight.popleft()
                self._settle(destination, work, timeout_seconds=max(0.001, deadline - time.monotonic()))
        for thread in self._receivers:
            thread.join(max(0.0, deadline - time.monotonic()))
        self.nic.close()


def receiving_turn(nic: nic_.EmulatedNic, nbytes: int, sent_at: float, seen: float,
                   lead: float = 0.0) -> nic_.Turn | None:
    """The receiving turn of a message of `nbytes` on `nic` (None when the link is not emulated): from when its
    sender's turn began (`sent_at`, time.time() on the sender) or, if that reads later, `lead` seconds after it was
    `seen` (time.perf_counter() here; the frame left `lead` seconds before its sending turn).

    The sender's clock is this host's when ranks share a machine. Across machines the turn is as exact as the
    clocks agree; a sender's clock running behind makes it early (never before the bytes are here), and the
    sender's own turns still hold its card to the link's rate."""
    return nic.receive(nbytes, min(seen + lead, sent_at - (time.time() - time.perf_counter())))


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def wait(mailbox: Delivery, timeout_seconds: float, what: str) -> wire.Message:
    """The next message of `mailbox`; raises LinkError when the peer was lost, the server failed, or
    nothing came within the timeout. `what` names what was awaited, for the message."""
    try:
        message = mailbox.get(timeout_seconds)
    except queue.Empty:
        raise LinkError(f"no {what} within {timeout_seconds:.0f}s (RINGLEADER_TIMEOUT_SECONDS): "
                        "the sender hangs or is far slower than expected") from None
    if message.kind == wire.MessageKind.LOST:
        raise LinkError(f"lost rank {message.sender} while waiting for {what}: {message.reason}")
    if message.kind == wire.MessageKind.FAILED:
        raise LinkError(f"this rank's shard server failed: {message.reason}")
    return message


class LinkError(RuntimeError):
    """A peer is gone or silent past the timeout: the trial cannot go on."""
