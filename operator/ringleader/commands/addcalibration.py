"""`ringleader whatif --calibrate-add`: time the reduction arithmetic (torch's in-place add) on this machine.

A ring allreduce step adds a received chunk into the local one; this times `a.add_(b)` on float32
tensors from 1 KiB to 64 MiB on the chosen device and returns an models.addcost.AddTable. Torch is
imported here, only when calibrating: the rest of `ringleader whatif` is pure arithmetic.
"""

from __future__ import annotations

import statistics
import time

from ringleader.models import addcost

SIZES_BYTES = tuple(1024 * 4 ** i for i in range(9))
"""SIZES_BYTES: 1 KiB to 64 MiB by factors of 4, from a per-call-bound add to a memory-bound one."""
BUDGET_SECONDS = 2.0
"""BUDGET_SECONDS bounds the whole calibration (a little more: each size finishes its current batch)."""
BATCH_SECONDS = 0.002
"""BATCH_SECONDS: calls are timed in batches at least this long, so the clock's resolution does not count."""


def calibrate(device_name: str = "cpu", sizes_bytes: tuple[int, ...] = SIZES_BYTES,
              budget_seconds: float = BUDGET_SECONDS) -> addcost.AddTable:
    """The median seconds per add at each size, over batches within an equal share of the budget."""
    import torch

    if device_name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda: torch sees no CUDA device here; calibrate on the cpu, or on a "
                           "machine with a GPU")
    device = torch.device(device_name)

    def synchronize() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)  # a device sync: kernels are asynchronous, the clock is not

    share = budget_seconds / len(sizes_bytes)
    seconds = []
    for size in sizes_bytes:
        a = torch.ones(size // 4, dtype=torch.float32, device=device)  # [size / 4] float32
        b = torch.ones_like(a)
        a.add_(b)  # warm-up: allocation and first-call costs are not the add's
        synchronize()
        calls, per_call = 1, []
        deadline = time.perf_counter() + share
        while True:
            started = time.perf_counter()
            for _ in range(calls):
                a.add_(b)
            synchronize()
            elapsed = time.perf_counter() - started
            if elapsed < BATCH_SECONDS and calls < 1 << 20:
                calls *= 2  # too short to time well: a bigger batch
            else:
                per_call.append(elapsed / calls)
            if time.perf_counter() >= deadline and per_call:
                break
        seconds.append(statistics.median(per_call))
        del a, b
    return addcost.AddTable(tuple(float(s) for s in sizes_bytes), tuple(seconds), device_name)
