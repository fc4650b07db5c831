"""Straggler emulation for worker groups with slowdownPercent > 100, used by worker.py.

Emulation, not a slower device: each stretch of real compute is followed by a sleep of
(slowdown - 100)% of it. Forward is stretched after it ends; backward is stretched layer by
layer, in post-accumulate-grad hooks registered before the synchronizer's, so a slow worker's
gradients become ready late, as on a slower device, and ring buckets and pushes leave late.
On GPU each stretch first synchronizes the device, which a real straggler would not need: the
price of measuring what to stretch; only emulated stragglers pay it.
"""

from __future__ import annotations

import time

import torch


class Straggler:
    """Stretches this rank's forward and backward compute by `percent`/100 (100: does nothing)."""

    def __init__(self, percent: int, device: torch.device):
        self.factor = (percent - 100) / 100.0
        self.cuda = device.type == "cuda"
        self.mark = 0.0
        self.slept = 0.0

    @property
    def active(self) -> bool:
        return self.factor > 0

    def attach(self, model: torch.nn.Module) -> None:
        """Register the backward-stretching hooks; call before any other gradient hook is registered."""
        if not self.active:
            return
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.register_post_accumulate_grad_hook(lambda _parameter: self.stretch())

    def start(self) -> None:
        """Mark the start of compute (before forward)."""
        if self.active:
            if self.cuda:
                torch.cuda.synchronize()  # this is a device sync (emulated stragglers only)
            self.mark = time.perf_counter()

    def stretch(self) -> None:
        """Sleep `factor` times the compute since the last mark (end of forward, each gradient, end of backward)."""
        if not self.active:
            return
        if self.cuda:
            torch.cuda.synchronize()  # this is a device sync (emulated stragglers only)
        now = time.perf_counter()
        pause = self.factor * (now - self.mark)
        time.sleep(pause)
        self.slept += pause
        self.mark = time.perf_counter()
