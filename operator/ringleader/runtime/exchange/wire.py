"""The messages of parameter-server and peer-to-peer synchronization, and how tensors become their bytes.

Used by link.py (which moves them), server.py (servers) and client.py (workers).
A message travels as one frame, one gloo send: a fixed header of float64 fields (exact for integers
below 2**53) and, for pushes and replies, the payload right after it: the shard's tensors packed back
to back, each at an 8-byte-aligned offset so it can be viewed in its own dtype without a copy. A
receiver posts a buffer for the largest frame it can get (gloo fills a larger buffer's front) and
reads the payload's size from the header. Both ends build the same `Layout` from the same model, so
shapes and dtypes never travel.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence

import torch

ALIGNMENT = 8  # bytes: the largest element size we view a payload slice as


class MessageKind(enum.IntEnum):
    PUSH = 1  # worker -> owner: a gradient shard
    PULL = 2  # worker -> owner: "send me your shard now" (the initial weights)
    DONE = 3  # worker -> owner: no more requests from this worker
    REPLY = 4  # owner -> worker: OK with the owner's shard of the new weights
    BYE = 5  # owner -> worker: DONE received; nothing more will come from this owner
    LOST = 6  # local only: the link to `sender` broke (the peer died or hung); `reason` says how
    FAILED = 7  # local only: this process's shard server failed; `reason` says why
    GRANT = 8  # worker -> owner: DSSP's controller (on owner 0) let me push through count `grant` unchecked
    STOP = 9  # worker -> owner: my evaluation reached the target; tell every worker to stop (`stop` in replies)


# handled by a shard server
REQUESTS = (MessageKind.PUSH, MessageKind.PULL, MessageKind.DONE, MessageKind.GRANT, MessageKind.STOP)

_FIELDS = ("kind", "sender", "count", "clock", "held", "version", "grant", "stop", "sent_at", "lead", "payload_bytes")
HEADER_BYTES = len(_FIELDS) * 8


@dataclasses.dataclass
class Message:
    kind: MessageKind
    sender: int  # the rank that sent it (for LOST: the rank lost)
    count: int = 0  # PUSH: the sender's pushes so far, this one included; GRANT: the push granted at
    clock: int = 0  # REPLY: the owner's clock (fewest pushes of any worker) of the weights sent
    held: float = 0.0  # REPLY: seconds the owner's gate held this OK back (the paradigm's wait)
    version: int = 0  # REPLY: updates the shard has applied so far
    grant: int = 0  # REPLY (owner 0, DSSP) and GRANT: the push count through which the worker may go unchecked
    stop: bool = False  # REPLY: a worker reached the target; stop after this iteration (model.target onReached Stop)
    sent_at: float = 0.0  # time.time() when the sender's NIC began to send it (set by the link;
    # the emulated ingress starts there)
    lead: float = 0.0  # seconds from the frame's real send to sent_at (its wait for the emulated NIC; set by the link)
    payload: torch.Tensor | None = None  # uint8 (bytes,) on the CPU, or None
    received_at: float = 0.0  # time.perf_counter() when the whole message had arrived (set by the link)
    reason: str = ""  # LOST and FAILED: what happened
    uncompressed: int | None = None  # on the sender only: the payload's bytes before spec.compression (None: as sent)

    def expect_payload(self) -> torch.Tensor:
        """The payload of a message that must carry one (a push to a shard, a reply with weights)."""
        if self.payload is None:
            raise ValueError(f"a {self.kind.name} message from rank {self.sender} (count {self.count}) carries no "
                             "payload where a shard's tensors were expected")
        return self.payload

    @property
    def payload_bytes(self) -> int:
        return 0 if self.payload is None else self.payload.numel()

    @property
    def wire_bytes(self) -> int:
        return HEADER_BYTES + self.payload_bytes

    @property
    def uncompressed_bytes(self) -> int:
        """What wire_bytes would have been without compression."""
        return self.wire_bytes if self.uncompressed is None else HEADER_BYTES + self.uncompressed


def encode(message: Message) -> torch.Tensor:
    """The message's frame: uint8 (HEADER_BYTES + payload_bytes,), a new buffer (the payload is copied, so
    the sender may reuse its own while the frame is in flight)."""
    values = [float(int(message.kind)), float(message.sender), float(message.count), float(message.clock),
              float(message.held), float(message.version), float(message.grant), float(message.stop),
              float(message.sent_at), float(message.lead), float(message.payload_bytes)]
    frame = torch.empty(message.wire_bytes, dtype=torch.uint8)
    frame[:HEADER_BYTES].view(torch.float64).copy_(torch.tensor(values, dtype=torch.float64))
    if message.payload is not None:
        frame[HEADER_BYTES:].copy_(message.payload)
    return frame


def empty_frame(largest_payload: int) -> torch.Tensor:
    """A receive buffer for any frame whose payload is at most `largest_payload` bytes."""
    return torch.empty(HEADER_BYTES + largest_payload, dtype=torch.uint8)


def decode(frame: torch.Tensor) -> Message:
    """The message in `frame` (a received buffer, possibly longer than the frame); its payload is a view of it."""
    kind, sender, count, clock, held, version, grant, stop, sent_at, lead, payload_bytes = \
        frame[:HEADER_BYTES].view(torch.float64).tolist()
    if HEADER_BYTES + int(payload_bytes) > frame.numel():
        raise ValueError(f"a frame of {HEADER_BYTES + int(payload_bytes)} bytes in a buffer of {frame.numel()}")
    payload = frame[HEADER_BYTES:HEADER_BYTES + int(payload_bytes)] if payload_bytes else None
    return Message(MessageKind(int(kind)), int(sender), int(count), int(clock), held, int(version), grant=int(grant),
                   stop=bool(stop), sent_at=sent_at, lead=lead, payload=payload)


def _aligned(offset: int) -> int:
    return (offset + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


class Layout:
    """Where each tensor of a fixed list (shapes and dtypes) sits in one flat byte buffer."""

    def __init__(self, like: Sequence[torch.Tensor]):
        self.shapes = [tuple(t.shape) for t in like]
        self.dtypes = [t.dtype for t in like]
        self.offsets: list[int] = []
        self.sizes: list[int] = []  # bytes of each tensor
        offset = 0
        for t in like:
            offset = _aligned(offset)
            self.offsets.append(offset)
            self.sizes.append(t.numel() * t.element_size())
            offset += self.sizes[-1]
        self.nbytes = _aligned(offset)

    def __len__(self) -> int:
        return len(self.shapes)

    def empty(self, pin: bool = False) -> torch.Tensor:
        """A CPU buffer for this layout (pinned when copies to or from a GPU will use it)."""
        return torch.zeros(self.nbytes, dtype=torch.uint8, pin_memory=pin)

    def views(self, buffer: torch.Tensor) -> list[torch.Tensor]:
        """The tensors inside `buffer` (uint8 (nbytes,)), as views of it: no copy."""
        if buffer.numel() != self.nbytes:
            raise ValueError(f"payload of {buffer.numel()} bytes where this shard layout has {self.nbytes}")
        return [buffer[offset:offset + size].view(dtype).view(shape)
                for offset, size, dtype, shape in zip(self.offsets, self.sizes, self.dtypes, self.shapes)]

    def pack(self, tensors: list[torch.Tensor | None], out: torch.Tensor | None = None) -> torch.Tensor:
        """Copy `tensors` (any device; None counts as zeros) into `out` or a new CPU buffer.

        Copies from a GPU are blocking (a device sync): the buffer is sent by another thread right after."""
        out = self.empty() if out is None else out
        for view, tensor in zip(self.views(out), tensors):
            if tensor is None:
                view.zero_()
            else:
                view.copy_(tensor.detach())
        return out
