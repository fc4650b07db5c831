"""The cost of a ring allreduce step's reduction arithmetic, add(bytes) -> seconds; used by models/whatif.py.

Three models, as `ringleader whatif` offers them: none (the arithmetic is free), fixed plus per byte
(a call costs `fixed` whatever its size, plus `per_byte` per byte), or a table measured on a machine
(`ringleader whatif --calibrate-add`), interpolated. A per-byte rate alone misprices small buckets: the
per-call cost is paid N-1 times per bucket, however small the bucket is.
"""

from __future__ import annotations

import bisect
import dataclasses
from typing import Any, Callable, Mapping, Sequence

AddCost = Callable[[float], float]
"""add(bytes) -> seconds: the reduction arithmetic of one ring step on `bytes` bytes."""
TABLE_KIND = "ringleader.addCostTable"
"""TABLE_KIND marks a table document, so a profile or a layers.json given by mistake is refused by name."""


def no_add(_size_bytes: float) -> float:
    return 0.0


def fixed_plus_per_byte(fixed_seconds: float, seconds_per_byte: float) -> AddCost:
    """add(S) = fixed_seconds + seconds_per_byte * S: a kernel launch (or a Python call) plus memory traffic."""
    if fixed_seconds < 0 or seconds_per_byte < 0:
        raise ValueError(f"the add cost's fixed seconds ({fixed_seconds}) and seconds per byte ({seconds_per_byte}) "
                         "must be greater than or equal to 0")
    return lambda size_bytes: fixed_seconds + seconds_per_byte * size_bytes


def linear_add(seconds_per_byte: float) -> AddCost:
    """add(S) = seconds_per_byte * S: no per-call cost."""
    return fixed_plus_per_byte(0.0, seconds_per_byte)


@dataclasses.dataclass(frozen=True)
class AddTable:
    """Measured add times at increasing sizes; add(S) is interpolated linearly between them.

    Below the smallest size a call costs what the smallest did (its fixed cost dominates); above the
    largest it grows in proportion to the size (memory traffic dominates)."""

    sizes_bytes: tuple[float, ...]
    seconds: tuple[float, ...]
    device: str = "cpu"

    def __post_init__(self) -> None:
        if not self.sizes_bytes or len(self.sizes_bytes) != len(self.seconds):
            raise ValueError("an add-cost table needs one time per size, and at least one size")
        if any(b <= a for a, b in zip(self.sizes_bytes, self.sizes_bytes[1:])) or self.sizes_bytes[0] <= 0:
            raise ValueError("an add-cost table's sizes must be greater than 0 and increasing")
        if any(s < 0 for s in self.seconds):
            raise ValueError("an add-cost table's times must be greater than or equal to 0")

    def __call__(self, size_bytes: float) -> float:
        sizes, seconds = self.sizes_bytes, self.seconds
        if size_bytes <= sizes[0]:
            return seconds[0]
        if size_bytes >= sizes[-1]:
            return seconds[-1] * size_bytes / sizes[-1]
        right = bisect.bisect_right(sizes, size_bytes)
        a, b = sizes[right - 1], sizes[right]
        share = (size_bytes - a) / (b - a)
        return seconds[right - 1] + share * (seconds[right] - seconds[right - 1])

    def fit(self) -> tuple[float, float]:
        """(fixed seconds, seconds per byte) by least squares: the table said in two numbers."""
        return fit_fixed_plus_per_byte(self.sizes_bytes, self.seconds)

    def to_document(self) -> dict[str, Any]:
        return {"kind": TABLE_KIND, "device": self.device,
                "points": [{"bytes": size, "seconds": time} for size, time in zip(self.sizes_bytes, self.seconds)]}

    @classmethod
    def from_document(cls, document: Any) -> "AddTable":
        if not isinstance(document, Mapping) or document.get("kind") != TABLE_KIND:
            raise ValueError(f"not an add-cost table: it needs \"kind\": \"{TABLE_KIND}\" (write one with "
                             "`ringleader whatif SOURCE --calibrate-add FILE`)")
        try:
            points = sorted((float(p["bytes"]), float(p["seconds"])) for p in document["points"])
        except (KeyError, TypeError, ValueError):
            raise ValueError("an add-cost table's \"points\" must be a list of {\"bytes\": number, "
                             "\"seconds\": number}") from None
        return cls(tuple(s for s, _ in points), tuple(t for _, t in points), str(document.get("device", "cpu")))


def fit_fixed_plus_per_byte(sizes_bytes: Sequence[float], seconds: Sequence[float]) -> tuple[float, float]:
    """Least-squares (fixed, per byte) through (size, seconds) points, each clamped at 0."""
    n = len(sizes_bytes)
    if n == 1:
        return 0.0, seconds[0] / sizes_bytes[0]
    mean_x, mean_y = sum(sizes_bytes) / n, sum(seconds) / n
    spread = sum((x - mean_x) ** 2 for x in sizes_bytes)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(sizes_bytes, seconds)) / spread
    return max(0.0, mean_y - slope * mean_x), max(0.0, slope)
