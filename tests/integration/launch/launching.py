"""Helpers of the launcher's integration tests: `ringleader run` as a real subprocess, a migrated MLflow
database to start from, experiment files, a real `mlflow server`, and a /proc scan for processes a run
left behind. conftest.py makes the fixtures here available; tests import the rest as `launching`
(a name of its own: several conftest.py files exist in tests/)."""

from __future__ import annotations

import os

# Before MLflow is imported: its telemetry thread starts at import time (ringleader.tracking does the same).
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import dataclasses
import pathlib
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any

import mlflow.tracking
import pytest
import yaml

from loopback import free_port

HERE = pathlib.Path(__file__).resolve().parent
REPOSITORY = HERE.parents[2]
SOURCE_ROOT = REPOSITORY / "operator"


@pytest.fixture(scope="session")
def migrated_db(tmp_path_factory) -> pathlib.Path:
    # MLflow creates its schema in seconds; runs start from a copy of one migrated database.
    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    mlflow.tracking.MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


def experiment_file(directory: pathlib.Path, name: str, spec: dict[str, Any]) -> pathlib.Path:
    """A tiny experiment (mlp on 8x8 images, 2 workers, 20 iterations) with `spec` merged over it."""
    base: dict[str, Any] = {
        "workers": {"replicas": 2},
        "model": {"name": "mlp", "batchSize": 16, "iterations": 20, "warmupIterations": 2},
        "data": {"synthetic": {"samples": 512, "imageSize": 8, "numClasses": 4}},
    }
    for key, value in spec.items():
        base[key] = {**base[key], **value} if isinstance(value, dict) and isinstance(base.get(key), dict) else value
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment",
                                    "metadata": {"name": name}, "spec": base}))
    return path


def launcher_environ(extra: dict[str, str] | None = None) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RINGLEADER_MLFLOW_RUN_ID")}
    environ["PYTHONPATH"] = os.pathsep.join([str(SOURCE_ROOT), str(HERE)])
    environ["RINGLEADER_TIMEOUT_SECONDS"] = "30"  # a hung peer fails fast in tests
    environ.update(extra or {})
    return environ


@dataclasses.dataclass
class Finished:
    returncode: int
    output: str
    seconds: float


def start_run(cwd: pathlib.Path, *arguments: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    """`ringleader run ...` in its own session (signals reach it alone), output to cwd/launcher.log."""
    log = open(cwd / "launcher.log", "wb")
    return subprocess.Popen([sys.executable, "-m", "ringleader.cli", "run", *arguments], cwd=cwd,
                            env=launcher_environ(extra_env), stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def run(cwd: pathlib.Path, *arguments: str, timeout: float = 300, extra_env: dict[str, str] | None = None) -> Finished:
    started = time.monotonic()
    process = start_run(cwd, *arguments, extra_env=extra_env)
    try:
        process.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        pytest.fail(f"ringleader run did not end within {timeout} s:\n{(cwd / 'launcher.log').read_text()}")
    return Finished(process.returncode, (cwd / "launcher.log").read_text(), time.monotonic() - started)


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """Live processes whose environment contains `text` (e.g. the test's tmp dir): (pid, command line)."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            status = (entry / "status").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if "State:\tZ" in status:
            continue  # exited, waiting to be reaped: it runs nothing
        if text.encode() in environ:
            found.append((int(entry.name), command.strip()))
    return found


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {timeout} s")
        time.sleep(0.1)


@pytest.fixture
def workdir(tmp_path, migrated_db):
    """A working directory holding ./mlflow.db, as after a first `ringleader run` there. Whatever rank of
    a run there is still alive when the test ends (the test failed) is killed."""
    shutil.copy(migrated_db, tmp_path / "mlflow.db")
    yield tmp_path
    for pid, _ in processes_mentioning(f"RINGLEADER_OUTPUT_DIR={tmp_path}"):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class TrackingServer:
    """A real `mlflow server` on 127.0.0.1, stopped and started again on the same port and database."""

    def __init__(self, directory: pathlib.Path, database: pathlib.Path):
        self.directory = directory
        self.port = free_port()
        self.database = directory / "server.db"
        shutil.copy(database, self.database)
        self.process: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120) -> None:
        command = [str(pathlib.Path(sys.executable).parent / "mlflow"), "server", "--host", "127.0.0.1",
                   "--port", str(self.port), "--workers", "1", "--backend-store-uri", f"sqlite:///{self.database}",
                   "--artifacts-destination", str(self.directory / "artifacts")]
        # No job runner: its seven worker processes, which no test uses, would each import MLflow (the chart's server
        # and `ringleader ui` turn it off too).
        environ = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        with open(self.directory / "server.log", "ab") as log:
            self.process = subprocess.Popen(command, env=environ, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not self.healthy():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("mlflow server did not "
                                   f"start:\n{(self.directory / 'server.log').read_text()[-3000:]}")
            time.sleep(0.2)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.uri}/health", timeout=1) as response:
                return response.status == 200
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is None:
            return
        group = self.process.pid
        for signum in (signal.SIGTERM, signal.SIGKILL):  # SIGKILL: whatever is left, uvicorn's worker included
            try:
                os.killpg(group, signum)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                pass
        self.process = None
        wait_for(lambda: not self.healthy(), 15, "the server gone")


@pytest.fixture
def tracking_server(tmp_path, migrated_db):
    server = TrackingServer(tmp_path, migrated_db)
    yield server
    server.stop()
