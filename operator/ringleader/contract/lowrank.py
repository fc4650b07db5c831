"""How PowerSGD splits a gradient into low-rank factors: one rule for the runtime's codec (runtime/compression.py)
and the what-if model that prices its rounds (models/collectives.py), which may not import the runtime."""

from __future__ import annotations

import math
from typing import Sequence

MIN_COMPRESSION_RATE = 2  # a matrix is sent as factors only when they are at most half its size


def factors(shape: Sequence[int], rank: int) -> tuple[int, int, int] | None:
    """(n, m, r) of a gradient of `shape` viewed as n x m (its first dimension by the rest) and sent as P (n x r)
    then Q (m x r), r = min(n, m, rank); None when the factors would not shrink it by MIN_COMPRESSION_RATE: it is
    sent whole, in the first round."""
    numel = math.prod(shape)
    n = shape[0] if len(shape) else 1
    m = numel // n if n else 0
    r = min(n, m, rank)
    return (n, m, r) if (n + m) * r * MIN_COMPRESSION_RATE < n * m else None
