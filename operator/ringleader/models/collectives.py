"""How a compression method puts a ring bucket on the wire, as the what-if model prices it: rounds of collectives.

Called by models/whatif.py (each bucket's rounds on the channel), commands/whatif.py and report/scaling.py.
A method is one entry in ROUNDS, the rounds runtime/compression.py runs for a bucket:

    None          one allreduce of the bucket
    FP16, BF16    one allreduce of the bucket in 16 bits: half its bytes
    PowerSGD      an allreduce of the tensors sent whole and of each matrix's P (n x r), then one of each Q (m x r)
                  (contract/lowrank.py), shares taken over the whole profile from its shapes (half and half
                  when the profile has none)
    TopK          an allgather of the k largest values with their int32 indices

The first round of a bucket may run while backward does; the later ones wait for every bucket's first
(runtime/ring.py). A trial's measured ratio (bytes/uncompressed over bytes/sent) scales its method's rounds so
that they send what the trial sent (`measured`); its mean time/codec is the codec's seconds per iteration.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

from ringleader.api import spec, variants
from ringleader.models.profile import Profile
from ringleader.contract import lowrank


@dataclasses.dataclass(frozen=True)
class RoundFractions:
    """One collective per bucket: its payload and the arithmetic it adds, as fractions of the bucket's bytes."""

    payload: float
    gather: bool = False
    """gather: every rank's payload gathered (TopK), not summed in a ring allreduce."""
    added: float | None = None
    """added is the fraction of the bucket's bytes the ring adds up, (N-1) chunks of 1/N; None: the payload's."""

    def wire_bytes(self, size_bytes: float, workers: int) -> float:
        """Bytes each rank sends for a bucket of `size_bytes`: N-1 payloads gathered, 2(N-1)/N of one allreduced
        (runtime/compression.Round.wire_bytes)."""
        payload = self.payload * size_bytes
        return (workers - 1) * payload if self.gather else 2.0 * (workers - 1) / workers * payload

    def added_bytes(self, size_bytes: float) -> float:
        if self.gather:
            return 0.0
        return (self.payload if self.added is None else self.added) * size_bytes


@dataclasses.dataclass(frozen=True)
class Wire:
    """A compression as the model prices it: the rounds of every bucket, and the codec's seconds per iteration."""

    rounds: tuple[RoundFractions, ...]
    codec_seconds: float = 0.0
    label: str = ""
    """label names it in tables and figures (a method, or '' for a ratio the sweep asks for)."""
    method: variants.CompressionMethod | None = None
    """method is the trial's, when the rounds are a method's (`measured`)."""

    def ratio(self, workers: int) -> float:
        """c: what an uncompressed allreduce sends among `workers` (at least 2) over what these rounds send."""
        workers = max(workers, 2)
        sent = sum(r.wire_bytes(1.0, workers) for r in self.rounds)
        return RoundFractions(1.0).wire_bytes(1.0, workers) / sent if sent else math.inf


def uniform(compression: float, codec_seconds: float = 0.0) -> Wire:
    """Study 3's compression by a ratio c: one allreduce of 1/c of each bucket, the arithmetic on all of it (the
    values are added uncompressed); the codec's seconds only when c > 1."""
    if not compression > 0:
        raise ValueError(f"compression must be greater than 0, got {compression}")
    return Wire((RoundFractions(1.0 / compression, added=1.0),), codec_seconds if compression > 1 else 0.0)


def _power_sgd(profile: Profile, compression: spec.Compression) -> tuple[RoundFractions, ...]:
    """First round: tensors sent whole and the P factors; second: the Q factors; element counts over the profile's."""
    shapes = [g.shape for g in profile.gradients if g.shape is not None]
    if not shapes or len(shapes) < len(profile.gradients):  # no gradient, or one of unknown shape
        return RoundFractions(0.5), RoundFractions(0.5)
    first = second = total = 0
    for shape in shapes:
        numel = math.prod(shape)
        total += numel
        factored = lowrank.factors(shape, compression.rank)
        if factored is None:
            first += numel
        else:
            n, m, r = factored
            first, second = first + n * r, second + m * r
    if not total:
        return (RoundFractions(1.0),)
    return (RoundFractions(first / total),) + ((RoundFractions(second / total),) if second else ())


ROUNDS: dict[variants.CompressionMethod, Callable[[Profile, spec.Compression], tuple[RoundFractions, ...]]] = {
    variants.CompressionMethod.NONE: lambda _, __: (RoundFractions(1.0),),
    variants.CompressionMethod.FP16: lambda _, __: (RoundFractions(0.5),),
    variants.CompressionMethod.BF16: lambda _, __: (RoundFractions(0.5),),
    variants.CompressionMethod.POWER_SGD: _power_sgd,
    # values (float32) and their int32 indices: twice the bytes of the values
    variants.CompressionMethod.TOP_K: lambda _, c: (RoundFractions(2.0 * c.ratio, gather=True),),
}
"""ROUNDS: per method, the rounds it sends for a bucket, each payload a fraction of the bucket's (float32) bytes."""


def measured(profile: Profile, compression: spec.Compression, workers: int, ratio: float,
             codec_seconds: float) -> Wire:
    """The method's rounds (ROUNDS), scaled so that among `workers` they send 1/`ratio` of what an uncompressed
    allreduce would, as the trial measured (its extra stamps and redone rounds included), with its codec time."""
    rounds = ROUNDS[compression.method](profile, compression)
    scale = Wire(rounds).ratio(workers) / ratio
    return Wire(tuple(dataclasses.replace(r, payload=r.payload * scale) for r in rounds), codec_seconds,
                compression.method.value, compression.method)
