"""A rank's durable records on local disk (interfaces.Recorder): what tracking/ publishes and launch/ watches.

Layout, under `<RINGLEADER_OUTPUT_DIR>/<trial name>/`:

    summary.json                 the trial summary (models.summary.summarize), written by the lowest
                                 worker rank at the end; its camelCase keys include api.status.Summary's
    series.jsonl                 the trial's series (models.summary.trial_series), written by the same rank
                                 just before: per step, what the workers did together, in the keys below
                                 and "throughput", "time/compute":
                                   {"step": 12, "timestamp": 1763700000.27,
                                    "time/iteration": 0.008, "time/compute": 0.0063, "time/comm": 0.001,
                                    "time/wait": 0.0, "throughput": 4000.0, "loss": 2.1}
                                 (warm-up steps: the loss and evaluation only)
    rank-<rank>/iterations.jsonl one JSON object per line, per worker iteration or server aggregation:
                                   {"step": 12, "role": "worker", "warmup": false, "timestamp": 1763700000.25,
                                    "time/data": 0.0001, "time/forward": 0.002, "time/backward": 0.004,
                                    "time/comm": 0.001, "time/wait": 0.0, "time/update": 0.0003,
                                    "time/iteration": 0.008, "bytes/sent": 236000.0,
                                    "bytes/received": 236000.0, "loss": 2.1, "staleness": 0.0}
                                 after warm-up, where the network interface can be read (Linux), also
                                   "link/tx_bytes_per_second", "link/rx_bytes_per_second" and, when a link
                                   rate is known, "link/utilization" (runtime/netcounters.py);
                                 a worker's also "cpu/comm" (its process's CPU seconds inside the synchronizer)
                                   and, where its cgroup's cpu.stat can be read, "cpu/throttled" (runtime/usage.py);
                                 keys are interfaces.* metric names (seconds, bytes, iterations);
                                 "step" counts from 0; "timestamp" is when the record was written
                                 (seconds since the Unix epoch); "warmup" marks steps < warmupIterations (a server
                                 may set it itself); non-finite values are written as null. A writer thread
                                 encodes and writes each line off the training thread (a write that fails,
                                 a full disk, fails the rank at its next record); readers skip a torn
                                 last line (`read_iterations`). After an abrupt death the last lines may be
                                 missing: `restore()` (the launcher and `ringleader publish` call it once a
                                 rank has ended) appends them from the journal below.
    rank-<rank>/iterations.journal the same records, durable the moment log_iteration() returns: packed
                                 binary (`journal.py`) into a memory-mapped file, whose pages belong to the
                                 kernel's page cache and so outlive the process (SIGKILL, os._exit, the OOM
                                 killer). Removed by a clean close(), when the JSONL file is whole.
    rank-<rank>/summary.json     this rank's summary (models.summary.rank_summary): means after warm-up
    rank-<rank>/trace.json       Chrome trace (chrome://tracing, Perfetto) of a window of iterations
                                 after warm-up: "X" events, ts/dur in microseconds of wall-clock time,
                                 pid = rank, one tid per track (iterations, main-thread phases, communication);
                                 "C" counter events "<interface> bytes/s" (args tx, rx) once per iteration
    rank-<rank>/layers.json      per-parameter gradient-ready times of the same window, and its sized
                                 collectives (bytes, start, end: the ring's buckets) (timing.layers())
    rank-<rank>/profile.json     spec.profiling only: PyTorch's profiler trace of its window (Chrome trace JSON,
                                 as torch.profiler exports it; runtime/profiling.py)

The line count of iterations.jsonl is the rank's progress.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import queue
import threading
import time
from typing import Any, Callable, Mapping

from ringleader.api import constants
from ringleader.contract import journal, keys

ITERATIONS_FILE = "iterations.jsonl"
SUMMARY_FILE = "summary.json"
SERIES_FILE = "series.jsonl"
TRACE_FILE = "trace.json"
LAYERS_FILE = "layers.json"
PROFILE_FILE = "profile.json"
JOURNAL_FILE = "iterations.journal"
_CLOSE: dict = {}  # tells the writer thread to finish


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
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(document, indent=1, default=float))
    os.replace(temporary, path)


def write_lines(path: pathlib.Path, records: list[dict]) -> None:
    """Write `records` as a .jsonl file at once and atomically, as write_json does."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text("".join(json.dumps(_sanitized(record)) + "\n" for record in records))
    os.replace(temporary, path)


