"""`ringleader predict` on fresh real trials of the three architectures, and the prediction each trial run logged."""

from __future__ import annotations

import json
import math
import pathlib
import subprocess
import sys

import mlflow.tracking
import pytest

import launching

pytestmark = pytest.mark.integration

LABELS = {"ParameterServer": "1ps", "PeerToPeer": "p2p", "RingAllReduce": "ring"}
BUCKET_BYTES = 128 * 1024  # the mlp's two last layers in one bucket, its first in another: two sizes to fit


def predict(cwd: pathlib.Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ringleader.cli", "predict", *arguments], cwd=cwd,
                          env=launching.launcher_environ(), capture_output=True, text=True, timeout=120)


def test_each_architecture_logs_its_prediction_and_predict_reads_the_same(workdir):
    path = launching.experiment_file(workdir, "pr", {"sweep": {"matrix": {"architecture": list(LABELS)}}})
    finished = launching.run(workdir, str(path), timeout=240, extra_env={"RINGLEADER_BUCKET_BYTES": str(BUCKET_BYTES)})
    assert finished.returncode == 0, finished.output

    # What each trial run logged when it ended: its own prediction, its measurement, and every architecture's.
    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    experiment_id = client.get_experiment_by_name("default/pr").experiment_id
    trial_runs = client.search_runs([experiment_id], "tags.`ringleader.kind` = 'trial'")
    assert len(trial_runs) == 3
    logged = {}
    for run in trial_runs:
        metrics = run.data.metrics
        architecture = run.data.params["architecture"]
        predicted, measured = metrics["predict_iteration_ms"], metrics["predict_measured_iteration_ms"]
        for value in (predicted, measured, metrics["predict_link_bits_per_s"], metrics["predict_compute_ms"]):
            assert math.isfinite(value) and value > 0, (architecture, metrics)
        # Each rounded on its own (ms to 0.001, % to 0.1): the error from the rounded times is within 0.1 %.
        assert metrics["predict_error_pct"] == pytest.approx(100 * abs(predicted - measured) / measured, abs=0.1)
        for label in ("1ps", "4ps", "p2p", "ring"):
            assert math.isfinite(metrics[f"predict_{label}_iteration_ms"]) and metrics[f"predict_{label}_iteration_ms"] > 0
        assert metrics[f"predict_{LABELS[architecture]}_iteration_ms"] == predicted
        logged[run.data.tags["mlflow.runName"].split(" ")[0]] = metrics

    # `ringleader predict` on the run directory: the same numbers from the same files.
    by_directory = predict(workdir, "ringleader-runs", "-o", "json")
    assert by_directory.returncode == 0, by_directory.stderr
    documents = {document["trial"]: document for document in json.loads(by_directory.stdout)}
    assert set(documents) == set(logged)
    for name, document in documents.items():
        assert round(1000 * document["iterationSeconds"], 3) == logged[name]["predict_iteration_ms"]
        assert round(100 * document["errorFraction"], 1) == logged[name]["predict_error_pct"]
        if document["architecture"] == "ring":
            # Its bucket allreduces, of two sizes, are the pairs. Whether both link parameters come out of them is
            # the data's (gloo on a loaded CPU need not take longer for more bytes); either way the label says.
            assert "of 2 sizes" in document["fit"], document["fit"]
            assert document["fit"].startswith(("latency and bandwidth fitted", "bandwidth fitted as the effective "
                                               "rate; latency not fitted (time does not grow with size)"))
        else:  # one exchange size per iteration: the effective rate, and the label says so
            assert "latency not fitted (one message size)" in document["fit"], document["fit"]

    # From MLflow (the sweep run) and as a table: the same predictions, each trial's headline printed.
    [sweep] = client.search_runs([experiment_id], "tags.`ringleader.kind` = 'sweep'")
    from_mlflow = predict(workdir, sweep.info.run_id, "--bucket-mib", str(BUCKET_BYTES / 1024 / 1024))
    assert from_mlflow.returncode == 0, from_mlflow.stderr
    for name, metrics in logged.items():
        assert f"trial {name} (" in from_mlflow.stdout
        assert f"predicted {metrics['predict_iteration_ms']:.3f} ms" in from_mlflow.stdout

    missing = predict(workdir, "ringleader-runs", "--trial", "pr-9")
    assert missing.returncode == 1 and "has no trial 'pr-9'" in missing.stderr
