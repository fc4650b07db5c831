"""Evaluation results and time to target from a trial's records (spec.model.evaluation, spec.model.target).

Used by summary.py for the trial summary and by runtime/evaluation.py for the same verdict while training.
Time is measured as curves.py measures it: seconds since the trial's first iteration began. The
time to target ends where the iteration whose parameters first reached the target ended (its record's
timestamp less its own evaluation, time/eval), so it counts the earlier evaluations, not that one.
"""

from __future__ import annotations

from typing import Any, Iterable

from ringleader.api import spec
from ringleader.contract import keys


def start_time(records: Iterable[dict]) -> float | None:
    """When the first iteration began, in seconds since the epoch: the earliest timestamp less its iteration."""
    starts = [float(r[keys.TIMESTAMP]) - float(r.get(keys.TIME_ITERATION) or 0.0)
              for r in records if r.get(keys.TIMESTAMP) is not None]
    return min(starts) if starts else None


def reached(target: spec.Target, eval_loss: float, eval_accuracy: float) -> bool:
    """Accuracy (a fraction) at least the target's percent, or loss at most the target's loss."""
    if target.accuracy_percent is not None:
        return eval_accuracy * 100.0 >= target.accuracy_percent
    assert target.loss is not None, "a Target's rule: exactly one of accuracyPercent and loss"
    return eval_loss <= target.loss


def evaluations(records_by_rank: dict[int, list[dict]]) -> list[dict]:
    """The records that carry an evaluation, in step order (one rank evaluates)."""
    found = [r for records in records_by_rank.values() for r in records if r.get(keys.EVAL_ACCURACY) is not None]
    return sorted(found, key=lambda r: r[keys.STEP])


def summarize(records_by_rank: dict[int, list[dict]], target: spec.Target | None) -> dict[str, Any]:
    """evaluations, evalLossLast, evalAccuracyLast, evalAccuracyBest and, once reached, targetSeconds and
    targetIterations; empty without evaluations."""
    evaluated = evaluations(records_by_rank)
    if not evaluated:
        return {}
    last = evaluated[-1]
    summary: dict[str, Any] = {
        keys.EVALUATIONS: len(evaluated),
        keys.EVAL_LOSS_LAST: float(last[keys.EVAL_LOSS]),
        keys.EVAL_ACCURACY_LAST: float(last[keys.EVAL_ACCURACY]),
        keys.EVAL_ACCURACY_BEST: max(float(r[keys.EVAL_ACCURACY]) for r in evaluated),
    }
    if target is None:
        return summary
    first = next((r for r in evaluated
                  if reached(target, float(r[keys.EVAL_LOSS]), float(r[keys.EVAL_ACCURACY]))), None)
    start = start_time(r for records in records_by_rank.values() for r in records)
    if first is not None and start is not None and first.get(keys.TIMESTAMP) is not None:
        # time/eval: the evaluation inside the iteration; eval/seconds in records older than that
        ended = float(first[keys.TIMESTAMP]) - float(first.get(keys.TIME_EVAL) or first.get(keys.EVAL_SECONDS) or 0.0)
        summary[keys.TARGET_SECONDS] = max(0.0, ended - start)
        summary[keys.TARGET_ITERATIONS] = int(first[keys.STEP]) + 1
    return summary
