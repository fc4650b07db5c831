"""Shared plumbing of the benchmarks in bench/: start real ranks on loopback, bounded waits, statistics, results.

Imported by bench/bench_*.py (run as scripts: bench/ is then on sys.path). Ranks of a ringleader trial
are started exactly as the local launcher and the pods start them: `python -m ringleader.runtime` with
the pod environment contract (contract/environment.py), one process per rank, each in its own session so
that a timeout kills it and its children. Only processes started here are ever signalled.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import platform
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Sequence

REPOSITORY = pathlib.Path(__file__).resolve().parents[1]
SOURCE_ROOT = REPOSITORY / "operator"
RESULTS_DIR = REPOSITORY / "bench" / "results"
# The benchmarks run from a plain checkout: `python bench/bench_x.py` finds the package without PYTHONPATH.
if str(SOURCE_ROOT) not in sys.path:
    sys.path.insert(0, str(SOURCE_ROOT))

from ringleader.api import spec as spec_  # noqa: E402
from ringleader.api import trial as trial_  # noqa: E402
from ringleader.contract import environment as contract  # noqa: E402
from ringleader.contract import keys  # noqa: E402
from ringleader.contract import records  # noqa: E402
from ringleader.runtime import settings  # noqa: E402

LOOPBACK = "127.0.0.1"
PEER_TIMEOUT_SECONDS = 60.0
"""Longest a rank waits for a peer: long enough for a loaded 2-core machine, short enough to fail a hung run."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the kernel's pick; rank 0 binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


def make_trial(spec: dict[str, Any], name: str) -> trial_.Trial:
    """A trial of `spec` (camelCase, as in an experiment file; no sweep)."""
    resolved = spec_.ExperimentSpec.model_validate(spec)
    return trial_.Trial(experiment=name.rsplit("-", 1)[0], name=name, index=0, spec=resolved)


def base_environ() -> dict[str, str]:
    """The environment every rank gets: an importable ringleader, one OpenMP thread, gloo on loopback,
    no MLflow (the records on disk are what the benchmarks read)."""
    environ = {k: v for k, v in os.environ.items() if k not in (contract.RUN_ID, contract.TRACKING_URI)}
    environ.update({
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")])),
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "1",
        "GLOO_SOCKET_IFNAME": "lo",
    })
    return environ


@dataclasses.dataclass
class Processes:
    """Rank processes started together; `wait` bounds them all by one deadline and kills what is left."""

    popens: dict[int, subprocess.Popen]
    logs_dir: pathlib.Path
    started: float

    def wait(self, timeout: float) -> tuple[bool, float]:
        """(every rank exited 0 in time, seconds taken)."""
        deadline = time.monotonic() + timeout
        timed_out = False
        for popen in self.popens.values():
            try:
                popen.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                break
        if timed_out:
            self.kill()
        ok = not timed_out and all(p.returncode == 0 for p in self.popens.values())
        return ok, time.monotonic() - self.started

    def kill(self) -> None:
        for popen in self.popens.values():
            try:
                os.killpg(popen.pid, signal.SIGKILL)  # each rank leads its own session (start_new_session)
            except (ProcessLookupError, PermissionError):
                pass
        for popen in self.popens.values():
            try:
                popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def explain(self) -> str:
        parts = [f"returncodes={ {r: p.returncode for r, p in self.popens.items()} }"]
        for rank in self.popens:
            for stream in ("out", "err"):
                text = (self.logs_dir / f"rank-{rank}.{stream}").read_text(errors="replace")[-1500:]
                parts.append(f"--- rank {rank} std{stream} (tail)\n{text}")
        return "\n".join(parts)


def start(argv: Sequence[str], environs: dict[int, dict[str, str]], logs_dir: pathlib.Path) -> Processes:
    """One process per rank running `argv`, rank r with `environs[r]`, logs in `logs_dir/rank-<r>.{out,err}`."""
    logs_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    popens = {}
    for rank, environ in environs.items():
        with open(logs_dir / f"rank-{rank}.out", "wb") as out, open(logs_dir / f"rank-{rank}.err", "wb") as err:
            popens[rank] = subprocess.Popen(list(argv), cwd=REPOSITORY, env=environ, stdin=subprocess.DEVNULL,
                                            stdout=out, stderr=err, start_new_session=True)
    return Processes(popens, logs_dir, started)


