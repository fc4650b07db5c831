"""What a network is to the planner: the curves its own benchmarks measured, per link class, and what one message or
one allreduce costs on each (docs/plan.md, "The network").

planning/network.py reads the files into these (network_nccl.py, network_osu.py and network_probe.py parse each
tool's output). Pure arithmetic on seconds and bytes; no I/O.

Either curve prices both operations. A ring allreduce of S bytes among n ranks is 2(n-1) steps, each sending S/n to
the next rank, so a curve t_n measured among n ranks gives one message of s bytes as t_n(n*s) / (2(n-1)), and an
allreduce of S bytes among N ranks as 2(N-1) * message(S/N): the measured curve read at the size whose chunk is the
one that crosses, t_n(n*S/N) * (N-1)/(n-1). A point-to-point curve gives both directly the same way.
"""

from __future__ import annotations

import bisect
import dataclasses
import math

from ringleader.models import cost_models
from ringleader.api.loading import shorten_end

ALLREDUCE = "allreduce"
POINT_TO_POINT = "point-to-point"
OPERATIONS = (ALLREDUCE, POINT_TO_POINT)
ACROSS_NODES = "across nodes"
INSIDE_NODE = "inside a node"

TOLERANCE = 0.10
"""TOLERANCE: one regime's line a + b*S explains a measured size when it is within this share of its time. A rerun of
a benchmark moves its medians a few per cent; a protocol switch (MPI's eager to rendezvous, NCCL's LL, LL128 and
Simple) moves them by tens."""
SHOWN = 400
"""SHOWN: characters of a refusal at most: one line, the file's name and the fix always in it."""
BITS_PER_BYTE = cost_models.BITS_PER_BYTE


class NetworkError(ValueError):
    """A network file that cannot be read; str() is one line, 'FILE:LINE: what is wrong; how to fix it' (':LINE'
    only where one line is to blame), as api/loading.py reports an experiment file."""

    def __init__(self, source: str, problem: str, line: int | None = None):
        self.source = source
        self.line = line
        self.problem = shorten_end(problem, SHOWN)
        super().__init__(f"{source}:{line}: {self.problem}" if line else f"{source}: {self.problem}")

    def named_at(self, where: str) -> NetworkError:
        """This refusal, saying which description line named the file."""
        return NetworkError(self.source, f"{self.problem} (named at {where})", self.line)


@dataclasses.dataclass(frozen=True)
class Segment:
    """One protocol regime of a curve: t(S) = latency + 8S/bits_per_second for sizes in [first_bytes, last_bytes]."""

    first_bytes: float
    last_bytes: float
    latency_seconds: float
    """latency_seconds is the regime's fitted intercept; below 0 where a rate ramping up bends it (kept as fitted)."""
    bits_per_second: float
    """bits_per_second is 8/slope; math.inf for a regime whose time does not grow with size (latency only)."""

    @property
    def seconds_per_byte(self) -> float:
        return BITS_PER_BYTE / self.bits_per_second

    def seconds(self, size_bytes: float) -> float:
        return self.latency_seconds + size_bytes * self.seconds_per_byte


def fit_segments(points: tuple[tuple[float, float], ...]) -> tuple[Segment, ...]:
    """The regimes of a curve, smallest sizes first: consecutive sizes fitted as one line for as long as it explains
    every one of them within TOLERANCE; the first size it cannot explain opens the next regime.

    The fit weighs each size by 1/t^2 (least squares of relative error): a curve spans microseconds to milliseconds,
    and an unweighted line would follow its largest sizes alone. A slope that would fall is taken as 0 (a regime of
    latency only). A last size alone after a step keeps the rate of the regime before it, its latency its own."""
    if len(points) < 2:
        raise ValueError(f"a curve needs at least 2 sizes to fit, got {len(points)}")
    segments: list[Segment] = []
    start = 0
    while start < len(points):
        if start == len(points) - 1:
            size, seconds = points[start]
            rate = segments[-1].bits_per_second
            segments.append(Segment(size, size, seconds - size * BITS_PER_BYTE / rate, rate))
            break
        end = start + 1
        a, b = _weighted_line(points[start:end + 1])
        while end + 1 < len(points):
            wider = points[start:end + 2]
            a2, b2 = _weighted_line(wider)
            if any(abs(a2 + b2 * size - seconds) > TOLERANCE * seconds for size, seconds in wider):
                break
            end, a, b = end + 1, a2, b2
        segments.append(Segment(points[start][0], points[end][0], a, BITS_PER_BYTE / b if b > 0 else math.inf))
        start = end + 1
    return tuple(segments)


def _weighted_line(points: tuple[tuple[float, float], ...]) -> tuple[float, float]:
    """(a, b) of t = a + b*S minimizing sum(((a + b*S - t)/t)^2), b at least 0; centred, so that sizes of 1e9 bytes do
    not cancel times of 1e-6 seconds."""
    weights = [1.0 / (seconds * seconds) for _, seconds in points]
    total = sum(weights)
    mean_size = sum(w * size for w, (size, _) in zip(weights, points)) / total
    mean_seconds = sum(w * seconds for w, (_, seconds) in zip(weights, points)) / total
    spread = sum(w * (size - mean_size) ** 2 for w, (size, _) in zip(weights, points))
    covariance = sum(w * (size - mean_size) * (seconds - mean_seconds) for w, (size, seconds) in zip(weights, points))
    slope = max(0.0, covariance / spread) if spread > 0 else 0.0
    return mean_seconds - slope * mean_size, slope