# Besides its metrics, a record carries keys.STEP, keys.ROLE, keys.WARMUP and keys.TIMESTAMP.
TEXT_FIELDS = frozenset({keys.ROLE})
FLAG_FIELDS = frozenset({keys.WARMUP})
"""Every other field of a record is a number or null (a non-finite value written as null)."""


def is_worker_record(record: Mapping[str, Any]) -> bool:
    """Whether a worker wrote the record. The runtime names the role in every record; one without a role (a
    hand-made fixture, a foreign file) is taken as a worker's, the only role that records iterations."""
    return record.get(keys.ROLE, constants.ROLE_WORKER) == constants.ROLE_WORKER


def read_lines(path: str | os.PathLike, offset: int = 0, limit_bytes: int = 8 << 20,
               problems: list[tuple[int, str]] | None = None) -> tuple[list[tuple[dict, int]], int]:
    """Complete JSON lines of a .jsonl file from `offset`: [(record, end offset)], and the offset reached.

    A last line without its newline is being written: it is left for the next read. A line that is no
    record (a torn write before a crash, a blank line, JSON that is not an object) is skipped, so it cannot
    block the lines after it; a value of the wrong type is dropped and the rest of its record kept, so no
    reader meets a string where a number belongs. `problems` gets (the line's offset, what was done) for each."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            chunk = handle.read(limit_bytes)
    except FileNotFoundError:
        return [], offset
    end = chunk.rfind(b"\n")
    if end < 0:
        return [], offset
    records = []
    position = offset
    for line in chunk[: end + 1].splitlines(keepends=True):
        start, position = position, position + len(line)
        try:
            record = json.loads(line)
        except ValueError:  # not JSON, or not UTF-8
            found = ["blank: skipped" if not line.strip() else "not JSON: skipped"]
        else:
            if isinstance(record, dict):
                found = [f"{json.dumps(key)[:60]} is {type(record.pop(key)).__name__}, not "
                         f"{_expected_type(key)}: that value dropped" for key in _wrong_fields(record)]
                records.append((record, position))
            else:
                found = [f"JSON but not an object ({type(record).__name__}): skipped"]
        if problems is not None:
            problems += [(start, problem) for problem in found]
    return records, position


def _expected_type(key: str) -> str:
    return "text" if key in TEXT_FIELDS else "true/false" if key in FLAG_FIELDS else "a number"


def _wrong_fields(record: dict) -> list[str]:
    def fits(key: str, value: Any) -> bool:
        if value is None:
            return True
        if key in TEXT_FIELDS:
            return isinstance(value, str)
        if key in FLAG_FIELDS:
            return isinstance(value, bool)
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return [key for key, value in record.items() if not fits(key, value)]


def read_iterations(path: str | os.PathLike) -> list[dict]:
    """Every complete record of an iterations.jsonl file."""
    records: list[dict] = []
    offset = 0
    while True:
        batch, reached = read_lines(path, offset)
        if reached == offset:
            return records
        records += [record for record, _ in batch]
        offset = reached


def restore(rank_directory: str | os.PathLike) -> int:
    """Complete a dead rank's iterations.jsonl from its journal; the number of records appended.

    Only for a rank that has ended: the launcher calls it when a trial ends, `publish` before reading.
    Idempotent: the journal and the JSONL file hold the same records in the same order, so the lines
    the JSONL file lacks are the journal's last ones."""
    directory = pathlib.Path(rank_directory)
    path, journal_path = directory / ITERATIONS_FILE, directory / JOURNAL_FILE
    if not journal_path.exists():
        return 0
    durable = journal.read(journal_path)
    text = path.read_bytes() if path.exists() else b""
    whole = text[: text.rfind(b"\n") + 1]  # a torn last line is dropped and written again whole
    missing = durable[whole.count(b"\n"):]
    if missing or len(whole) != len(text):
        with open(path, "r+b" if path.exists() else "wb") as file:
            file.truncate(len(whole))
            file.seek(len(whole))
            file.write("".join(json.dumps(_sanitized(r)) + "\n" for r in missing).encode())
    return len(missing)


