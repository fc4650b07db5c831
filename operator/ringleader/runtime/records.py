"""A rank's durable records on local disk (interfaces.Recorder): what tracking/ publishes and launch/ watches.

Layout, under `<RINGLEADER_OUTPUT_DIR>/<trial name>/`:

    summary.json                 the trial summary (analysis.summary.summarize), written by the lowest
                                 worker rank at the end; its camelCase keys include api.status.Summary's
    rank-<rank>/iterations.jsonl one JSON object per line, per worker iteration or server aggregation:
                                   {"step": 12, "role": "worker", "warmup": false, "timestamp": 1763700000.25,
                                    "time/data": 0.0001, "time/forward": 0.002, "time/backward": 0.004,
                                    "time/comm": 0.001, "time/wait": 0.0, "time/update": 0.0003,
                                    "time/iteration": 0.008, "bytes/sent": 236000.0,
                                    "bytes/received": 236000.0, "loss": 2.1, "staleness": 0.0}
                                 keys are interfaces.* metric names (seconds, bytes, iterations);
                                 "step" counts from 0; "timestamp" is when the record was written
                                 (seconds since the Unix epoch); "warmup" marks steps < warmupIterations (a server
                                 may set it itself); non-finite values are written as null. Each record is one
                                 unbuffered write(2) to a file opened O_APPEND, made before log_iteration()
                                 returns: once in the kernel's page cache it outlives the process, so SIGKILL,
                                 os._exit and the OOM killer lose nothing a rank recorded. Readers still skip a
                                 torn last line (`read_iterations`), which only a crash of the machine leaves.
    rank-<rank>/summary.json     this rank's summary (analysis.summary.rank_summary): means after warm-up
    rank-<rank>/trace.json       Chrome trace (chrome://tracing, Perfetto) of a window of iterations
                                 after warm-up: "X" events, ts/dur in microseconds of wall-clock time,
                                 pid = rank, one tid per track (iterations, main-thread phases, communication)
    rank-<rank>/layers.json      per-parameter gradient-ready times of the same window (timing.layers())

The line count of iterations.jsonl is the rank's progress.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import time
from typing import Any

from ringleader.api import constants

ITERATIONS_FILE = "iterations.jsonl"
SUMMARY_FILE = "summary.json"
TRACE_FILE = "trace.json"
LAYERS_FILE = "layers.json"


def trial_dir(output_dir: str | os.PathLike, trial_name: str) -> pathlib.Path:
    return pathlib.Path(output_dir) / trial_name


def rank_dir(output_dir: str | os.PathLike, trial_name: str, rank: int) -> pathlib.Path:
    return trial_dir(output_dir, trial_name) / f"rank-{rank}"


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(path: pathlib.Path, document: Any) -> None:
    """Write atomically (a temporary file renamed over the target), so readers never see half a file."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(document, indent=1, default=float))
    os.replace(temporary, path)


def read_iterations(path: str | os.PathLike) -> list[dict]:
    """The records of an iterations.jsonl file, skipping a torn last line left by a crash."""
    records = []
    try:
        text = pathlib.Path(path).read_text()
    except FileNotFoundError:
        return records
    for line in text.splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


class RankRecorder:
    """Writes one rank's records; also keeps them in memory for the end-of-run gather."""

    def __init__(self, output_dir: str | os.PathLike, trial_name: str, rank: int, role: str = constants.ROLE_WORKER,
                 warmup_iterations: int = 0):
        self.rank, self.role, self.warmup_iterations = rank, role, warmup_iterations
        self.directory = rank_dir(output_dir, trial_name, rank)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.iterations: list[dict] = []
        self.summary_extras: dict = {}  # added to this rank's summary.json by main.py (parameterDigest)
        # No Python buffer between a record and the kernel: what log_iteration() wrote survives any death of the process.
        self._fd: int | None = os.open(self.directory / ITERATIONS_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC
                                       | os.O_APPEND | getattr(os, "O_CLOEXEC", 0), 0o644)

    def log_iteration(self, step: int, metrics: dict[str, float]) -> None:
        # The hot path: one compact json.dumps and one write(2), ~15 us (bench/bench_overhead.py).
        warmup = metrics.get("warmup", step < self.warmup_iterations)
        record = {"step": step, "role": self.role, **metrics, "warmup": bool(warmup), "timestamp": time.time()}
        line = json.dumps(record, separators=(",", ":"))
        if "NaN" in line or "Infinity" in line:  # rare: JSON has no non-finite numbers, readers get null
            record = {name: _finite(value) for name, value in record.items()}
            line = json.dumps(record, separators=(",", ":"))
        self.iterations.append(record)
        if self._fd is not None:
            os.write(self._fd, (line + "\n").encode())

    def log_summary(self, metrics: dict[str, Any]) -> None:
        write_json(self.directory / SUMMARY_FILE, {key: _finite(value) for key, value in metrics.items()})

    def write_trace(self, trace: dict) -> None:
        write_json(self.directory / TRACE_FILE, trace)

    def write_layers(self, layers: dict) -> None:
        write_json(self.directory / LAYERS_FILE, layers)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
