"""This rank's messaging with its parameter servers, workers or peers: gloo point-to-point on a process group.

Used by parameter_server.py and peer_to_peer.py. One sender thread sends every outgoing message
in order (so an emulated NIC is shared, as a real one is); one receiver thread per remote rank
posts a blocking receive from that rank and sorts what arrives: requests (PUSH, PULL, DONE) into
`inbox` for this rank's shard server, responses (REPLY, BYE) into `mailboxes[rank]` for its worker.
Servers thus handle pushes in arrival order, and a peer that dies is noticed at once: a
receive from a specific rank fails when that rank's socket closes (an any-source receive would
not notice, and a gloo wait that times out closes the pair, so timeouts are used only as
the last word, never to poll). Messages to this rank itself (a peer's own shard) skip gloo.

A receiver stops after the last message its peer will send: DONE when the peer's worker asks
this rank's server, and BYE when this rank's worker asks the peer's server; so no receive is
left pending at the end. Every thread is a daemon: a failing rank exits without waiting for them.

The emulated link (spec.network.bandwidth) is one full-duplex NIC per rank, as analysis/models.py
prices it: the sender thread paces its NIC's sending side, one message after another, and `Ingress`
its receiving side, on which messages from every sender queue one after another. A message of S
bytes takes S/B on each side, and its turn runs on the emulated clock, not on the threads' wake-ups:
on the sending side it starts when the message was queued or when the previous one's S/B ended,
whichever is later (not when the sender thread got to run after its sleep); on the receiving side it
starts when its sender's turn did (the header carries that moment), not when this rank's receiver
thread got to run. The real transfer and the threads' wake-ups are thus hidden under the emulated
S/B (as the ring's are, shaping.py) rather than added to it; a message is never delivered before
its bytes are here.
"""

from __future__ import annotations

import queue
import threading
import time

import torch
import torch.distributed as dist

from ringleader.runtime import shaping
from ringleader.runtime.exchange import wire

# Tags of this protocol on its own process group; gloo matches messages per (peer, tag) in order.
TAG_HEADER = 71
TAG_PAYLOAD = 72


class Ingress:
    """The emulated receiving NIC: messages from all peers share its bandwidth, one after another."""

    def __init__(self, shaper: shaping.Shaper):
        self.shaper = shaper
        self.lock = threading.Lock()
        self.free_at = 0.0

    def arrive(self, nbytes: int, sent_at: float, seen: float) -> None:
        """Hold a message of `nbytes` until the emulated link has delivered it: its turn starts when its sender
        began to send it (`sent_at`, time.time() on the sender) or, if that reads later, when it was `seen`
        (time.perf_counter() here) and lasts S/B.

        The sender's clock is this host's when ranks share a machine. Across machines the turn is as exact as
        the clocks agree; a sender's clock running behind makes it early (never before the bytes are here),
        and the sender's own pacing still holds its NIC to the link's rate."""
        if not self.shaper.active:
            return
        started = min(seen, sent_at - (time.time() - time.perf_counter()))
        with self.lock:
            self.free_at = max(self.free_at, started) + self.shaper.seconds(nbytes)
            until = self.free_at
        pause = until - time.perf_counter()
        if pause > 0:
            time.sleep(pause)


