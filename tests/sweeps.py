"""Synthetic sweeps for report tests: real trials (api.expand of a real document) with records shaped like the
runtime's and summaries from models.summary.summarize, so the numbers a report shows can be computed by hand."""

from __future__ import annotations

import dataclasses

from typing import Any

from ringleader.models import results, summary
from ringleader.api import experiment, trial

START = 1_700_000_000.0
# Seconds per worker iteration by architecture: compute 20 ms everywhere, communication as below.
COMM_SECONDS = {"ParameterServer": 0.030, "PeerToPeer": 0.020, "RingAllReduce": 0.010}


def trials(spec: dict[str, Any], name: str = "rep") -> list[trial.Trial]:
    return trial.expand(experiment.parse({
        "apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment",
        "metadata": {"name": name},
        "spec": {"model": {"batchSize": 16, "iterations": 20, "warmupIterations": 2}, **spec},
    })).trials


def worker_records(the_trial: trial.Trial, comm: float, jitter: float = 0.0, loss_rate: float = 0.1,
                   stale: int = 0) -> list[dict]:
    """20 iterations of 20 ms compute + `comm` (+ `jitter`) seconds, loss 2.0 falling by loss_rate per iteration."""
    records, now = [], START
    iteration = 0.020 + comm + jitter
    for step in range(the_trial.spec.model.iterations):
        now += iteration
        records.append({"step": step, "role": "worker", "warmup": step < 2, "timestamp": now,
                        "time/data": 0.002, "time/forward": 0.006, "time/backward": 0.010, "time/update": 0.002,
                        "time/comm": comm + jitter, "time/wait": 0.0, "time/iteration": iteration,
                        "bytes/sent": 1000.0, "loss": 2.0 - loss_rate * step, "staleness": float(step % (stale + 1))})
    return records


def result_of(the_trial: trial.Trial, status: str = "FINISHED", message: str | None = None, jitter: float = 0.0,
              loss_rate: float = 0.1, stale: int = 0, server: list[dict] | None = None,
              layers: dict | None = None) -> results.TrialResult:
    """A TrialResult whose every worker recorded `worker_records`, with the real summary of those records."""
    if status != "FINISHED":
        return results.TrialResult(the_trial, status, message)
    comm = COMM_SECONDS[the_trial.spec.architecture.value]
    workers = [slot.rank for slot in the_trial.worker_slots()]
    records = {rank: worker_records(the_trial, comm, jitter, loss_rate, stale) for rank in workers}
    if server is not None:
        records[0] = server
    layer_documents = {workers[0]: layers} if layers else {}
    return results.TrialResult(the_trial, status, None, summary.summarize(records, the_trial), records,
                               layer_documents)


def with_usage(result: results.TrialResult, usage: dict) -> results.TrialResult:
    """The trial as if its ranks had recorded `usage` ({rank: what its process used}) in its summary."""
    return dataclasses.replace(result, summary=dataclasses.replace(result.summary, usage=usage))


def placed(result: results.TrialResult, nodes: int, share: float) -> results.TrialResult:
    """The trial as if its ranks had run on `nodes` nodes with `share` of its bytes crossing them."""
    placement = summary.RecordedPlacement(node_count=nodes, cross_node_byte_share=share, nodes={})
    return dataclasses.replace(result, summary=dataclasses.replace(result.summary, placement=placement))


def reached_at(result: results.TrialResult, seconds: float | None) -> results.TrialResult:
    """The trial as if it had reached its target `seconds` after its start (None: never)."""
    evaluation = dataclasses.replace(result.summary.evaluation, target_seconds=seconds)
    return dataclasses.replace(result, summary=dataclasses.replace(result.summary, evaluation=evaluation))


def layers_document(parameters: int = 4, size: int = 4_000_000) -> dict:
    """A layers.json of `parameters` gradients of `size` bytes ready 2 ms apart in a 10 ms backward."""
    names = [f"layer{i}.weight" for i in range(parameters)]
    iteration = {"backwardStart": 100.0, "backwardEnd": 100.010,
                 "ready": {name: 100.0 + 0.002 * (parameters - i) for i, name in enumerate(names)}}
    return {"parameters": [{"name": name, "bytes": size} for name in names], "iterations": [iteration, iteration]}