@dataclasses.dataclass
class TrialResult:
    trial: trial_.Trial
    output_dir: pathlib.Path
    seconds: float

    def summary(self) -> dict:
        return json.loads((records.trial_dir(self.output_dir, self.trial.name) / records.SUMMARY_FILE).read_text())

    def iterations(self, rank: int) -> list[dict]:
        return records.read_iterations(records.rank_dir(self.output_dir, self.trial.name, rank)
                                       / records.ITERATIONS_FILE)

    def prediction(self):
        """The product's own prediction of this trial (what `ringleader predict -o json` gives): models/prediction.py
        on the lowest worker rank's layers.json, every worker's records and the link the trial probed at its start."""
        from ringleader.models import prediction  # the models: imported only when a prediction is asked for

        workers = [slot.rank for slot in self.trial.worker_slots()]
        layers = json.loads((records.rank_dir(self.output_dir, self.trial.name, workers[0])
                             / records.LAYERS_FILE).read_text())
        return prediction.predict_trial(self.trial, {rank: self.iterations(rank) for rank in workers}, layers,
                                        workers[0], self.summary().get(keys.LINK_PROBE))


def run_trial(trial: trial_.Trial, directory: pathlib.Path, timeout: float,
              extra_env: dict[str, str] | None = None, command: list[str] | None = None) -> TrialResult:
    """Run every rank of `trial` with the pod contract on loopback; raise with the ranks' output if one fails.

    `command` is what each rank runs: ringleader's runtime by default, or a baseline script reading the same
    contract (bench/ddp_worker.py, bench/alternating_worker.py)."""
    directory.mkdir(parents=True, exist_ok=True)
    trial_file = directory / "trial.json"
    trial_file.write_text(trial.model_dump_json(by_alias=True))
    output_dir = directory / "output"
    port = free_port()
    base = {**base_environ(), **settings.RankSettings(timeout_seconds=PEER_TIMEOUT_SECONDS).to_environ(),
            **(extra_env or {})}
    environs = {}
    for slot in trial.slots():
        environs[slot.rank] = {**base, **contract.PodEnvironment(
            role=slot.role, rank=slot.rank, world_size=trial.world_size, master_addr=LOOPBACK, master_port=port,
            trial_file=str(trial_file), output_dir=str(output_dir)).to_environ()}
    processes = start(command or [sys.executable, "-m", "ringleader.runtime"], environs, directory / "logs")
    ok, seconds = processes.wait(timeout)
    if not ok:
        raise RuntimeError(f"trial {trial.name} failed after {seconds:.0f}s\n{processes.explain()}")
    return TrialResult(trial, output_dir, seconds)


def cli_environ() -> dict[str, str]:
    """This environment with an importable ringleader: what the `ringleader` commands a benchmark runs get."""
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")]))
    return environment


