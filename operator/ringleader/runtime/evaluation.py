"""Held-out evaluation and the target check (spec.model.evaluation, spec.model.target); called by worker.py.

The first worker evaluates the parameters it holds right after an iteration's synchronization: the
global ones (ring allreduce: every worker's; parameter server and peer-to-peer: those it just pulled).
"""

from __future__ import annotations

import dataclasses
import time

import torch

from ringleader.models import targets
from ringleader.api.spec import ExperimentSpec, OnReached, Target
from ringleader.contract import keys
from ringleader.runtime import datafiles, models

EVAL_BATCH = 512
"""Samples per forward pass of an evaluation: bounds its memory, not its result."""


@torch.no_grad()
def evaluate(model: torch.nn.Module, held_out: datafiles.Images, device: torch.device) -> dict[str, float]:
    """eval/loss (mean cross entropy), eval/accuracy (a fraction) and eval/seconds over the held-out samples.

    The model is put in eval mode (batch norm uses its running statistics) and back in train mode after."""
    started = time.perf_counter()
    model.eval()
    total_loss, correct, count = 0.0, 0, 0
    try:
        for start in range(0, len(held_out), EVAL_BATCH):
            inputs = held_out.inputs[start:start + EVAL_BATCH].to(device)  # (b, C, H, W)
            labels = held_out.labels[start:start + EVAL_BATCH].to(device)  # (b,)
            logits = model(inputs)  # (b, classes)
            total_loss += float(models.loss(logits, labels)) * labels.numel()  # a device sync
            correct += int((logits.argmax(dim=-1) == labels).sum())
            count += labels.numel()
    finally:
        model.train()
    return {keys.EVAL_LOSS: total_loss / count, keys.EVAL_ACCURACY: correct / count,
            keys.EVAL_SECONDS: time.perf_counter() - started}


def due(step: int, every: int, iterations: int) -> bool:
    """Whether the iteration `step` (from 0) is followed by an evaluation: every K-th, and the last."""
    return (step + 1) % every == 0 or step + 1 == iterations


def reached(target: Target, metrics: dict[str, float]) -> bool:
    """Whether an evaluation's metrics meet the target, by the rule the trial summary applies."""
    return targets.reached(target, metrics[keys.EVAL_LOSS], metrics[keys.EVAL_ACCURACY])


@dataclasses.dataclass(frozen=True)
class EvaluationSchedule:
    """Who evaluates, how often, and whether the workers stop at the target."""

    every: int
    evaluator: bool
    stop_at_target: bool
    max_samples: int | None  # of the held-out set, each evaluation (None: all of it)

    @classmethod
    def of(cls, spec: ExperimentSpec, worker_index: int) -> EvaluationSchedule | None:
        evaluation, target = spec.model.evaluation, spec.model.target
        if evaluation is None:
            return None
        return cls(every=evaluation.every_iterations, evaluator=worker_index == 0,
                   stop_at_target=target is not None and target.on_reached == OnReached.STOP,
                   max_samples=evaluation.max_samples)
