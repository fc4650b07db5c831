"""Fixtures of the browser tests: a real 2-trial sweep by `ringleader run`, a real `mlflow server` over its store on
127.0.0.1, and the kept directory for screenshots (listed at the end of the pytest output)."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil
import sys

import mlflow.tracking
import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parents[3]
# The launcher tests' helpers: `ringleader run` as a subprocess, experiment files, the server, a migrated database.
sys.path.insert(0, str(REPOSITORY / "tests" / "integration" / "launch"))

import launching  # noqa: E402
from launching import migrated_db  # noqa: E402,F401 - pytest finds fixtures by name here

TAKEN: list[pathlib.Path] = []  # screenshots, in the order taken


@dataclasses.dataclass
class RecordedSweep:
    """A sweep as the UI should show it, read back from the store the run wrote."""

    server: launching.TrackingServer
    experiment_id: str
    sweep_run_id: str
    sweep_run_name: str
    trials: list[str]


@pytest.fixture(scope="module")
def recorded_sweep(tmp_path_factory, migrated_db) -> RecordedSweep:  # noqa: F811 - the fixture imported above
    """Two trials (parameter server, ring) of a tiny model, run for real, then served by `mlflow server`."""
    workdir = tmp_path_factory.mktemp("browser")
    shutil.copy(migrated_db, workdir / "mlflow.db")
    path = launching.experiment_file(workdir, "ui", {
        "model": {"iterations": 10},
        "sweep": {"matrix": {"architecture": ["ParameterServer", "RingAllReduce"]}}})
    finished = launching.run(workdir, str(path), timeout=240)
    assert finished.returncode == 0, finished.output

    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("default/ui")
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    [sweep] = [run for run in runs if run.data.tags.get("ringleader.kind") == "sweep"]
    trials = sorted(run.data.tags["ringleader.trial"] for run in runs
                    if run.data.tags.get("ringleader.kind") == "trial")

    server = launching.TrackingServer(workdir, workdir / "mlflow.db")
    server.start()
    try:
        yield RecordedSweep(server, experiment.experiment_id, sweep.info.run_id, sweep.info.run_name, trials)
    finally:
        server.stop()


class Screenshots:
    """Where a test keeps its screenshots; every one taken is listed at the end of the pytest output."""

    def __init__(self, directory: pathlib.Path):
        self.directory = directory

    def take(self, page, name: str) -> pathlib.Path:
        path = self.directory / f"{name}.png"
        page.screenshot(path=path, full_page=True)
        TAKEN.append(path)
        return path


@pytest.fixture(scope="session")
def screenshots() -> Screenshots:
    """$RINGLEADER_TEST_ARTIFACTS/browser, else test-artifacts/browser at the repository root; emptied first,
    so what is there after a run is that run's."""
    root = pathlib.Path(os.environ.get("RINGLEADER_TEST_ARTIFACTS") or REPOSITORY / "test-artifacts")
    directory = root / "browser"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return Screenshots(directory)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if TAKEN:
        terminalreporter.section("browser screenshots")
        for path in TAKEN:
            terminalreporter.write_line(str(path))
