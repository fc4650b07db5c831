"""Launcher settings in one object: where records go, how often to look, how long to wait; built once by
launch/cli.py."""

from __future__ import annotations

import dataclasses
import os

from ringleader.contract import failures


@dataclasses.dataclass(frozen=True)
class LaunchSettings:
    output_dir: str = "ringleader-runs"
    """output_dir holds one session directory per `ringleader run` (records, logs, publish cursors);
    ignored by git in this repository."""
    passed_variables: tuple[str, ...] = ()
    """passed_variables are the names of the launcher's environment variables its ranks get besides the
    allow-list of allowlist.py (`ringleader run --env NAME`); the rest of the shell stays out of the ranks."""
    data_dir: str = "."
    """data_dir is where a relative spec.data.path is read from (`ringleader run --data-dir`), made absolute at
    start; the local stand-in for the data volume a cluster's pods mount at /data. Default: the current directory."""
    gpus: tuple[str, ...] = ()
    """gpus are the GPUs the ranks may use, as CUDA_VISIBLE_DEVICES names them (devices.visible): handed out
    per rank by devices.assign, so no two NCCL ranks share one."""
    poll_seconds: float = 0.05
    """poll_seconds between checks of the ranks: a crash is noticed within this, before the peers that lose
    contact with the crashed rank exit too, so the first failure is reported, not its echoes."""
    blame_grace_seconds: float = failures.DEFAULT_GRACE_SECONDS
    """blame_grace_seconds the launcher waits, after a rank failed only because it lost a peer, for the
    rank that caused it to end too, so the cause is named rather than its echo (contract/failures.py)."""
    grace_seconds: float = 5.0
    """grace_seconds between SIGTERM and SIGKILL when ranks are stopped: time to flush a record line."""
    progress_seconds: float = 10.0
    """progress_seconds between progress lines when the output is not a terminal (a log file, CI)."""
    redraw_seconds: float = 0.5
    """redraw_seconds between redraws of the progress line on a terminal."""
    stderr_tail_lines: int = 5
    """stderr_tail_lines of a failed rank's stderr quoted in the failure message."""
    cores: int = dataclasses.field(default_factory=lambda: len(os.sched_getaffinity(0))
                                   if hasattr(os, "sched_getaffinity")
                                   else os.cpu_count() or 1)  # macOS has no affinity
    """cores available to the ranks: trials run in parallel (sweep.maxParallel) only while their ranks
    fit, so parallel trials do not skew each other's timings by oversubscribing the CPU."""
