"""A user model ("crashing_models:factory") for fault tests: a tiny classifier whose process exits abruptly on cue.

RINGLEADER_TEST_CRASH="<trial index>:<rank>:<step>", passed with `ringleader run --env RINGLEADER_TEST_CRASH`,
makes that rank of that trial exit with code 3 (os._exit: no traceback, no cleanup, like a segfault or
the OOM killer) in its forward pass of that step; every other rank and trial trains normally. Read
here, in the test's own model, so production code carries no test hook.
"""

from __future__ import annotations

import json
import os

import torch
from torch import nn

CRASH = "RINGLEADER_TEST_CRASH"
EXIT_CODE = 3


class CrashingClassifier(nn.Module):
    def __init__(self, crash_at: int | None):
        super().__init__()
        self.layers = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 32), nn.ReLU(), nn.Linear(32, 4))
        self.crash_at = crash_at
        self.calls = 0

    def forward(self, images: torch.Tensor) -> torch.Tensor:  # images: (batch, 3, 8, 8)
        if self.crash_at is not None and self.calls == self.crash_at:
            os._exit(EXIT_CODE)
        self.calls += 1
        return self.layers(images)


def factory() -> nn.Module:
    crash_at = None
    cue = os.environ.get(CRASH)
    if cue:
        trial_index, rank, step = (int(part) for part in cue.split(":"))
        with open(os.environ["RINGLEADER_TRIAL_FILE"]) as handle:
            this_trial = json.load(handle)["index"]
        if this_trial == trial_index and int(os.environ["RANK"]) == rank:
            crash_at = step
    return CrashingClassifier(crash_at)
