"""Gradient compression (spec.compression): the codecs ring.py runs around each bucket's collective, and the
message codec exchange/ packs pushes and replies with.

A ring bucket's exchange is a short list of rounds, each one collective on a flat payload: summed by an
allreduce, or gathered from every rank. A codec makes the first round from the bucket (`encode`), the
next from the one just completed (`advance`, None when there is no next), and finally writes the average
back into the bucket (`decode`). The bucket holds g/N (the ring seeds backward with 1/N), so a sum is
already an average and no codec divides.

    FP16, BF16  one allreduce of the bucket cast to 16 bits. FP16 multiplies by a power of two first, the
                same on every rank (chosen from the previous iteration's sum, which every rank has alike),
                so small gradients keep their precision; a sum that overflowed is redone at a smaller scale.
    PowerSGD    each gradient matrix M (n x m, a parameter viewed as its first dimension by the rest) is
                sent as P = M Q (n x r), then Q = M^T orth(P) (m x r): two allreduces; Q is kept for the
                next iteration (warm start); tensors that would not shrink by half go whole in the first
                round; M ~ orth(P) Q^T. With error feedback, what this rank's M lost is added next time:
                its M less its 1/N share of the approximated sum (the sum every rank decodes is N shares).
    TopK        the k = ceil(ratio * numel) largest values of the bucket and their indices, gathered from
                every rank and added up; with error feedback, what was not sent is added next time.

Parameter servers and peers exchange whole messages, not sums: `MessageCodec` casts a message's tensors
to 16 bits (FP16 scaled per tensor) and back. PowerSGD and TopK need collectives (api/variants.py's CODECS).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Protocol, Sequence, TypeVar

import torch
import torch.distributed as dist

from ringleader.api import spec, variants
from ringleader.contract import lowrank

FP16_MAX = 65504.0
# FP16's scale leaves this factor of headroom under FP16_MAX: one rank's share may exceed the sum it adds to.
FP16_HEADROOM = 2.0 ** 8
FP16_SCALE_BOUNDS = (2.0 ** -24, 2.0 ** 24)
FP16_RETRIES = 16  # scale divisions (by 16) before an overflowing sum is kept as it is: the gradient is not finite
ORTHOGONALIZATION_EPSILON = 1e-8  # keeps a zero column (a parameter without gradient) from dividing by zero
CAST_DTYPES = {variants.CompressionMethod.FP16: torch.float16, variants.CompressionMethod.BF16: torch.bfloat16}


def fp16_scale(largest: float) -> float:
    """The power of two that brings `largest` to FP16_MAX / FP16_HEADROOM (within FP16_SCALE_BOUNDS); 1 when
    `largest` is 0 or not finite."""
    if not math.isfinite(largest) or largest <= 0:
        return 1.0
    wanted = 2.0 ** math.floor(math.log2(FP16_MAX / FP16_HEADROOM / largest))
    return min(max(wanted, FP16_SCALE_BOUNDS[0]), FP16_SCALE_BOUNDS[1])


@dataclasses.dataclass
class Round:
    """One collective of a bucket's exchange: `payload` summed in place, or gathered into `gathered`."""

    payload: torch.Tensor  # (numel,), on the bucket's device
    gather: bool = False
    gathered: list[torch.Tensor] = dataclasses.field(default_factory=list)  # gather: every rank's payload

    def wire_bytes(self, world: int) -> float:
        """Bytes this rank sends for it: 2(N-1)/N of the payload in a ring allreduce, N-1 payloads in a gather."""
        size = self.payload.numel() * self.payload.element_size()
        return (world - 1) * size if self.gather else 2.0 * (world - 1) / world * size

    def launch(self, world: int, group=None):
        """Start the collective (asynchronous): the work to wait on."""
        if self.gather:
            self.gathered = [torch.empty_like(self.payload) for _ in range(world)]
            return dist.all_gather(self.gathered, self.payload, group=group, async_op=True)
        return dist.all_reduce(self.payload, group=group, async_op=True)


