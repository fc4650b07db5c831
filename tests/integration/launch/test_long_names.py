"""An experiment's name may be any DNS subdomain of up to 253 characters, and such an experiment runs:
its session directory and its artifact directory keep a prefix and a hash, as trials do."""

from __future__ import annotations

import mlflow.tracking
import pytest
import yaml

import launching
from ringleader.launch import cli

pytestmark = pytest.mark.integration

LONGEST = "a" * 120 + "." + "b" * 132  # 253 characters, the most the API server takes


def test_an_experiment_named_with_253_characters_runs_and_is_recorded(workdir):
    path = workdir / "long.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment",
        "metadata": {"name": LONGEST},
        "spec": {"architecture": "RingAllReduce", "workers": {"replicas": 1},
                 "model": {"name": "mlp", "batchSize": 8, "iterations": 6, "warmupIterations": 1},
                 "data": {"synthetic": {"samples": 64, "imageSize": 8, "numClasses": 4}}},
    }))

    finished = launching.run(workdir, str(path))

    assert finished.returncode == 0, finished.output
    assert "Traceback" not in finished.output and "unavailable" not in finished.output, finished.output
    [session] = (workdir / "ringleader-runs").iterdir()
    assert len(session.name.encode()) <= 255 and session.name.startswith("a" * 90)
    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(f"default/{LONGEST}")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    assert runs and all(run.info.status == "FINISHED" for run in runs)
    assert any(client.list_artifacts(run.info.run_id) for run in runs)  # under a bounded artifact directory


def test_long_names_get_distinct_session_directories(tmp_path):
    other = LONGEST[:-1] + "c"  # differs only past the kept prefix
    directories = [cli.new_session_dir(tmp_path, name) for name in (LONGEST, other, LONGEST)]
    assert len(set(directories)) == 3 and all(d.is_dir() for d in directories)
    assert directories[0].name.split("-")[1] != directories[1].name.split("-")[1]  # the hashes differ
