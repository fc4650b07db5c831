"""Fixtures that start a trial's ranks as real processes on loopback, with the pod environment contract.

Shared by every integration test that needs real torch.distributed ranks:

    def test_something(make_trial, run_trial, tmp_path):
        trial = make_trial({"architecture": "RingAllReduce", "workers": {"replicas": 2}})
        result = run_trial(trial, tmp_path, timeout=60)
        assert result.ok, result.explain()
        result.iterations(0)  # rank 0's iterations.jsonl records

`start_trial` is the same without waiting, for fault tests (`running.kill(rank)`). Every rank runs
`python -m ringleader.runtime` in its own session on 127.0.0.1 with a free MASTER_PORT, one CPU
thread, gloo bound to `lo`, and a short peer timeout; whatever is still running when the test
ends is killed, children included.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import sys
import time
from typing import Any, Callable

import pytest

REPOSITORY = pathlib.Path(__file__).resolve().parents[2]
SOURCE_ROOT = REPOSITORY / "operator"
# Runs from a plain checkout too, not only with PYTHONPATH=operator or an installed package.
if str(SOURCE_ROOT) not in sys.path:
    sys.path.insert(0, str(SOURCE_ROOT))

from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.contract import environment as contract
from ringleader.contract import records
from ringleader.runtime import settings

from documents import merged
from loopback import free_port

DEFAULT_PEER_TIMEOUT_SECONDS = 20.0


def small_trial(spec: dict[str, Any] | None = None, name: str = "test-0") -> trial_.Trial:
    """A trial of a tiny experiment (mlp on 8x8 images, 20 iterations), with `spec` (camelCase) merged over it."""
    base: dict[str, Any] = {
        "architecture": "RingAllReduce",
        "workers": {"replicas": 2},
        "model": {"name": "mlp", "batchSize": 16, "iterations": 20, "warmupIterations": 2,
                  "optimizer": {"learningRate": 0.05}},
        "data": {"synthetic": {"samples": 512, "imageSize": 8, "numClasses": 4}},
    }

    resolved = spec_.ExperimentSpec.model_validate(merged(base, spec or {}))
    return trial_.Trial(experiment=name.rsplit("-", 1)[0], name=name, index=0, spec=resolved)


@dataclasses.dataclass
class TrialRun:
    """What a finished (or killed) trial left: exit codes per rank, logs, and the records directory."""

    trial: trial_.Trial
    returncodes: dict[int, int | None]
    output_dir: pathlib.Path
    logs_dir: pathlib.Path
    seconds: float
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return not self.timed_out and all(code == 0 for code in self.returncodes.values())

    @property
    def trial_dir(self) -> pathlib.Path:
        return records.trial_dir(self.output_dir, self.trial.name)

    def rank_dir(self, rank: int) -> pathlib.Path:
        return records.rank_dir(self.output_dir, self.trial.name, rank)

    def stdout(self, rank: int) -> str:
        return (self.logs_dir / f"rank-{rank}.out").read_text(errors="replace")

    def stderr(self, rank: int) -> str:
        return (self.logs_dir / f"rank-{rank}.err").read_text(errors="replace")

    def iterations(self, rank: int) -> list[dict]:
        return records.read_iterations(self.rank_dir(rank) / records.ITERATIONS_FILE)

    def read_json(self, rank: int, name: str) -> Any:
        return json.loads((self.rank_dir(rank) / name).read_text())

    def summary(self) -> dict | None:
        path = self.trial_dir / records.SUMMARY_FILE
        return json.loads(path.read_text()) if path.exists() else None

    def explain(self) -> str:
        """Exit codes and the tail of every rank's output, for assertion messages."""
        parts = [f"returncodes={self.returncodes} timed_out={self.timed_out} after {self.seconds:.1f}s"]
        for rank in self.returncodes:
            parts.append(f"--- rank {rank} stdout (tail)\n{self.stdout(rank)[-1500:]}")
            parts.append(f"--- rank {rank} stderr (tail)\n{self.stderr(rank)[-1500:]}")
        return "\n".join(parts)


