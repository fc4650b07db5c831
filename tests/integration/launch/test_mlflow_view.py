"""What a person opening MLflow after `ringleader run` sees: a model-training experiment, runs named by what they
vary, one metric scheme in milliseconds and percent, the trials compared on the sweep run, the files the report
reads."""

from __future__ import annotations

import json
import pathlib

import mlflow.tracking
import pytest

from ringleader.tracking import metric_names

import launching

pytestmark = pytest.mark.integration


def test_a_tiny_sweep_reads_well_in_mlflow(workdir):
    path = launching.experiment_file(workdir, "view", {
        "architecture": "RingAllReduce", "sweep": {"matrix": {"workers": [1, 2], "batchSize": [16]}}})

    finished = launching.run(workdir, str(path))

    assert finished.returncode == 0, finished.output
    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("default/view")
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    [sweep] = [r for r in runs if r.data.tags["ringleader.kind"] == "sweep"]
    trials = {r.data.tags["ringleader.trial"]: r for r in runs if r.data.tags["ringleader.kind"] == "trial"}
    ranks = [r for r in runs if r.data.tags["ringleader.kind"] == "rank"]
    [session] = [d for d in (workdir / "ringleader-runs").iterdir() if d.is_dir()]

    # The last lines say how to open the sweep run, in the model-training view.
    page = (f"http://127.0.0.1:5000/#/experiments/{experiment.experiment_id}/runs/{sweep.info.run_id}"
            "?workflowType=machine_learning")
    assert "ringleader ui --tracking-uri sqlite:///mlflow.db" in finished.output and page in finished.output

    # Names carry every swept value, one worker singular; rank runs carry their trial.
    assert {r.info.run_name for r in trials.values()} == {"view-0 (RingAllReduce, BSP, 1 worker, batch 16)",
                                                          "view-1 (RingAllReduce, BSP, 2 workers, batch 16)"}
    assert sorted(r.info.run_name for r in ranks) == ["view-0/rank-0 (worker)", "view-1/rank-0 (worker)",
                                                      "view-1/rank-1 (worker)"]

    # Params: the axes with their values on the sweep run, nothing unused or empty anywhere.
    assert sweep.data.params["sweep.workers"] == "1, 2" and sweep.data.params["sweep.batchSize"] == "16"
    assert "workers.replicas" not in sweep.data.params and "architecture" in sweep.data.params
    for run in [sweep, *trials.values()]:
        assert not [k for k in run.data.params if k.startswith(("parameterServers", "sync.staleness"))]
        assert not [k for k, v in run.data.params.items() if v in ("", "{}", "[]", "None")]

    # The sweep run compares its trials, in the trial runs' units.
    for name, run in trials.items():
        summary = json.loads((session / name / "summary.json").read_text())
        assert run.data.metrics["iteration_p50_ms"] == round(1000 * summary["iterationTimeP50Seconds"], 3)
        assert run.data.metrics["share_comm_pct"] == round(100 * summary["commFraction"], 1)
        label = {"view-0": "1_worker", "view-1": "2_workers"}[name]  # what varies: the workers
        assert sweep.data.metrics[f"iteration_p50_ms/{label}"] == run.data.metrics["iteration_p50_ms"]
        assert sweep.data.metrics[f"throughput_samples_per_s/{label}"] == round(summary["throughput"], 1)
        assert "summary.json" in {a.path for a in client.list_artifacts(run.info.run_id)}
        assert not [key for key in run.data.metrics if "Seconds" in key or "Fraction" in key]

    # The trial summary carries every rank's usage; local ranks share one machine.
    for name in trials:
        used = json.loads((session / name / "summary.json").read_text())["usage"]
        assert sorted(used) == [str(r) for r in range({"view-0": 1, "view-1": 2}[name])]
        assert len({u["host"] for u in used.values()}) == 1 and all(u["peakRssBytes"] > 0 for u in used.values())

    # A run's page opens on its series: a key with a "/" is a series, one point per iteration; one without is a
    # value logged once, which MLflow charts after every series. The trial runs chart their workers together.
    for run in [*trials.values(), *ranks]:
        for key in run.data.metrics:
            points = client.get_metric_history(run.info.run_id, key)
            # A series that may be zero starts at its first non-zero value, which can be its last step (a rank that
            # waited once); 2 warm-up steps may leave one point under warmup/.
            may_be_zero = any(series in key for series in metric_names.ZERO_UNTIL_USED)
            least = 1 if key.startswith("warmup/") or may_be_zero else 2
            assert len(points) >= least if "/" in key else len(points) == 1, (run.info.run_name, key, len(points))
    for name, run in trials.items():
        series = [json.loads(line) for line in (session / name / "series.jsonl").read_text().splitlines()]
        charted = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "time/iteration_ms")}
        assert sorted(charted) == list(range(2, 20))
        assert charted == {p["step"]: round(1000 * p["time/iteration"], 3) for p in series if "time/iteration" in p}
        assert len(client.get_metric_history(run.info.run_id, "train/loss")) == 20  # from the first step
        assert {"throughput/samples_per_s", "time/compute_ms", "train/loss"} <= set(run.data.metrics)

    # Every charted point is the file's seconds times 1000; warm-up steps (2 here) are apart, under warmup/.
    for rank in ranks:
        trial_name, number = rank.data.tags["ringleader.trial"], rank.data.tags["ringleader.rank"]
        records = [json.loads(line) for line in
                   (session / trial_name / f"rank-{number}" / "iterations.jsonl").read_text().splitlines()]
        charted = {m.step: m.value for m in client.get_metric_history(rank.info.run_id, "time/comm_ms")}
        warmup = {m.step: m.value for m in client.get_metric_history(rank.info.run_id, "warmup/time/comm_ms")}
        assert set(warmup) <= {0, 1} and set(charted) <= set(range(2, 20))
        assert len(charted) > 1 or trial_name == "view-0"  # one worker alone exchanges nothing: no comm series
        for record in records:
            series = warmup if record["warmup"] else charted
            if record["step"] in series:
                assert series[record["step"]] == round(1000 * record["time/comm"], 3)  # to the microsecond
            else:  # a series starts at its first non-zero value
                assert record["time/comm"] == 0 and all(step > record["step"] for step in series), record
        assert rank.data.metrics["mean_time_iteration_ms"] > 0
        # What the rank's process used while training, measured by itself.
        assert rank.data.metrics["cpu_utilization_pct"] > 0 and rank.data.metrics["memory_peak_rss_mib"] > 0
        assert rank.data.metrics["cpu_count"] >= 1 and rank.data.metrics["cpu_threads"] == 1
        assert [a.path for a in client.list_artifacts(rank.info.run_id, "records")] == ["records/iterations.jsonl"]
        local = pathlib.Path(rank.info.artifact_uri.removeprefix("file://")) / "records" / "iterations.jsonl"
        assert local.read_bytes() == (session / trial_name / f"rank-{number}" / "iterations.jsonl").read_bytes()
