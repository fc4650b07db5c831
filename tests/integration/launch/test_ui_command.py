"""`ringleader ui` (`make ui`): prints the newest sweep's page in the model-training view, then serves the UI
on 127.0.0.1, until a signal to its process id stops the server and every process it started."""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request

import mlflow.tracking
import pytest

import launching
from loopback import free_port

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def trained(tmp_path_factory, migrated_db):
    """A working directory after one `ringleader run`: what every test here serves (`ringleader ui` only reads it)."""
    workdir = tmp_path_factory.mktemp("ui")
    shutil.copy(migrated_db, workdir / "mlflow.db")
    path = launching.experiment_file(workdir, "shown", {"architecture": "RingAllReduce", "model": {"iterations": 5}})
    finished = launching.run(workdir, str(path))
    assert finished.returncode == 0, finished.output
    return workdir


def test_ui_prints_the_newest_sweeps_training_view_and_serves_it(trained):
    workdir = trained
    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("default/shown")
    [sweep] = client.search_runs([experiment.experiment_id], "tags.`ringleader.kind` = 'sweep'")
    port = free_port()

    server = subprocess.Popen([sys.executable, "-m", "ringleader.cli", "ui", "--port", str(port)], cwd=workdir,
                              env=launching.launcher_environ(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, start_new_session=True)
    try:
        # Ours comes once the server answers (bounded: the server's output ends when it exits). Before it, of MLflow's
        # start-up, only its security notice, naming the loopback hosts it serves and advising no `--host 0.0.0.0`:
        # no store, job executor, deprecation or request lines.
        before = []
        for said in server.stdout:
            if said.startswith("MLflow UI: ") or server.poll() is not None:
                break
            before.append(said)
        assert [line for line in before if not line.startswith("[MLflow] Security middleware enabled. ")] == []
        assert [line for line in before if "0.0.0.0" in line or f"127.0.0.1:{port}" not in line] == []
        assert said == (f"MLflow UI: http://127.0.0.1:{port}/#/experiments/{experiment.experiment_id}/runs/"
                        f"{sweep.info.run_id}?workflowType=machine_learning  (Ctrl-C stops it)\n")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as answer:  # at once, no retry
            assert answer.status == 200
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_ui_without_a_store_says_so_and_creates_none(tmp_path):
    done = subprocess.run([sys.executable, "-m", "ringleader.cli", "ui"], cwd=tmp_path,
                          env=launching.launcher_environ(),
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith("ringleader ui: nothing to show, and no MLflow store at sqlite:///")
    assert not (tmp_path / "mlflow.db").exists()


def group_members(pgid: int) -> list[int]:
    """The processes of process group `pgid` (field 5 of /proc/PID/stat)."""
    members = []
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        if int(fields[2]) == pgid:
            members.append(int(stat.parent.name))
    return members


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_the_ui_commands_process_id_stops_the_server_and_everything_it_started(trained, signum):
    workdir = trained
    port = free_port()
    ui = subprocess.Popen([sys.executable, "-m", "ringleader.cli", "ui", "--port", str(port)], cwd=workdir,
                          env=launching.launcher_environ(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for said in ui.stdout:  # bounded: the output ends when the command exits
            if said.startswith("MLflow UI: "):
                break
        [server] = (pathlib.Path("/proc") / str(ui.pid) / "task" / str(ui.pid) / "children").read_text().split()
        assert group_members(int(server)) != [], "the server leads a process group of its own"
        os.kill(ui.pid, signum)  # the command's own process id only, as `kill PID` sends it
        assert ui.wait(timeout=60) == 128 + signum
        assert group_members(int(server)) == []
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
    finally:
        if ui.poll() is None:
            ui.kill()
            ui.wait()