class Link:
    """Messages between this rank and `requests_from` (whose workers ask this rank's server) and
    `replies_from` (whose servers answer this rank's worker), on `group`."""

    def __init__(self, group, rank: int, *, requests_from: list[int], replies_from: list[int],
                 shaper: shaping.Shaper):
        self.group = group
        self.rank = rank
        self.requests_from = set(requests_from)
        self.replies_from = set(replies_from)
        self.shaper = shaper
        self.ingress = Ingress(shaper)
        self.inbox: queue.Queue[wire.Message] = queue.Queue()
        self.mailboxes: dict[int, queue.Queue[wire.Message]] = {r: queue.Queue() for r in self.replies_from}
        self._outgoing: queue.Queue = queue.Queue()  # (destination, message, when queued: time.perf_counter())
        self._egress_free_at = 0.0  # when the emulated sending NIC is done with the last message (perf_counter)
        self._broken: set[int] = set()
        # What crossed the network, for this rank's records: a peer's NIC carries its worker's pushes and its
        # shard server's replies alike. Sent bytes count when queued, received bytes when arrived.
        self._counting = threading.Lock()
        self.sent_bytes = 0
        self.received_bytes = 0
        self.sent_uncompressed_bytes = 0  # what sent_bytes would have been without spec.compression
        remote = sorted((self.requests_from | self.replies_from) - {rank})
        self._receivers = [threading.Thread(target=self._receive_from, args=(peer,), daemon=True,
                                            name=f"ringleader-recv-{peer}") for peer in remote]
        self._sender = threading.Thread(target=self._send_all, daemon=True, name="ringleader-send")

    def start(self) -> Link:
        for thread in self._receivers:
            thread.start()
        self._sender.start()
        return self

    # -- sending -------------------------------------------------------------------------------

    def send(self, destination: int, message: wire.Message) -> None:
        """Queue `message` for `destination` (delivered in order per destination); never blocks."""
        if destination == self.rank:
            message.received_at = time.perf_counter()
            self._route(message)
        else:
            with self._counting:
                self.sent_bytes += message.wire_bytes
                self.sent_uncompressed_bytes += message.uncompressed_bytes
            self._outgoing.put((destination, message, time.perf_counter()))

    def _send_all(self) -> None:
        while True:
            item = self._outgoing.get()
            if item is None:
                return
            destination, message, queued = item
            if destination in self._broken:
                continue
            # The emulated NIC takes the message when it was handed over, or when the previous one has left.
            started = max(queued, self._egress_free_at)
            self._egress_free_at = started + self.shaper.seconds(message.wire_bytes)
            message.sent_at = started + (time.time() - time.perf_counter())
            try:
                dist.send(wire.encode_header(message), destination, group=self.group, tag=TAG_HEADER)
                if message.payload is not None and message.payload.numel():
                    dist.send(message.payload, destination, group=self.group, tag=TAG_PAYLOAD)
            except Exception as error:  # noqa: BLE001 - the destination died: everyone waiting on it must hear
                self._broken.add(destination)
                self._lost(destination, f"sending to rank {destination} failed: {_first_line(error)}")
                continue
            self.shaper.pace(message.wire_bytes, started)

    # -- receiving -----------------------------------------------------------------------------

    def _receive_from(self, peer: int) -> None:
        awaiting = set()
        if peer in self.requests_from:
            awaiting.add(wire.Kind.DONE)
        if peer in self.replies_from:
            awaiting.add(wire.Kind.BYE)
        try:
            while awaiting:
                header = wire.empty_header()
                dist.recv(header, peer, group=self.group, tag=TAG_HEADER)
                seen = time.perf_counter()
                message, payload_bytes = wire.decode_header(header)
                if payload_bytes:
                    message.payload = torch.empty(payload_bytes, dtype=torch.uint8)
                    dist.recv(message.payload, peer, group=self.group, tag=TAG_PAYLOAD)
                self.ingress.arrive(message.wire_bytes, message.sent_at, seen)
                message.received_at = time.perf_counter()
                with self._counting:
                    self.received_bytes += message.wire_bytes
                self._route(message)
                awaiting.discard(message.kind)
        except Exception as error:  # noqa: BLE001 - the peer died or hung past the timeout
            self._lost(peer, f"receiving from rank {peer} failed: {_first_line(error)}")

    def _route(self, message: wire.Message) -> None:
        if message.kind in wire.REQUESTS:
            self.inbox.put(message)
        else:
            self.mailboxes[message.sender].put(message)

    def _lost(self, peer: int, reason: str) -> None:
        lost = wire.Message(wire.Kind.LOST, peer, reason=reason)
        self.inbox.put(lost)
        for mailbox in self.mailboxes.values():
            mailbox.put(lost)

    def fail_worker(self, reason: str) -> None:
        """Tell this rank's worker that its own shard server failed (peer-to-peer)."""
        failed = wire.Message(wire.Kind.FAILED, self.rank, reason=reason)
        for mailbox in self.mailboxes.values():
            mailbox.put(failed)

    # -- ending --------------------------------------------------------------------------------

    def close(self, timeout_seconds: float) -> None:
        """Send what is queued, then stop; receivers have stopped by themselves after their peers' last message."""
        self._outgoing.put(None)
        deadline = time.monotonic() + timeout_seconds
        self._sender.join(max(0.0, deadline - time.monotonic()))
        for thread in self._receivers:
            thread.join(max(0.0, deadline - time.monotonic()))


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def wait(mailbox: queue.Queue, timeout_seconds: float, what: str) -> wire.Message:
    """The next message of `mailbox`; raises LinkError when the peer was lost, the server failed, or
    nothing came within the timeout. `what` names what was awaited, for the message."""
    try:
        message = mailbox.get(timeout=timeout_seconds)
    except queue.Empty:
        raise LinkError(f"no {what} within {timeout_seconds:.0f}s (RINGLEADER_TIMEOUT_SECONDS): "
                        "the sender hangs or is far slower than expected") from None
    if message.kind == wire.Kind.LOST:
        raise LinkError(f"lost rank {message.sender} while waiting for {what}: {message.reason}")
    if message.kind == wire.Kind.FAILED:
        raise LinkError(f"this rank's shard server failed: {message.reason}")
    return message


class LinkError(RuntimeError):
    """A peer is gone or silent past the timeout: the trial cannot go on."""