@dataclasses.dataclass(frozen=True)
class Curve:
    """One measured operation against message size: the medians per size, as the tool printed them."""

    operation: str
    """operation is ALLREDUCE or POINT_TO_POINT (one message, one way)."""
    ranks: int
    """ranks is how many ranks the collective ran among; 2 for point-to-point."""
    points: tuple[tuple[float, float], ...]
    """points are (bytes, seconds): sizes strictly increasing, seconds > 0 and finite; at least 2."""
    source: str
    """source says where the curve comes from, e.g. 'allreduce-16.txt: nccl-tests all_reduce_perf, 16 ranks'."""
    _segments: tuple[Segment, ...] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "points", tuple((float(size), float(seconds)) for size, seconds in self.points))
        if self.operation not in OPERATIONS:
            raise ValueError(f"operation must be one of {', '.join(OPERATIONS)}, got {self.operation!r}")
        if self.ranks < 2 or (self.operation == POINT_TO_POINT and self.ranks != 2):
            raise ValueError(f"a {self.operation} curve runs among at least 2 ranks (point-to-point: 2), "
                             f"got {self.ranks}")
        if len(self.points) < 2:
            raise ValueError(f"a curve needs at least 2 sizes (latency and rate cannot be told apart), "
                             f"got {len(self.points)}")
        for (size, seconds), (after, _) in zip(self.points, self.points[1:] + ((math.inf, 1.0),)):
            if not (0 < size < after and 0 < seconds < math.inf):
                raise ValueError(f"sizes must be positive and strictly increasing, seconds positive and finite: "
                                 f"({size}, {seconds}) then size {after}")
        segments = fit_segments(self.points)
        if segments[-1].bits_per_second == math.inf:
            raise ValueError("time does not grow with size over the largest sizes: no rate to read from the curve")
        object.__setattr__(self, "_segments", segments)

    def seconds(self, size_bytes: float) -> float:
        """The measured curve at `size_bytes`: linear between the neighbouring sizes measured, the smallest size's time
        below it, and beyond the largest the largest's time plus the last regime's rate for the bytes beyond."""
        if not size_bytes >= 0:
            raise ValueError(f"size_bytes must be greater than or equal to 0, got {size_bytes}")
        at = bisect.bisect_left(self.points, size_bytes, key=lambda point: point[0])
        if at == 0:
            return self.points[0][1]
        if at == len(self.points):
            size, seconds = self.points[-1]
            return seconds + (size_bytes - size) * self._segments[-1].seconds_per_byte
        (s1, t1), (s2, t2) = self.points[at - 1], self.points[at]
        return t1 + (t2 - t1) * (size_bytes - s1) / (s2 - s1)

    def segments(self) -> tuple[Segment, ...]:
        """The curve's protocol regimes, smallest sizes first (fit_segments)."""
        return self._segments


