"""A tracking URI with credentials in it: `ringleader run` uses it, and shows or stores it only redacted.

A real `mlflow server` on 127.0.0.1 (it ignores the credentials, as a server without auth does). The
password must appear nowhere: not in the launcher's output, not in any file of the run directory, not
in any MLflow param or tag. A later `ringleader publish` needs the URI given again, since nothing on
disk holds the password.
"""

from __future__ import annotations

import json
import subprocess
import sys

import mlflow.tracking
import pytest

import launching

pytestmark = pytest.mark.integration
SECRET = "pw-4e7a1c9b"


def test_credentials_in_the_tracking_uri_are_used_but_never_shown_or_stored(tracking_server, workdir):
    tracking_server.start()
    uri = tracking_server.uri.replace("http://", f"http://ringleader:{SECRET}@")
    shown = tracking_server.uri.replace("http://", "http://***@")
    path = launching.experiment_file(workdir, "inline", {"architecture": "RingAllReduce"})

    finished = launching.run(workdir, str(path), "--tracking-uri", uri)

    assert finished.returncode == 0, finished.output
    assert SECRET not in finished.output and f"MLflow: {shown}" in finished.output
    [session] = list((workdir / "ringleader-runs").iterdir())
    files = [p for p in session.rglob("*") if p.is_file()]
    assert len(files) > 10
    assert [p for p in files if SECRET.encode() in p.read_bytes()] == []
    assert json.loads((session / "session.json").read_text())["trackingUri"] == shown

    client = mlflow.tracking.MlflowClient(tracking_server.uri)
    experiment = client.get_experiment_by_name("default/inline")
    runs = client.search_runs([experiment.experiment_id])
    assert {r.data.tags["ringleader.kind"] for r in runs} == {"sweep", "trial", "rank"}  # published through the URI
    for run in runs:
        assert SECRET not in json.dumps([run.data.params, run.data.tags, run.info.artifact_uri])

    def publish(*arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ringleader.cli", "publish", str(session), *arguments],
                              cwd=workdir, env=launching.launcher_environ(), capture_output=True, text=True, timeout=120)

    again = publish()
    assert again.returncode == 1
    [line] = again.stderr.strip().splitlines()
    assert f"its MLflow URI {shown} carried credentials" in line and "--tracking-uri" in line
    assert publish("--tracking-uri", uri).returncode == 0
