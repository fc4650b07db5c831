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
from ringleader.contract import keys
from ringleader.models import validation

pytestmark = pytest.mark.integration

LABELS = {"ParameterServer": "1ps", "PeerToPeer": "p2p", "RingAllReduce": "ring"}
BUCKET_BYTES = 128 * 1024  # the mlp's two last layers in one bucket, its first in another: two sizes to fit


def predict(cwd: pathlib.Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ringleader.cli", "predict", *arguments], cwd=cwd,
                          env=launching.launcher_environ(), capture_output=True, text=True, timeout=120)


def test_each_architecture_logs_its_prediction_and_predict_reads_the_same(workdir):
    # An emulated 200 Mbit/s link: the kind of link the predictions were validated on, so each carries its band.
    path = launching.experiment_file(workdir, "pr", {"network": {"bandwidth": "200Mbit"},
                                                     "sweep": {"matrix": {"architecture": list(LABELS)}}})
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
        name = run.data.tags["mlflow.runName"].split(" ")[0]
        summary = json.loads(next((workdir / "ringleader-runs").glob(f"*/{name}/summary.json")).read_text())
        assert "predict_iteration_ms" in metrics, (architecture, summary.get(keys.PREDICTION))
        predicted, measured = metrics["predict_iteration_ms"], metrics["predict_measured_iteration_ms"]
        for value in (predicted, measured, metrics["predict_link_bits_per_s"], metrics["predict_compute_ms"]):
            assert math.isfinite(value) and value > 0, (architecture, metrics)
        # Each rounded on its own (ms to 0.001, % to 0.1): the error from the rounded times is within 0.1 %.
        assert metrics["predict_error_pct"] == pytest.approx(100 * abs(predicted - measured) / measured, abs=0.1)
        for label in ("1ps", "4ps", "p2p", "ring"):
            assert (math.isfinite(metrics[f"predict_{label}_iteration_ms"])
                    and metrics[f"predict_{label}_iteration_ms"] > 0)
        # Validated: a band, where the machine was no busier than the bench's runs (the ranks' load, as recorded);
        # 4 servers were not.
        load = max(used["loadPerCpu"] for used in summary["usage"].values())
        for label in ("1ps", "p2p", "ring"):
            if load <= validation.BANDS["emulated", label][-1].load_per_cpu:
                assert metrics[f"predict_{label}_band_pct"] > 0, (label, load)
            else:
                assert f"predict_{label}_band_pct" not in metrics, (label, load)
        assert "predict_4ps_band_pct" not in metrics
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
        # Every trial probed the same link at its start, trains of 5 sizes each way, and prices every architecture
        # on it.
        probe = json.loads(next((workdir / "ringleader-runs").glob(f"*/{name}/summary.json")).read_text())
        assert [len(probe["linkProbe"][kind]["samples"]) for kind in ("pointToPoint", "collective")] == [5, 5]
        assert document["linkKind"] == "emulated" and document["cannotPredict"] is None
        assert ("the emulated cap 0.2 Gbit/s where slower (probed at the trial's start: median of trains, 5 sizes, "
                "the largest sustained") in document["fit"], document["fit"]
        assert document["linkBitsPerSecond"] == 200e6  # loopback is faster than the cap

    # From MLflow (the sweep run) and as a table: the same predictions, each trial's headline printed.
    [sweep] = client.search_runs([experiment_id], "tags.`ringleader.kind` = 'sweep'")
    from_mlflow = predict(workdir, sweep.info.run_id, "--bucket-mib", str(BUCKET_BYTES / 1024 / 1024))
    assert from_mlflow.returncode == 0, from_mlflow.stderr
    for name, metrics in logged.items():
        assert f"trial {name} (" in from_mlflow.stdout
        assert f"predicted {metrics['predict_iteration_ms']:.3f} ms" in from_mlflow.stdout

    missing = predict(workdir, "ringleader-runs", "--trial", "pr-9")
    assert missing.returncode == 1 and "has no trial 'pr-9'" in missing.stderr

    # `ringleader whatif` takes the profile as predict does: of the parameter-server trial its lowest worker rank
    # (rank 0 is the server), and of the run the ring trial.
    server_trial = next((workdir / "ringleader-runs").glob("*/pr-0"))
    whatif = subprocess.run([sys.executable, "-m", "ringleader.cli", "whatif", str(server_trial), "--workers", "2"],
                            cwd=workdir, env=launching.launcher_environ(), capture_output=True, text=True, timeout=120)
    assert whatif.returncode == 0, whatif.stderr
    assert whatif.stdout.startswith("trial pr-0 (a ParameterServer trial: "
                                    "modelled as a ring allreduce of its gradients "
                                    "after backward, not as its own exchange; `ringleader predict` prices "
                                    "ParameterServer itself), rank 1 (the lowest worker rank): ")
    of_run = subprocess.run([sys.executable, "-m", "ringleader.cli", "whatif", "ringleader-runs", "--workers", "2"],
                            cwd=workdir, env=launching.launcher_environ(), capture_output=True, text=True, timeout=120)
    assert of_run.returncode == 0, of_run.stderr
    assert "trial pr-2 (a RingAllReduce trial, the one with the fewest workers), rank 0" in of_run.stdout
