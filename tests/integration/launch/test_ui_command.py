"""`ringleader ui` (`make ui`): prints the newest sweep's page in the model-training view, then serves the UI
on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request

import mlflow.tracking
import pytest

import launching
from loopback import free_port

pytestmark = pytest.mark.integration


def test_ui_prints_the_newest_sweeps_training_view_and_serves_it(workdir):
    path = launching.experiment_file(workdir, "shown", {"architecture": "RingAllReduce", "model": {"iterations": 5}})
    assert launching.run(workdir, str(path)).returncode == 0
    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("default/shown")
    [sweep] = client.search_runs([experiment.experiment_id], "tags.`ringleader.kind` = 'sweep'")
    port = free_port()

    server = subprocess.Popen([sys.executable, "-m", "ringleader.cli", "ui", "--port", str(port)], cwd=workdir,
                              env=launching.launcher_environ(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, start_new_session=True)
    try:
        # Ours comes once the server answers (bounded: the server's output ends when it exits). Before it, of MLflow's
        # start-up, only its security notice: no store, job executor, deprecation or request lines.
        before = []
        for said in server.stdout:
            if said.startswith("MLflow UI: ") or server.poll() is not None:
                break
            before.append(said)
        assert [line for line in before if not line.startswith("[MLflow] Security middleware")] == []
        assert said == (f"MLflow UI: http://127.0.0.1:{port}/#/experiments/{experiment.experiment_id}/runs/"
                        f"{sweep.info.run_id}?workflowType=machine_learning  (Ctrl-C stops it)\n")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as answer:  # at once, no retry
            assert answer.status == 200
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_ui_without_a_store_says_so_and_creates_none(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ringleader.cli", "ui"], cwd=tmp_path, env=launching.launcher_environ(),
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("ringleader ui: nothing to show, and no MLflow store at sqlite:///")
    assert not (tmp_path / "mlflow.db").exists()
