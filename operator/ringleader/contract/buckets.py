"""How the ring groups gradients into buckets: one rule for the runtime that fills them (runtime/ring.py) and the
analyses that model them (models/overlap.py), which may not import the runtime."""

from __future__ import annotations

from typing import Callable, Sequence


def group(sizes: Sequence[float], bucket_bytes: float, first_bucket_bytes: float, *, recorded: Sequence[float] = (),
          apart: Callable[[int], bool] = lambda index: False) -> list[list[int]]:
    """The indices of `sizes` (in backward order) grouped into buckets, in order. A bucket closes once it holds
    its limit or more: the size a trial recorded for it, if given (`recorded`, in launch order), else
    `first_bucket_bytes` for the first bucket (if smaller) and `bucket_bytes` for the others; or before an item
    that may not share it with its predecessor (`apart(index)`: another dtype or device)."""
    groups: list[list[int]] = []
    held = 0.0
    for index, size in enumerate(sizes):
        if groups:
            count = len(groups)
            if count <= len(recorded):
                limit = recorded[count - 1]
            else:
                limit = min(bucket_bytes, first_bucket_bytes) if count == 1 else bucket_bytes
            if held >= limit or apart(index):
                groups.append([])
                held = 0.0
        else:
            groups.append([])
        groups[-1].append(index)
        held += size
    return groups