def _all_finite(metrics: dict) -> bool:
    try:
        return all(map(math.isfinite, metrics.values()))
    except TypeError:  # a value that is not a number
        return False


def _sanitized(record: dict) -> dict:
    return {name: _finite(value) for name, value in record.items()}


class RankRecorder:
    """Writes one rank's records; also keeps them in memory for the end-of-run gather."""

    def __init__(self, output_dir: str | os.PathLike, trial_name: str, rank: int, role: str = constants.ROLE_WORKER,
                 warmup_iterations: int = 0):
        self.rank, self.role, self.warmup_iterations = rank, role, warmup_iterations
        self.directory = rank_dir(output_dir, trial_name, rank)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.iterations: list[dict] = []
        self.summary_extras: dict = {}  # added to this rank's summary.json by main.py (parameterDigest)
        self.on_first_measured: Callable[[], None] | None = None
        """Called once, on the logging thread, as the first record after warm-up is logged (runtime/usage.py)."""
        self._journal = journal.Writer(self.directory / JOURNAL_FILE, constants={keys.ROLE: role})
        self._file = open(self.directory / ITERATIONS_FILE, "w", encoding="utf-8")
        self._pending: queue.SimpleQueue[dict] = queue.SimpleQueue()
        self._written = 0  # lines the writer thread has written and flushed
        self._write_error: OSError | None = None
        self._writer = threading.Thread(target=self._write_until_closed, name=f"records-rank-{rank}", daemon=True)
        self._writer.start()

    def log_iteration(self, step: int, metrics: dict[str, float]) -> None:
        # The hot path: a few microseconds. Durable at once through the memory-mapped journal; the JSON
        # encoding and the write(2) of the readable line (~80 us with caches cold after the model's kernels,
        # bench/bench_overhead.py) happen on the writer thread while torch kernels hold no GIL.
        if self._write_error is not None:  # a full disk: fail the rank now, not after silently keeping nothing
            raise self._write_error
        warmup = bool(metrics.get(keys.WARMUP, step < self.warmup_iterations))
        if not warmup and self.on_first_measured is not None:
            called, self.on_first_measured = self.on_first_measured, None
            called()
        timestamp = time.time()
        self._journal.append(step, timestamp, warmup, metrics)
        record = {keys.STEP: step, keys.ROLE: self.role, **metrics, keys.WARMUP: warmup, keys.TIMESTAMP: timestamp}
        if not _all_finite(metrics):
            record = _sanitized(record)
        self.iterations.append(record)
        self._pending.put(record)

    def _write_until_closed(self) -> None:
        while True:
            records = [self._pending.get()]
            while not self._pending.empty():
                records.append(self._pending.get_nowait())
            closing = records[-1] is _CLOSE
            lines = [json.dumps(record) + "\n" for record in (records[:-1] if closing else records)]
            try:
                self._file.write("".join(lines))
                self._file.flush()
                self._written += len(lines)
            except OSError as error:
                # The journal holds these records; restore() writes them once there is room again.
                self._write_error = error
                return
            if closing:
                return

    def log_summary(self, metrics: dict[str, Any]) -> None:
        write_json(self.directory / SUMMARY_FILE, {key: _finite(value) for key, value in metrics.items()})

    def write_trace(self, trace: dict) -> None:
        write_json(self.directory / TRACE_FILE, trace)

    def write_layers(self, layers: dict) -> None:
        write_json(self.directory / LAYERS_FILE, layers)

    def drain(self, timeout_seconds: float) -> bool:
        """Wait, at most `timeout_seconds`, until the lines logged so far are written: for another thread that is
        about to publish them while this rank may go on logging. False if they were not."""
        logged, deadline = len(self.iterations), time.monotonic() + timeout_seconds
        while self._written < logged and self._writer.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        return self._written >= logged

    def close(self) -> None:
        """Write every pending line; the JSONL file is then whole and the journal goes."""
        if self._writer.is_alive():
            self._pending.put(_CLOSE)
            self._writer.join()
        if self._write_error is None and not self._file.closed:
            self._file.close()
            self._journal.close(remove=True)