class BucketCodec(Protocol):
    """What ring.py asks of a method, per bucket; it keeps its own state (scale, factors, error) across iterations."""

    def encode(self, flat: torch.Tensor) -> Round:
        """The first round, from this rank's bucket (g/N); may change `flat`, which decode overwrites."""

    def advance(self, done: Round) -> Round | None:
        """After `done` completed on every rank: the next round, or None. Decides alike on every rank."""

    def decode(self, flat: torch.Tensor) -> None:
        """Write the average into `flat`."""


T = TypeVar("T")


def _encoded(state: T | None) -> T:
    """What a codec's encode kept for its advance and decode: ring.py calls encode first, for every bucket."""
    if state is None:
        raise RuntimeError("a bucket codec's advance or decode ran before its encode")
    return state


class CastCodec:
    """FP16 or BF16: one allreduce of the bucket in 16 bits; FP16 scaled by a power of two agreed by every rank."""

    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype
        self.scaled = dtype == torch.float16
        self.scale = 1.0  # the next encoding's
        self.used = 1.0  # the scale of the round in flight
        self.retries = 0
        self.flat: torch.Tensor | None = None
        self.round: Round | None = None

    def encode(self, flat: torch.Tensor) -> Round:
        self.flat, self.retries = flat, 0
        return self._cast(flat)

    def _cast(self, flat: torch.Tensor) -> Round:
        payload = torch.empty(flat.shape, dtype=self.dtype, device=flat.device)
        self.used = self.scale
        if self.used != 1.0:
            torch.mul(flat, self.used, out=payload)  # scaled in float32, then rounded once
        else:
            payload.copy_(flat)
        self.round = Round(payload)
        return self.round

    def advance(self, done: Round) -> Round | None:
        if not self.scaled or not done.payload.numel():
            return None
        # The sum is the same on every rank, and so is this decision. It reads the device (a sync on GPU).
        largest = done.payload.abs().max().float().item()
        if not math.isfinite(largest):
            if self.retries < FP16_RETRIES and self.scale > FP16_SCALE_BOUNDS[0]:
                self.scale = max(self.scale / 2.0 ** 4, FP16_SCALE_BOUNDS[0])
                self.retries += 1
                return self._cast(_encoded(self.flat))  # overflowed: the same bucket again, at a smaller scale
            return None  # not finite at any scale: the gradient itself is not
        self.scale = fp16_scale(largest / self.used)  # the next iteration's, from this sum unscaled
        return None

    def decode(self, flat: torch.Tensor) -> None:
        flat.copy_(_encoded(self.round).payload)
        if self.used != 1.0:
            flat.div_(self.used)  # in float32: a power of two, exact
        self.round = self.flat = None


def orthogonalize(matrix: torch.Tensor, epsilon: float = ORTHOGONALIZATION_EPSILON) -> None:
    """Gram-Schmidt on the columns of `matrix` (rows x r), in place."""
    for i in range(matrix.shape[1]):
        column = matrix[:, i:i + 1]
        column.div_(torch.linalg.vector_norm(column) + epsilon)
        if i + 1 < matrix.shape[1]:
            rest = matrix[:, i + 1:]
            rest.sub_(column * (column * rest).sum(dim=0, keepdim=True))


