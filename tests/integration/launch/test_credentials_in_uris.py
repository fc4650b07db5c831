"""Credentials on a local run: in a tracking URI, used and shown or stored only redacted; in the shell, sent
only to the server the user named.

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
from loopback import Listener

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
                              cwd=workdir, env=launching.launcher_environ(), capture_output=True, text=True,
                              timeout=120)

    again = publish()
    assert again.returncode == 1
    [line] = again.stderr.strip().splitlines()
    assert f"its MLflow URI {shown} carried credentials" in line and "--tracking-uri" in line
    assert publish("--tracking-uri", uri).returncode == 0


TOKEN = "tok-91c0d7e2"


def test_the_users_token_never_reaches_a_server_only_the_experiment_file_names(tracking_server, workdir):
    tracking_server.start()
    theirs = Listener(upstream=tracking_server.uri)  # records every request's headers, forwards it to MLflow
    try:
        path = launching.experiment_file(workdir, "theirs", {"architecture": "RingAllReduce",
                                                             "model": {"iterations": 5},
                                                             "tracking": {"uri": theirs.uri}})
        named_by_the_file = launching.run(workdir, str(path), extra_env={"MLFLOW_TRACKING_TOKEN": TOKEN})

        assert named_by_the_file.returncode == 0, named_by_the_file.output
        assert len(theirs.seen()) > 10 and theirs.authorizations() == {None}
        assert f"warning: MLflow at {theirs.uri} is named by {path}, not by you: your MLFLOW_TRACKING_TOKEN stay(s) " \
               f"here; to send them there, run again with --tracking-uri {theirs.uri}" in named_by_the_file.output
        assert TOKEN not in named_by_the_file.output

        # Named by the user, the same server gets the token on every request: the user loses nothing.
        before = len(theirs.seen())
        named_by_the_user = launching.run(workdir, str(path), "--tracking-uri", theirs.uri,
                                          extra_env={"MLFLOW_TRACKING_TOKEN": TOKEN})
        assert named_by_the_user.returncode == 0, named_by_the_user.output
        assert {headers.get("Authorization") for _, _, headers, _ in theirs.seen()[before:]} == {f"Bearer {TOKEN}"}
        assert "warning" not in named_by_the_user.output
    finally:
        theirs.close()