def run_experiment(document: dict[str, Any], directory: pathlib.Path, trial_timeout: float,
                   trials: int) -> pathlib.Path:
    """`ringleader run` of an experiment `document` (a whole experiment file) into `directory`, each of its `trials`
    bounded by `trial_timeout` seconds, MLflow in the directory's own sqlite store; the run directory.
    RuntimeError with the command's output when it fails."""
    from ringleader.tracking import reading  # MLflow: imported only when a run is read

    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "experiment.json"  # JSON is YAML: `ringleader run` reads it
    path.write_text(json.dumps(document))
    runs = directory / "runs"
    command = [sys.executable, "-m", "ringleader.cli", "run", str(path), "--output-dir", str(runs),
               "--tracking-uri", f"sqlite:///{directory}/mlflow.db", "--timeout-seconds", str(trial_timeout)]
    done = subprocess.run(command, env=cli_environ(), cwd=directory, capture_output=True, text=True,
                          timeout=trial_timeout * trials + 120)
    if done.returncode != 0:
        raise RuntimeError(f"ringleader run failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return reading.session_directory(runs)[0]


BURNER = ("import sys, time\ndeadline = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() "
          "< deadline:\n    pass\n")
"""One CPU burner: spins until its deadline (bounded even if the benchmark dies before it is killed)."""
LOAD_SAMPLE_SECONDS = 1.0
"""How often Load reads the run queue: often enough for a mean over a 30-second trial, rarely enough to cost nothing."""


class Load:
    """`burners` processes spinning on the CPU while the block runs, so that "under load" is a setting, not luck; and
    the load measured meanwhile: the run queue (runnable tasks, /proc/loadavg's 4th field, less this sampler) every
    LOAD_SAMPLE_SECONDS, and the 1-minute load average at the end.

    The burners run at the benchmark's own niceness, as the ranks do: the load the issue means is neighbours competing
    as equals. Niced below the ranks they would take only the cores the ranks leave idle (CFS gives nice 19 about
    1.5 % of a nice-0 task's share), which loads the load average but not the ranks.
    Each burner is its own session and stops at its deadline (`seconds`), or when the block ends, whichever comes
    first."""

    def __init__(self, burners: int, seconds: float):
        self.burners, self.seconds = burners, seconds
        self.popens: list[subprocess.Popen] = []
        self.samples: list[int] = []
        self.loadavg1: float | None = None
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True, name="bench-load-sampler")

    def __enter__(self) -> Load:
        self.popens = [subprocess.Popen([sys.executable, "-c", BURNER, str(self.seconds)], stdin=subprocess.DEVNULL,
                                        start_new_session=True) for _ in range(self.burners)]
        self._sampler.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._sampler.join()
        for popen in self.popens:
            try:
                os.killpg(popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            popen.wait(timeout=10)
        self.loadavg1 = os.getloadavg()[0]

    def _sample(self) -> None:
        while not self._stop.wait(LOAD_SAMPLE_SECONDS):
            running = pathlib.Path("/proc/loadavg").read_text().split()[3].split("/")[0]
            self.samples.append(int(running) - 1)  # less this thread, which is running as it reads

    def run_queue(self, since: int = 0) -> float | None:
        """The run queue's mean over the samples from index `since` (len(samples) when a trial started) on."""
        taken = self.samples[since:]
        return statistics.fmean(taken) if taken else None

    def document(self) -> dict[str, Any]:
        """What the measurement ran under: burners, the run queue's mean, min and max, the 1-minute load average at
        the end (it lags: after a minute it weighs the run's own load about 63 %)."""
        return {"burners": self.burners, "runQueueMean": self.run_queue(),
                "runQueueMin": min(self.samples, default=None), "runQueueMax": max(self.samples, default=None),
                "loadavg1End": self.loadavg1}

    def said(self) -> str:
        d = self.document()
        queue = f"{d['runQueueMean']:.1f} ({d['runQueueMin']}-{d['runQueueMax']})" if self.samples else "-"
        end = f"{d['loadavg1End']:.1f}" if d["loadavg1End"] is not None else "-"
        return f"{self.burners} burners; run queue mean {queue}; 1-minute load average at the end {end}"


def add_load_argument(parser) -> None:
    """--burners K: Load's burners for the whole measurement (0: the machine's load as it is)."""
    parser.add_argument("--burners", type=int, default=0,
                        help="CPU burner processes running through the measurement, niced as the ranks "
                             "(harness.Load; default 0: whatever else the machine runs)")


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, min and max (and the count): what every ratio in docs/performance.md is reported with; None if empty."""
    if not values:
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def machine() -> dict[str, Any]:
    """What the numbers were measured on, and how loaded it was (1-minute load average). `boot` tells one machine
    from another of the same kind (a machine here is new each boot): bands are held out by it."""
    import torch  # the benchmarks need it anyway; imported late so --help stays fast

    return {"cpus": os.cpu_count(), "loadavg1": os.getloadavg()[0], "python": platform.python_version(),
            "torch": torch.__version__, "platform": platform.platform(),
            "boot": pathlib.Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
            "day": time.strftime("%Y-%m-%d", time.gmtime())}


def write_result(name: str, document: dict[str, Any]) -> pathlib.Path:
    """bench/results/<name>.json (ignored by git: results belong to the machine they were measured on)."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(document, indent=1, default=float))
    return path
