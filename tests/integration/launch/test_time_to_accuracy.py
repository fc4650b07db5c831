"""`ringleader run` on real data (the digits that ship with scikit-learn): the first worker evaluates every K
iterations, the summary, MLflow and the records agree on when the target accuracy was reached, and
onReached Stop ends every worker at that iteration."""

from __future__ import annotations

import json

import mlflow.tracking
import pytest

import launching

pytestmark = pytest.mark.integration

EVERY = 10


def digits_experiment(workdir, name: str, architecture: str, iterations: int, on_reached: str):
    return launching.experiment_file(workdir, name, {
        "architecture": architecture,
        "model": {"name": "mlp", "batchSize": 32, "iterations": iterations, "warmupIterations": 2,
                  "optimizer": {"name": "SGD", "learningRate": 0.02},  # about 40 iterations to 80 %
                  "evaluation": {"everyIterations": EVERY},
                  "target": {"accuracyPercent": 80, "onReached": on_reached}},
        "data": {"format": "Digits", "heldOutPercent": 20, "synthetic": {"seed": 1}},
    })


def records_of(workdir, trial: str) -> tuple[dict, dict[int, list[dict]]]:
    [session] = [d for d in (workdir / "ringleader-runs").iterdir() if d.is_dir()]
    summary = json.loads((session / trial / "summary.json").read_text())
    ranks = {int(d.name.split("-")[1]): [json.loads(line) for line in (d / "iterations.jsonl").read_text().splitlines()]
             for d in (session / trial).glob("rank-*")}
    return summary, ranks


def trial_metrics(workdir, experiment: str) -> dict[str, float]:
    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    found = client.get_experiment_by_name(experiment)
    [trial] = [r for r in client.search_runs([found.experiment_id]) if r.data.tags.get("ringleader.kind") == "trial"]
    return trial.data.metrics


def test_evaluation_every_k_iterations_times_the_target_consistently_everywhere(workdir):
    path = digits_experiment(workdir, "digits", "RingAllReduce", iterations=60, on_reached="Continue")

    finished = launching.run(workdir, str(path), "--data-dir", str(workdir), timeout=240)

    assert finished.returncode == 0, finished.output
    summary, ranks = records_of(workdir, "digits-0")
    evaluator, other = ranks[0], ranks[1]
    evaluated = [r for r in evaluator if "eval/accuracy" in r]
    assert [r["step"] for r in evaluated] == [9, 19, 29, 39, 49, 59]  # every K-th iteration, and the last
    assert not any("eval/accuracy" in r for r in other)  # one rank evaluates
    assert all(0.0 <= r["eval/accuracy"] <= 1.0 and r["eval/loss"] > 0 and 0 < r["eval/seconds"] <= r["time/eval"]
               for r in evaluated)
    assert evaluated[-1]["eval/accuracy"] > evaluated[0]["eval/accuracy"] - 0.05  # it learns, at least no worse
    assert len(evaluator) == len(other) == 60  # Continue: every iteration runs

    first = next(r for r in evaluated if r["eval/accuracy"] >= 0.80)
    assert first is not evaluated[0]  # the target takes learning to reach
    assert summary["targetIterations"] == first["step"] + 1
    start = min(r["timestamp"] - r["time/iteration"] for records in ranks.values() for r in records)
    assert summary["targetSeconds"] == pytest.approx(first["timestamp"] - first["time/eval"] - start)
    assert 0 < summary["targetSeconds"] < max(r["timestamp"] for r in evaluator) - start
    assert summary["evaluations"] == 6 and summary["evalAccuracyLast"] == evaluated[-1]["eval/accuracy"]

    metrics = trial_metrics(workdir, "default/digits")
    assert metrics["target_iterations"] == summary["targetIterations"]
    assert metrics["target_time_s"] == round(summary["targetSeconds"], 3)
    assert metrics["eval_accuracy_last_pct"] == round(100 * summary["evalAccuracyLast"], 1)


def test_on_reached_stop_ends_every_worker_at_the_iteration_that_reached_the_target(workdir):
    path = digits_experiment(workdir, "stops", "ParameterServer", iterations=1000, on_reached="Stop")

    finished = launching.run(workdir, str(path), "--data-dir", str(workdir), timeout=240)

    assert finished.returncode == 0, finished.output
    summary, ranks = records_of(workdir, "stops-0")
    reached = summary["targetIterations"]
    assert EVERY < reached < 1000 and reached % EVERY == 0  # not at the first evaluation: the stop is a decision
    evaluator, other = ranks[1], ranks[2]  # rank 0 is the parameter server
    assert len(evaluator) == reached  # the others hear it at their next answer from the server
    assert reached <= len(other) < 1000
    evaluated = [r for r in evaluator if "eval/accuracy" in r]
    assert evaluated[-1]["eval/accuracy"] >= 0.80 and all(r["eval/accuracy"] < 0.80 for r in evaluated[:-1])
    logs = next((workdir / "ringleader-runs").iterdir()) / "stops-0" / "logs"
    assert f"target accuracy 80% reached: stopping after iteration {reached}" in (logs / "rank-1.stdout").read_text()
    assert "target accuracy 80% reached by the evaluating worker: stopping" in (logs / "rank-2.stdout").read_text()
