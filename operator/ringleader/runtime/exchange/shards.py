"""Which owner (parameter server, or peer in PeerToPeer) holds which elements of the parameters; every rank computes the
same.

Equal bytes, whatever the layer sizes: the trainable tensors, flattened and laid end to end in model
order, are cut into one contiguous byte range per owner, each cut moved to the nearest element
boundary. A tensor that straddles a cut is split into element ranges, so no owner carries more than
1/k of the model plus one element (as a key-value store that splits large arrays across servers
does, here with no size bound: a bound would leave whole tensors, and the imbalance, below it).
Whole tensors would not do: the quickstart mlp's first layer alone is ~92 % of its bytes.

Owners apply the optimizer to their ranges as flat tensors; the optimizers (optimizers.py: SGD with
momentum and weight decay, Adam) are elementwise, so a split changes no arithmetic.
Used by parameter_server.py, peer_to_peer.py and client.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TypeVar

import torch

# Parameters (always tensors) or their gradients (None where there is none): a shard keeps which it was given.
MaybeTensor = TypeVar("MaybeTensor", torch.Tensor, torch.Tensor | None)


def trainable(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The tensors servers keep and workers push gradients of, in model order, on every rank alike."""
    return [p for p in model.parameters() if p.requires_grad]


@dataclasses.dataclass(frozen=True)
class Piece:
    """Elements [start, stop) of tensor `tensor` (its index in model order), flattened."""

    tensor: int
    start: int
    stop: int


def cut(numels: list[int], element_sizes: list[int], owners: int) -> list[list[Piece]]:
    """Each owner's pieces, in model order, for tensors of `numels` elements of `element_sizes` bytes."""
    if owners < 1:
        raise ValueError(f"need at least one owner, got {owners}")
    total = sum(n * e for n, e in zip(numels, element_sizes))
    pieces: list[list[Piece]] = [[] for _ in range(owners)]
    owner, begun = 0, 0  # begun: the byte offset where the current tensor starts
    for index, (numel, size) in enumerate(zip(numels, element_sizes)):
        start = 0
        while start < numel:
            # The current owner's range ends at byte total*(owner+1)/owners: at the nearest element (halves up),
            # in integers so that every rank cuts alike.
            end_byte = total * (owner + 1) // owners
            nearest = (2 * (end_byte - begun) + size) // (2 * size)
            stop = numel if owner == owners - 1 else min(numel, max(start, nearest))
            if stop > start:
                pieces[owner].append(Piece(index, start, stop))
                start = stop
            if start < numel:
                owner += 1
        begun += numel * size
    return pieces


@dataclasses.dataclass(frozen=True)
class Partition:
    """The shards of a parameter list: `pieces[j]` are the element ranges owner j holds, in model order."""

    pieces: list[list[Piece]]

    @classmethod
    def of(cls, parameters: Sequence[torch.Tensor], owners: int) -> Partition:
        for index, parameter in enumerate(parameters):
            if not parameter.is_contiguous():
                raise ValueError(f"trainable parameter {index} (shape {tuple(parameter.shape)}) is not contiguous: "
                                 "shards are element ranges of contiguous tensors; make the model's parameters "
                                 "contiguous (e.g. no channels_last) for ParameterServer and PeerToPeer")
        return cls(cut([p.numel() for p in parameters], [p.element_size() for p in parameters], owners))

    @property
    def owners(self) -> int:
        return len(self.pieces)

    def shard(self, owner: int, tensors: Sequence[MaybeTensor]) -> list[MaybeTensor]:
        """Owner `owner`'s part of `tensors` (parameters or their gradients, in model order) as flat views:
        writing into a piece of a parameter writes into the parameter. None (no gradient) stays None."""
        return [None if (tensor := tensors[p.tensor]) is None else tensor.detach().reshape(-1)[p.start:p.stop]
                for p in self.pieces[owner]]

    def nbytes(self, owner: int, parameters: list[torch.Tensor]) -> int:
        """The bytes of owner `owner`'s shard (before the wire's alignment)."""
        return sum((p.stop - p.start) * parameters[p.tensor].element_size() for p in self.pieces[owner])
