"""A user model ("paced_models:factory") whose forward pass takes at least PACE_SECONDS: a trial of it runs long
enough for `ringleader run` to show its progress and ETA, whatever the machine's speed."""

from __future__ import annotations

import time

import torch
from torch import nn

PACE_SECONDS = 0.03


class PacedClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 4))

    def forward(self, images: torch.Tensor) -> torch.Tensor:  # images: (batch, 3, 8, 8)
        time.sleep(PACE_SECONDS)
        return self.layers(images)


def factory() -> nn.Module:
    return PacedClassifier()
