"""Writes the synthetic benchmark outputs of examples/planning/ (docs/plan.md, "The network").

They were not measured: the machine that wrote them has no GPU and no MPI. Each is an alpha-beta model, t(S) = a +
8S/B per protocol regime, with the steps real runs show where the library changes protocol (NCCL's LL, LL128 and
Simple; MPI's eager and rendezvous), a deterministic noise of about 1 %, and printed in the tool's own layout. The
numbers are those of a plausible cluster: 4 nodes of 4 GPUs, NVLink inside a node (about 180 GB/s of bus bandwidth),
one 100 Gbit/s InfiniBand NIC per node (about 10.6 GB/s). tests/unit/test_planning_network.py checks that the files
are what this writes.

    python examples/planning/generate.py            # rewrites the files beside it
"""

from __future__ import annotations

import math
import pathlib
import sys

NOTE = "# Synthetic, not measured: written by examples/planning/generate.py from an alpha-beta model (docs/plan.md)."
HOSTS = ("gpu-a1", "gpu-a2", "gpu-a3", "gpu-a4")

# (largest size of the regime, latency in us, bus bandwidth in GB/s)
ACROSS = ((128 * 2**10, 24.0, 2.6), (math.inf, 65.0, 10.6))  # LL, then Simple: 16 ranks over 100 Gbit/s IB
INSIDE = ((64 * 2**10, 7.5, 22.0), (4 * 2**20, 9.0, 95.0), (math.inf, 14.0, 180.0))  # LL, LL128, Simple: NVLink


def noise(index: int, phase: float = 0.0) -> float:
    """About 1 %, the same every run: a rerun's medians move this much."""
    return 1.0 + 0.01 * math.sin(1.7 * index + phase)


def _time(microseconds: float) -> str:
    """As nccl-tests prints a time: fewer decimals as it grows."""
    if microseconds >= 10000:
        return f"{microseconds:7.0f}"
    return f"{microseconds:7.1f}" if microseconds >= 100 else f"{microseconds:7.2f}"


def nccl_allreduce(ranks: int, hosts: tuple[str, ...], regimes: tuple[tuple[float, float, float], ...],
                   what: str) -> str:
    factor = 2.0 * (ranks - 1) / ranks
    lines = [NOTE, f"# {what}", "# nccl-tests: all_reduce_perf",
             "# nThread 1 nGpus 1 minBytes 8 maxBytes 268435456 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 "
             "validation: 1 graph: 0", "#", "# Using devices"]
    per_host = ranks // len(hosts)
    for rank in range(ranks):
        lines.append(f"#  Rank {rank:2d} Group  0 Pid {41021 + rank:6d} on {hosts[rank // per_host]:>10s} device "
                     f"{rank % per_host:2d} [0x{0x18 + 0x20 * (rank % per_host):02x}] NVIDIA H100 80GB HBM3")
    lines += ["#", "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
              "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
              "busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  "
              "(GB/s)"]
    buses = []
    for index in range(26):  # 8 B to 256 MiB by a factor of 2
        size = 8 * 2**index
        latency, bus = next((a, b) for last, a, b in regimes if size <= last)
        columns = []
        for phase in (0.0, 2.0):  # out-of-place, in-place
            microseconds = float(_time((latency + 1e6 * factor * size / (bus * 1e9)) * noise(index, phase)))
            algbw = size / (1e3 * microseconds)
            columns.append(f"  {_time(microseconds)}  {algbw:6.2f}  {algbw * factor:6.2f}  {0:5d}")
            if not phase:
                buses.append(algbw * factor)
        lines.append(f"{size:12d}  {size // 4:12d}  {'float':>8s}  {'sum':>6s}  {-1:6d}" + "".join(columns))
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {sum(buses) / len(buses):.5g} ", "#"]
    return "\n".join(lines) + "\n"


def osu(title: str, column: str, rows: list[tuple[int, float]], comments: tuple[str, ...] = ()) -> str:
    lines = [NOTE, *comments, f"# OSU MPI {title} Test v7.3", f"# Size {column:>21s}"]
    lines += [f"{size:<10d}{value:>18.2f}" for size, value in rows]
    return "\n".join(lines) + "\n"


def osu_latency() -> str:
    """One way, across two nodes: eager to 8 KiB, rendezvous beyond (its handshake a step up)."""
    rows = [(0, 1.18)]
    for index in range(23):  # 1 B to 4 MiB
        size = 2**index
        latency, rate = (1.25, 6.0) if size <= 8192 else (4.2, 11.8)
        rows.append((size, (latency + 1e6 * size / (rate * 1e9)) * noise(index)))
    return osu("Latency", "Latency (us)", rows, ("# Across two nodes, one rank on each: 100 Gbit/s InfiniBand.",))


def osu_bw() -> str:
    """A window of messages streamed: a small overhead per message, the eager copy's rate, then rendezvous."""
    rows = []
    for index in range(23):
        size = 2**index
        overhead, rate = (0.24, 8.5) if size <= 8192 else (1.1, 12.1)
        rows.append((size, size / (overhead + 1e6 * size / (rate * 1e9)) * noise(index, 1.0)))
    return osu("Bandwidth", "Bandwidth (MB/s)", rows, ("# Across two nodes, one rank on each: 100 Gbit/s InfiniBand.",))


def osu_allreduce() -> str:
    """16 ranks, 4 nodes: recursive doubling to 8 KiB, then reduce-scatter and allgather."""
    rows = []
    for index in range(2, 21):  # 4 B to 1 MiB
        size = 2**index
        if size <= 8192:
            microseconds = 4 * (1.45 + 1e6 * size / 2.5e9)
        else:
            microseconds = 16.5 + 1e6 * 1.875 * size / 10.5e9
        rows.append((size, microseconds * noise(index, 0.5)))
    return osu("Allreduce Latency", "Avg Latency(us)", rows,
               ("# 16 ranks, 4 nodes of 4: OSU does not print its ranks; network-osu.yaml says ranks: 16.",
                "# Datatype: MPI_CHAR."))


def files() -> dict[str, str]:
    """Every synthetic file, by name."""
    return {
        "nccl-allreduce-across.txt": nccl_allreduce(16, HOSTS, ACROSS, "16 ranks, 4 nodes of 4 GPUs, one 100 Gbit/s "
                                                                       "InfiniBand NIC per node: LL, then Simple"),
        "nccl-allreduce-node.txt": nccl_allreduce(4, HOSTS[:1], INSIDE, "4 ranks inside one node over NVLink: LL, "
                                                                        "LL128, then Simple"),
        "osu_latency.txt": osu_latency(),
        "osu_bw.txt": osu_bw(),
        "osu_allreduce.txt": osu_allreduce(),
    }


def main() -> int:
    here = pathlib.Path(__file__).resolve().parent
    for name, text in files().items():
        (here / name).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