class RunningTrial:
    """A trial's rank processes, each the leader of its own session so it can be killed with its children."""

    def __init__(self, trial: trial_.Trial, directory: pathlib.Path, extra_env: dict[str, str] | None,
                 peer_timeout: float):
        self.trial = trial
        self.output_dir = directory / "output"
        self.logs_dir = directory / "logs"
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        trial_file = directory / "trial.json"
        trial_file.write_text(trial.model_dump_json(by_alias=True))
        port = free_port()
        base = {key: value for key, value in os.environ.items() if key not in (contract.RUN_ID, contract.TRACKING_URI)}
        base.update({
            "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")])),
            "PYTHONUNBUFFERED": "1",
            "OMP_NUM_THREADS": "1",
            "GLOO_SOCKET_IFNAME": "lo",
            **settings.RankSettings(timeout_seconds=peer_timeout, finish_timeout_seconds=3 * peer_timeout).to_environ(),
        })
        self.started = time.monotonic()
        self.processes: dict[int, subprocess.Popen] = {}
        for slot in trial.slots():
            environment = contract.PodEnvironment(
                role=slot.role, rank=slot.rank, world_size=trial.world_size, master_addr="127.0.0.1",
                master_port=port, trial_file=str(trial_file), output_dir=str(self.output_dir),
                local_rank=slot.local_rank, local_world_size=slot.local_world_size, group_rank=slot.group_rank,
            ).to_environ()
            with open(self.logs_dir / f"rank-{slot.rank}.out", "wb") as out, \
                    open(self.logs_dir / f"rank-{slot.rank}.err", "wb") as err:
                self.processes[slot.rank] = subprocess.Popen(
                    [sys.executable, "-m", "ringleader.runtime"], cwd=REPOSITORY, stdout=out, stderr=err,
                    env={**base, **environment, **(extra_env or {})}, start_new_session=True,
                )

    def iterations_written(self, rank: int) -> int:
        """Lines in the rank's iterations.jsonl so far: its progress."""
        path = records.rank_dir(self.output_dir, self.trial.name, rank) / records.ITERATIONS_FILE
        try:
            return path.read_bytes().count(b"\n")
        except FileNotFoundError:
            return 0

    def wait_until(self, condition: Callable[[], bool], timeout: float, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} not met within {timeout:.0f}s")
            if all(p.poll() is not None for p in self.processes.values()):
                raise RuntimeError(f"every rank exited before {what}")
            time.sleep(0.05)

    def kill(self, rank: int, sig: int = signal.SIGKILL) -> None:
        _signal_group(self.processes[rank], sig)

    def wait(self, timeout: float) -> TrialRun:
        """Wait for every rank, at most `timeout` seconds in all; on timeout kill them all."""
        deadline = time.monotonic() + timeout
        timed_out = False
        for process in self.processes.values():
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                break
        if timed_out:
            self.stop()
        return TrialRun(self.trial, {rank: p.returncode for rank, p in self.processes.items()}, self.output_dir,
                        self.logs_dir, time.monotonic() - self.started, timed_out)

    def leftovers(self) -> list[int]:
        """Process groups of this trial with a process still alive (children included)."""
        alive = []
        for process in self.processes.values():
            try:
                os.killpg(process.pid, 0)
                alive.append(process.pid)
            except (ProcessLookupError, PermissionError):
                pass
        return alive

    def stop(self) -> None:
        """Kill every rank and its children, and reap them."""
        for process in self.processes.values():
            _signal_group(process, signal.SIGKILL)
        for process in self.processes.values():
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(process.pid, sig)  # the rank leads its own session: its children go too
    except (ProcessLookupError, PermissionError):
        pass


class Starter:
    """Starts trials and remembers them, so that teardown kills every rank it started."""

    def __init__(self, tmp_path_factory):
        self.tmp_path_factory = tmp_path_factory
        self.started: list[RunningTrial] = []

    def start(self, trial: trial_.Trial, directory: pathlib.Path | None = None, extra_env: dict[str, str] | None = None,
              peer_timeout: float = DEFAULT_PEER_TIMEOUT_SECONDS) -> RunningTrial:
        directory = pathlib.Path(directory or self.tmp_path_factory.mktemp(trial.name))
        running = RunningTrial(trial, directory, extra_env, peer_timeout)
        self.started.append(running)
        return running

    def run(self, trial: trial_.Trial, directory: pathlib.Path | None = None, timeout: float = 60.0,
            extra_env: dict[str, str] | None = None, peer_timeout: float = DEFAULT_PEER_TIMEOUT_SECONDS) -> TrialRun:
        return self.start(trial, directory, extra_env, peer_timeout).wait(timeout)

    def stop_all(self) -> None:
        for running in self.started:
            running.stop()


@pytest.fixture(scope="session")
def make_trial() -> Callable[..., trial_.Trial]:
    """`make_trial(spec_overrides: dict = None, name="test-0") -> Trial`: a tiny ring trial unless overridden."""
    return small_trial


@pytest.fixture
def start_trial(tmp_path_factory):
    """`start_trial(trial, directory=None, extra_env=None, peer_timeout=20) -> RunningTrial`; killed at teardown."""
    starter = Starter(tmp_path_factory)
    yield starter.start
    starter.stop_all()


@pytest.fixture
def run_trial(tmp_path_factory):
    """`run_trial(trial, directory=None, timeout=60, extra_env=None, peer_timeout=20) -> TrialRun`: start and wait."""
    starter = Starter(tmp_path_factory)
    yield starter.run
    starter.stop_all()


@pytest.fixture(scope="module")
def module_run_trial(tmp_path_factory):
    """`run_trial` for module-scoped fixtures: one run shared by several tests of a module."""
    starter = Starter(tmp_path_factory)
    yield starter.run
    starter.stop_all()