@dataclasses.dataclass(frozen=True)
class Level:
    """One link class (inside a node, across nodes): what its benchmarks measured, and what a message or an
    allreduce costs on it. Each operation is priced from its own curve where the level has one, else from the
    other's (the module's docstring: the ring's 2(n-1) steps of S/n)."""

    name: str
    """name is INSIDE_NODE or ACROSS_NODES."""
    point_to_point: Curve | None
    allreduce: Curve | None
    line_rate_bits_per_second: float | None = None
    """line_rate_bits_per_second is the NIC's nominal rate where the description states it: what the wire could
    carry, beside what the host's stack got through it (said() shows the share)."""

    def __post_init__(self) -> None:
        if self.point_to_point is None and self.allreduce is None:
            raise ValueError(f"the level {self.name!r} needs a point-to-point curve, an allreduce curve or both")
        if self.point_to_point is not None and self.point_to_point.operation != POINT_TO_POINT:
            raise ValueError(f"point_to_point is a {self.point_to_point.operation} curve")
        if self.allreduce is not None and self.allreduce.operation != ALLREDUCE:
            raise ValueError(f"allreduce is a {self.allreduce.operation} curve")
        rate = self.line_rate_bits_per_second
        if rate is not None and not 0 < rate < math.inf:
            raise ValueError(f"line_rate_bits_per_second must be positive and finite, got {rate}")

    def message_seconds(self, size_bytes: float) -> float:
        """One message of `size_bytes`, one way: the point-to-point curve, else one step of the measured ring,
        t_n(n*s) / (2(n-1))."""
        if self.point_to_point is not None:
            return self.point_to_point.seconds(size_bytes)
        assert self.allreduce is not None  # __post_init__: one of the two
        ranks = self.allreduce.ranks
        return self.allreduce.seconds(ranks * size_bytes) / (2.0 * (ranks - 1))

    def allreduce_seconds(self, size_bytes: float, ranks: int) -> float:
        """One ring allreduce of `size_bytes` among `ranks`, 2(N-1) * message(S/N): from the allreduce curve measured
        among n, t_n(n*S/N) * (N-1)/(n-1) (exactly the measured curve at N = n); else from the point-to-point curve.
        0.0 for one rank: nothing crosses a link."""
        if ranks < 1:
            raise ValueError(f"ranks must be greater than or equal to 1, got {ranks}")
        if ranks == 1:
            return 0.0
        if self.allreduce is not None:
            measured = self.allreduce.ranks
            return self.allreduce.seconds(measured * size_bytes / ranks) * (ranks - 1) / (measured - 1)
        return 2.0 * (ranks - 1) * self.message_seconds(size_bytes / ranks)

    def message_segments(self, operation: str | None = None) -> tuple[Segment, ...]:
        """The regimes of one message, in a message's bytes: the point-to-point curve's, or one ring step of the
        allreduce curve's (sizes / n, latency / (2(n-1)), rate times 2(n-1)/n: the bus rate). `operation` chooses
        which curve where the level has both; None: the one message_seconds prices with."""
        if operation not in (None, *OPERATIONS):
            raise ValueError(f"operation must be one of {', '.join(OPERATIONS)} or None, got {operation!r}")
        curve = self.allreduce if operation == ALLREDUCE else self.point_to_point
        curve = curve or self.point_to_point or self.allreduce
        assert curve is not None
        if curve.operation == POINT_TO_POINT:
            return curve.segments()
        n, steps = curve.ranks, 2.0 * (curve.ranks - 1)
        return tuple(Segment(s.first_bytes / n, s.last_bytes / n, s.latency_seconds / steps,
                             s.bits_per_second * steps / n) for s in curve.segments())

    def nic(self, size_bytes: float, operation: str | None = None) -> cost_models.Nic:
        """The latency and rate of the regime a message of `size_bytes` falls in (message_segments; nearest on a log
        scale where it falls between two or beyond the ends), for cost_models' formulas. A latency fitted below 0 is
        taken as 0; a regime of latency only has an infinite rate (no transfer term)."""
        segment = _nearest(self.message_segments(operation), size_bytes)
        return cost_models.Nic(bandwidth_bits_per_second=segment.bits_per_second,
                               latency_seconds=max(0.0, segment.latency_seconds))

    @property
    def latency_seconds(self) -> float:
        """The smallest messages' regime's latency (at least 0)."""
        return max(0.0, self.message_segments()[0].latency_seconds)

    @property
    def sustained_bits_per_second(self) -> float:
        """The largest messages' regime's rate: what a large bucket or shard moves at."""
        return self.message_segments()[-1].bits_per_second

    def said(self) -> str:
        """One console line: the level, its latency and sustained rate, its regimes, where it was measured."""
        rate = self.sustained_bits_per_second
        share = f" ({100 * rate / self.line_rate_bits_per_second:.0f} % of its " \
                f"{self.line_rate_bits_per_second / 1e9:.4g} Gbit/s line)" if self.line_rate_bits_per_second else ""
        sources = "; ".join(c.source for c in (self.point_to_point, self.allreduce) if c is not None)
        regimes = len(self.message_segments())
        return (f"{self.name}: latency {1e6 * self.latency_seconds:.3g} us, sustained {rate / 1e9:.4g} Gbit/s{share}, "
                f"{regimes} regime{'s' if regimes != 1 else ''}; from {sources}")


def _nearest(segments: tuple[Segment, ...], size_bytes: float) -> Segment:
    if not size_bytes >= 0:
        raise ValueError(f"size_bytes must be greater than or equal to 0, got {size_bytes}")
    size = max(size_bytes, 1e-300)

    def distance(segment: Segment) -> float:
        if segment.first_bytes <= size <= segment.last_bytes:
            return 0.0
        return min(abs(math.log(size / segment.first_bytes)), abs(math.log(size / segment.last_bytes)))

    return min(segments, key=distance)


@dataclasses.dataclass(frozen=True)
class MeasuredNetwork:
    """A cluster's links as its benchmarks measured them: across nodes, and inside a node where given."""

    across: Level
    inside: Level | None
    """inside is the link between ranks of one node; None: one level was given, and ranks of a node are priced as if
    they talked across nodes (cost_models.Pods with inside=None does the same). A slower estimate, never a faster:
    a node's own link (shared memory, NVLink) is no slower than its NIC."""
    source: str
    """source is the file read (a description, or one tool's output)."""

    @property
    def inside_or_across(self) -> Level:
        """The level ranks of one node talk over: `inside`, or `across` where one level was given."""
        return self.inside or self.across

    def said(self) -> str:
        """A few console lines: the file, then each level's line."""
        inside = self.inside.said() if self.inside is not None else \
            f"{INSIDE_NODE}: not given; priced as {ACROSS_NODES}"
        return f"network {self.source}:\n  {self.across.said()}\n  {inside}"
