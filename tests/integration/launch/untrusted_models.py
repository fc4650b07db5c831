"""User models ("untrusted_models:...") that do what any user code may: print the environment, end the process.

`prints_environment` prints the rank's whole environment as one JSON line to its stdout log, then
returns a tiny classifier. `misbehaving` misbehaves by the trial's index in a sweep (trial files say
it): 0 calls sys.exit(0), 1 raises, 2 calls os._exit(0) (no exception, no cleanup: nothing can catch
it), all while the factory runs; 3 returns a model whose forward pass calls sys.exit(0) on rank 1 at
step 3. Read here, in the test's own models, so production code carries no test hook.
"""

from __future__ import annotations

import json
import os
import sys

import torch
from torch import nn

ENVIRONMENT_PREFIX = "rank environment: "


class Classifier(nn.Module):
    def __init__(self, exit_at: int | None = None):
        super().__init__()
        self.layers = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 32), nn.ReLU(), nn.Linear(32, 4))
        self.exit_at = exit_at
        self.calls = 0

    def forward(self, images: torch.Tensor) -> torch.Tensor:  # images: (batch, 3, 8, 8)
        if self.calls == self.exit_at:
            sys.exit(0)
        self.calls += 1
        return self.layers(images)


def prints_environment() -> nn.Module:
    print(ENVIRONMENT_PREFIX + json.dumps(dict(os.environ)), flush=True)
    return Classifier()


def misbehaving() -> nn.Module:
    with open(os.environ["RINGLEADER_TRIAL_FILE"]) as handle:
        index = json.load(handle)["index"]
    if index == 0:
        sys.exit(0)
    if index == 1:
        raise RuntimeError("no weights in this checkpoint")
    if index == 2:
        os._exit(0)
    return Classifier(exit_at=3 if os.environ["RANK"] == "1" else None)
