"""One trial as local processes: its files, its ranks with the pod contract, its end (success, a failed rank, a
deadline).

Used by sweep.py, which polls several of these. A trial fails at its first failed rank; the others
are stopped and marked KILLED, and the outcome says which rank failed and why.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import socket
import time
from typing import Collection, Mapping

import yaml

import ringleader
from ringleader import topology
from ringleader.models import eta
from ringleader.api import constants
from ringleader.api.trial import Slot, Trial
from ringleader.contract import environment as contract
from ringleader.contract import failures, layout, outcomes, records
from ringleader.launch import allowlist, devices, processes
from ringleader.launch.settings import LaunchSettings
from ringleader.tracking import schema

LOOPBACK = "127.0.0.1"
PACKAGE_ROOT = pathlib.Path(ringleader.__file__).resolve().parent.parent


def free_port() -> int:
    """A port nobody listens on now; rank 0 binds it a moment later (a rare race, as with torchrun)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def rank_environ(base: Mapping[str, str], slot: Slot, world_size: int, port: int,
                 trial_file: pathlib.Path, output_dir: pathlib.Path, passed: Collection[str] = (),
                 data_dir: pathlib.Path | None = None, gpus: str | None = None) -> dict[str, str]:
    """The allow-listed part of the user's environment (allowlist.py) with the variables named in `passed`,
    plus the pod contract, an importable ringleader and, for a rank that asks for GPUs, its pod's (devices.py).
    Every rank gets its full contract, LOCAL_RANK included: locally the launcher starts each rank itself, and
    the ranks of one "pod" share the loopback as every local rank does."""
    environ = allowlist.selected(base, passed)
    if gpus is not None:
        environ[devices.VISIBLE] = gpus
    python_path = [str(PACKAGE_ROOT)] + [p for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    environ["PYTHONPATH"] = os.pathsep.join(python_path)
    environ["PYTHONUNBUFFERED"] = "1"  # the logs show what a rank printed right before it died
    environ.update(contract.PodEnvironment(
        role=slot.role, rank=slot.rank, world_size=world_size, master_addr=LOOPBACK, master_port=port,
        trial_file=str(trial_file), output_dir=str(output_dir), data_dir=str(data_dir) if data_dir else None,
        node_name=contract.local_node_name(), local_rank=slot.local_rank, local_world_size=slot.local_world_size,
        group_rank=slot.group_rank,
    ).to_environ())
    environ[contract.LAUNCHER_PID] = str(os.getpid())
    return environ


def worker_progress(trial_dir: pathlib.Path, worker_ranks: list[int], counts: dict[int, tuple[int, int]]) -> int:
    """Iterations done by the slowest worker: lines in its iterations.jsonl, counted incrementally.

    `counts` carries (bytes read, lines) per rank between calls, so each call reads only what is new."""
    slowest = None
    for rank in worker_ranks:
        path = layout.rank_dir(trial_dir, rank) / layout.ITERATIONS_FILE
        offset, lines = counts.get(rank, (0, 0))
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
        except FileNotFoundError:
            chunk = b""
        lines += chunk.count(b"\n")
        counts[rank] = (offset + len(chunk), lines)
        slowest = lines if slowest is None else min(slowest, lines)
    return slowest or 0


def _who(process: processes.RankProcess) -> str:
    """A rank as failure messages name it locally: "rank 1 (worker-1)", "rank 3 (worker-1/1)" in a pod of several."""
    return f"rank {process.slot.rank} ({process.slot.label})"


class TrialRun:
    """A trial being run: start() its ranks, poll() until it returns the outcome, stop() on an interrupt."""

    def __init__(self, trial: Trial, session_dir: pathlib.Path, settings: LaunchSettings,
                 environ: Mapping[str, str], deadline_seconds: float | None = None):
        self.trial = trial
        self.session_dir = session_dir
        self.directory = session_dir / trial.name
        self.settings = settings
        self.environ = environ
        self.deadline_seconds = deadline_seconds
        self.processes: list[processes.RankProcess] = []
        self.started_at = 0.0
        self.outcome: layout.Outcome | None = None
        self._monotonic_start = 0.0
        self._counts: dict[int, tuple[int, int]] = {}
        self._samples: list[eta.Sample] = []
        """(monotonic seconds, iterations) each time the slowest worker's count changed, the recent ones."""
        self._failed_at: dict[int, float] = {}
        self.unsaved: OSError | None = None
        """unsaved is why the trial's end could not be written to disk (a full disk), if it could not."""

    @property
    def total_iterations(self) -> int:
        return self.trial.spec.model.iterations

    def write_files(self) -> None:
        """trial.json, the topology a cluster would run (topology.yaml, a record for MLflow) and a RUNNING
        outcome: enough for the publisher to open the trial's run."""
        self.directory.mkdir(parents=True, exist_ok=True)
        records.write_json(self.directory / layout.TRIAL_FILE, self.trial.model_dump(mode="json", by_alias=True))
        try:
            documents = topology.render(self.trial)
        except (topology.TemplateError, ValueError) as error:  # a record only: the local run does not need it
            (self.directory / layout.TOPOLOGY_FILE).with_suffix(".error").write_text(f"{error}\n")
        else:
            (self.directory / layout.TOPOLOGY_FILE).write_text(yaml.safe_dump_all(documents, sort_keys=False))
        self.started_at = time.time()
        layout.write_outcome(self.directory, layout.Outcome(schema.RUNNING, self.started_at))

    def start(self) -> None:
        if not self.started_at:
            self.write_files()
        self._monotonic_start = time.monotonic()
        port = free_port()
        slots = self.trial.slots()
        cwd = pathlib.Path.cwd()
        gpus = devices.assign(self.trial, self.settings.gpus)
        try:
            for slot in slots:
                environ = rank_environ(self.environ, slot, len(slots), port, self.directory / layout.TRIAL_FILE,
                                       self.session_dir, self.settings.passed_variables,
                                       pathlib.Path(self.settings.data_dir).resolve(), gpus.get(slot.rank))
                stdout_path, stderr_path = layout.log_paths(self.directory, slot.rank)
                self.processes.append(processes.start(slot, environ, cwd, stdout_path, stderr_path))
        except BaseException:
            processes.stop(self.processes, self.settings.grace_seconds)
            raise

    def elapsed(self) -> float:
        return time.monotonic() - self._monotonic_start

    def progress(self) -> int:
        workers = [slot.rank for slot in self.trial.worker_slots()]
        done = worker_progress(self.directory, workers, self._counts)
        if done and (not self._samples or done != self._samples[-1][1]):
            self._samples = [*eta.recent(self._samples, self.total_iterations), (time.monotonic(), done)]
        return done

    def for_eta(self) -> eta.UnfinishedTrial:
        """The trial as the ETA sees it: started, with its recent progress."""
        return dataclasses.replace(eta.planned(self.trial), started=self._monotonic_start, samples=tuple(self._samples))

    def poll(self) -> layout.Outcome | None:
        """None while running; else the outcome (also written to outcome.json), after stopping what is left."""
        if self.outcome is not None:
            return self.outcome
        failed = self._failed()
        if failed and failures.settled(failed.values(), running=sum(p.poll() is None for p in self.processes),
                                       waited_seconds=time.monotonic() - min(f.order for f in failed.values()),
                                       grace_seconds=self.settings.blame_grace_seconds):
            return self._fail(failed)
        if all(p.poll() == 0 for p in self.processes):
            silent = self._silent_worker()
            if silent is not None:  # ended as if done, but with nothing to show: os._exit(0) in user code
                return self._no_records(silent)
            return self._finish(schema.FINISHED, outcomes.WORKERS_SUCCEEDED, None)
        if self.deadline_seconds is not None and self.elapsed() > self.deadline_seconds:
            processes.stop(self.processes, self.settings.grace_seconds)
            return self._finish(schema.FAILED, outcomes.DEADLINE_EXCEEDED,
                                f"trial ran longer than its deadline of {self.deadline_seconds:g} s "
                                f"(slowest worker at iteration {self.progress()}/{self.total_iterations}); "
                                "all ranks were stopped")
        return None

    def _silent_worker(self) -> processes.RankProcess | None:
        """The first worker that recorded no iteration, once every rank has ended."""
        return next((p for p in self.processes
                     if p.slot.role == constants.ROLE_WORKER and self._recorded_nothing(p.slot.rank)), None)

    def _recorded_nothing(self, rank: int) -> bool:
        """Whether an ended rank left no record, its journal's included (restored first)."""
        directory = layout.rank_dir(self.directory, rank)
        records.restore(directory)
        first, _ = records.read_lines(directory / layout.ITERATIONS_FILE, limit_bytes=1 << 16)
        return not first

    def _no_records(self, process: processes.RankProcess) -> layout.Outcome:
        return self._finish(schema.FAILED, outcomes.EXITED_EARLY,
                            failures.exited_early(_who(process), recorded_nothing=True), failed_rank=process.slot.rank)

    def _failed(self) -> dict[int, failures.Exit]:
        """The ranks that failed so far, by rank, each stamped with when the launcher first saw it end."""
        now = time.monotonic()
        for process in self.processes:
            if process.poll() not in (None, 0):
                self._failed_at.setdefault(process.slot.rank, now)
        by_rank = {p.slot.rank: p for p in self.processes}
        return {rank: by_rank[rank].exit(seen) for rank, seen in self._failed_at.items()}

    def _fail(self, failed: dict[int, failures.Exit]) -> layout.Outcome:
        # Peers of a crashed rank fail too, moments later, or a moment before it: the verdict names the cause.
        processes.stop(self.processes, self.settings.grace_seconds)
        by_rank = {p.slot.rank: p for p in self.processes}
        # A rank that ended "successfully" with nothing recorded (os._exit(0) in user code) went away first.
        early = next((p for p in self.processes if p.poll() == 0 and not p.stopped
                      and self._recorded_nothing(p.slot.rank)), None)
        verdict = failures.verdict(
            failed.values(), early=None if early is None else failures.Early(early.slot.rank, _who(early), True),
            who=lambda rank: _who(by_rank[rank]),
            describe=lambda rank: by_rank[rank].failure_reason(self.settings.stderr_tail_lines))
        return self._finish(schema.FAILED, verdict.reason, verdict.message, failed_rank=verdict.rank)

    def stop(self, reason: str = outcomes.INTERRUPTED,
             message: str = "stopped by the user (interrupt)") -> layout.Outcome:
        """Stop every rank now and record the trial as KILLED (unless it already ended)."""
        if self.outcome is not None:
            return self.outcome
        processes.stop(self.processes, self.settings.grace_seconds)
        return self._finish(schema.KILLED, reason, message)

    def _finish(self, status: str, reason: str, message: str | None, failed_rank: int | None = None) -> layout.Outcome:
        try:
            for process in self.processes:  # every rank has ended: what a dead one recorded last comes from its journal
                records.restore(layout.rank_dir(self.directory, process.slot.rank))
        except OSError as error:  # a full disk: the journals keep the records; `ringleader publish` restores them
            self.unsaved = error
        ranks = []
        for process in self.processes:
            code = process.popen.returncode
            if process.slot.rank == failed_rank:
                rank_status = schema.FAILED
            elif code == 0:
                rank_status = schema.FINISHED
            else:  # stopped by the launcher, or failed only because the failed rank did
                rank_status = schema.KILLED
            ranks.append(layout.RankOutcome(process.slot.rank, process.slot.role, rank_status,
                                            exit_code=code if code is not None and code >= 0 else None,
                                            signal=process.signal_name()))
        self.outcome = layout.Outcome(status, self.started_at, time.time(), reason, message, ranks)
        try:
            layout.write_outcome(self.directory, self.outcome)
        except OSError as error:  # raised by the sweep once every rank is stopped, not here, halfway through
            self.unsaved = error
        return self.outcome

    @property
    def label(self) -> str:
        """The trial's MLflow run name, so the console and the UI name a trial alike."""
        return schema.trial_run_name(self.trial)