class PowerSgdCodec:
    """PowerSGD on one bucket: low-rank factors of its matrices in two allreduces, the rest whole in the first."""

    def __init__(self, shapes: Sequence[torch.Size], rank: int, error_feedback: bool, seed: int, world: int):
        self.error_feedback = error_feedback
        self.world = world
        self.seed = seed
        self.numels = [math.prod(shape) for shape in shapes]
        offsets = [sum(self.numels[:i]) for i in range(len(shapes))]
        self.whole: list[tuple[int, int]] = []  # (offset, numel) of the tensors sent as they are
        self.matrices: list[tuple[int, int, int, int]] = []  # (offset, n, m, r) of those sent as factors
        for shape, offset, numel in zip(shapes, offsets, self.numels):
            factored = lowrank.factors(shape, rank)
            if factored:
                self.matrices.append((offset, *factored))
            else:
                self.whole.append((offset, numel))
        self.whole_numel = sum(numel for _, numel in self.whole)
        self.qs: list[torch.Tensor] = []  # m x r per matrix, kept across iterations (warm start)
        self.error: torch.Tensor | None = None
        self.before: torch.Tensor | None = None
        self.flat: torch.Tensor | None = None
        self.ps: list[torch.Tensor] = []
        self.first: Round | None = None

    def _matrix(self, flat: torch.Tensor, offset: int, n: int, m: int) -> torch.Tensor:
        return flat[offset:offset + n * m].view(n, m)

    def _start_factors(self, flat: torch.Tensor) -> None:
        """Random Q, the same on every rank (seeded), orthogonalized: the first iteration's projection."""
        generator = torch.Generator().manual_seed(self.seed)
        self.qs = [torch.randn(m, r, generator=generator, dtype=flat.dtype).to(flat.device)
                   for _, _, m, r in self.matrices]

    def encode(self, flat: torch.Tensor) -> Round:
        self.flat = flat
        if self.error_feedback:
            if self.error is None:
                self.error = torch.zeros_like(flat)
            flat.add_(self.error)
            self.before = flat.clone()
        if not self.qs:
            self._start_factors(flat)
        # first round: [tensors sent whole | P of each matrix], summed
        payload = torch.empty(self.whole_numel + sum(n * r for _, n, _, r in self.matrices), dtype=flat.dtype,
                              device=flat.device)
        at = 0
        for offset, numel in self.whole:
            payload[at:at + numel].copy_(flat[offset:offset + numel])
            at += numel
        self.ps = []
        for (offset, n, m, r), q in zip(self.matrices, self.qs):
            orthogonalize(q)
            p = payload[at:at + n * r].view(n, r)
            torch.matmul(self._matrix(flat, offset, n, m), q, out=p)
            self.ps.append(p)
            at += n * r
        self.first = Round(payload)
        return self.first

    def advance(self, done: Round) -> Round | None:
        if done is not self.first or not self.matrices:
            return None
        # second round: Q = M^T orth(P) of each matrix, summed (the P were summed in the first)
        flat = _encoded(self.flat)
        payload = torch.empty(sum(m * r for _, _, m, r in self.matrices), dtype=flat.dtype, device=flat.device)
        at, qs = 0, []
        for (offset, n, m, r), p in zip(self.matrices, self.ps):
            orthogonalize(p)
            q = payload[at:at + m * r].view(m, r)
            torch.matmul(self._matrix(flat, offset, n, m).t(), p, out=q)
            qs.append(q)
            at += m * r
        self.qs = qs
        return Round(payload)

    def decode(self, flat: torch.Tensor) -> None:
        at, first = 0, _encoded(self.first)
        for offset, numel in self.whole:
            flat[offset:offset + numel].copy_(first.payload[at:at + numel])
            at += numel
        for (offset, n, m, _), p, q in zip(self.matrices, self.ps, self.qs):
            torch.matmul(p, q.t(), out=self._matrix(flat, offset, n, m))
        if self.error_feedback:
            # this rank's share of the sum
            torch.sub(_encoded(self.before), flat, alpha=1.0 / self.world, out=_encoded(self.error))
            self.before = None
        self.first, self.ps, self.flat = None, [], None


class TopKCodec:
    """TopK on one bucket: the k largest values with their indices, gathered from every rank and added up."""

    def __init__(self, numel: int, ratio: float, error_feedback: bool):
        self.k = max(1, min(numel, math.ceil(ratio * numel)))
        self.error_feedback = error_feedback
        self.error: torch.Tensor | None = None
        self.round: Round | None = None

    def encode(self, flat: torch.Tensor) -> Round:
        error = None
        if self.error_feedback:
            if self.error is None:
                self.error = torch.zeros_like(flat)
            error = self.error
            flat.add_(error)
        indices = torch.topk(flat.abs(), self.k, sorted=False).indices  # (k,)
        values = flat[indices]  # (k,)
        if error is not None:
            error.copy_(flat)
            error[indices] = 0  # what was not sent waits for the next iteration
        # one payload of bytes: the values in their dtype, then the indices as int32
        self.round = Round(torch.cat([values.view(torch.uint8), indices.to(torch.int32).view(torch.uint8)]),
                           gather=True)
        return self.round

    def advance(self, done: Round) -> Round | None:
        return None

    def decode(self, flat: torch.Tensor) -> None:
        value_bytes = self.k * flat.element_size()
        flat.zero_()
        for piece in _encoded(self.round).gathered:
            flat.index_add_(0, piece[value_bytes:].view(torch.int32).to(torch.int64),
                            piece[:value_bytes].view(flat.dtype))
        self.round = None


BUCKET_CODECS: dict[variants.CompressionMethod, Callable[[spec.Compression, Sequence[torch.Size], int, int],
                                                         BucketCodec | None]] = {
    variants.CompressionMethod.NONE: lambda compression, shapes, seed, world: None,
    variants.CompressionMethod.FP16: lambda compression, shapes, seed, world: CastCodec(
        CAST_DTYPES[compression.method]),
    variants.CompressionMethod.BF16: lambda compression, shapes, seed, world: CastCodec(
        CAST_DTYPES[compression.method]),
    variants.CompressionMethod.POWER_SGD: lambda compression, shapes, seed, world: PowerSgdCodec(
        shapes, compression.rank, compression.error_feedback, seed, world),
    variants.CompressionMethod.TOP_K: lambda compression, shapes, seed, world: TopKCodec(
        sum(math.prod(shape) for shape in shapes), compression.ratio, compression.error_feedback),
}
"""BUCKET_CODECS: per method, the codec of a ring bucket (compression, shapes, seed, world); None: sent as it is."""


def bucket_codec(compression: spec.Compression, shapes: Sequence[torch.Size], seed: int,
                 world: int) -> BucketCodec | None:
    """The codec of one ring bucket holding tensors of `shapes`, in order, among `world` ranks; None: the bucket is
    allreduced as it is. `seed` must be the same on every rank (PowerSGD's first projection)."""
    return BUCKET_CODECS[compression.method](compression, shapes, seed, world)


class MessageCodec:
    """How a parameter server's or a peer's message carries its tensors: as they are (method None), or cast to
    16 bits, FP16 multiplied by a power of two per tensor (its largest value then sits FP16_HEADROOM under
    FP16_MAX; layers differ by orders of magnitude) that travels with it, the scales as float32 after the tensors.

    Works on anything with `views(buffer)` (exchange/wire.Layout), built from `travelling(tensors)`."""

    def __init__(self, method: variants.CompressionMethod):
        if method not in CAST_DTYPES and method != variants.CompressionMethod.NONE:
            raise ValueError(f"parameter servers and peers cannot compress with {method.value} "
                             "(api/variants.py CODECS)")
        self.dtype = CAST_DTYPES.get(method)
        self.scaled = self.dtype == torch.float16

    @property
    def compressing(self) -> bool:
        return self.dtype is not None

    def travelling(self, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Tensors shaped as `tensors` are sent: what a layout of the message is built from."""
        if not self.compressing:
            return list(tensors)
        cast = [torch.empty(t.shape, dtype=self.dtype) for t in tensors]
        return cast + [torch.empty(len(cast), dtype=torch.float32)] if self.scaled else cast

    def pack(self, layout, tensors: Sequence[torch.Tensor | None], out: torch.Tensor) -> torch.Tensor:
        """`tensors` (any device; None counts as zeros) encoded into `out`, a buffer of `layout`; copies from a GPU
        are blocking (a device sync), as exchange/wire.Layout.pack's."""
        if not self.compressing:
            return layout.pack(tensors, out=out)
        views = layout.views(out)
        scales = []
        for view, tensor in zip(views, tensors):
            scale = 1.0
            if tensor is None:
                view.zero_()
            else:
                tensor = tensor.detach()
                if self.scaled and tensor.numel():
                    scale = fp16_scale(float(tensor.abs().max()))
                view.copy_(tensor * scale if scale != 1.0 else tensor)  # scaled in float32, then rounded once
            scales.append(scale)
        if self.scaled:
            views[-1].copy_(torch.tensor(scales, dtype=torch.float32))
        return out

    def unpack(self, layout, payload: torch.Tensor) -> list[torch.Tensor]:
        """The tensors of a payload, decoded (float32 views of it without compression, new tensors with)."""
        views = layout.views(payload)
        if not self.compressing:
            return views
        if not self.scaled:
            return [view.float() for view in views]
        return [view.float().div_(scale) for view, scale in zip(views[:-1], views[-1].tolist())]


PLAIN = MessageCodec(variants.CompressionMethod.NONE)  # messages as they are
