"""Tuning knobs of a rank that are not part of the experiment spec, read once at startup by `main.py`.

They are operational settings (how long to wait for a dead peer, how big a gradient bucket is),
not what the experiment measures, so they live in environment variables with safe defaults
rather than in the CRD; their variable names are part of the rank environment (contract/environment.py).
main.py reads them once and passes them on; nothing else in runtime/ reads os.environ.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Mapping

from ringleader.contract.environment import (BUCKET_BYTES, DEFAULT_BUCKET_BYTES, DEFAULT_STALL_TIMEOUT_SECONDS,
                                             FINISH_TIMEOUT_SECONDS, STALL_TIMEOUT_SECONDS, TIMEOUT_SECONDS,
                                             TRACE_ITERATIONS)


@dataclasses.dataclass(frozen=True)
class RankSettings:
    timeout_seconds: float = 300.0
    """Longest wait for any peer (rendezvous, a collective, a message, the final gather), in seconds.
    A dead peer is usually noticed at once (its sockets close); this bounds a hung one. 300 s leaves
    room for a slow straggler finishing its last iterations while the others wait at the end."""
    stall_timeout_seconds: float = DEFAULT_STALL_TIMEOUT_SECONDS
    """Longest time, in seconds, a rank whose heartbeat stopped (SIGSTOP, frozen, dead) may go without
    recording an iteration before it is named as the one that stopped the trial (runtime/heartbeat.py):
    caught in about this long rather than after timeout_seconds, and blamed rather than its waiting peers.
    A rank that still beats is alive, perhaps in one long iteration, and is named only after five times
    this; 60 s (5 min for a live rank) leaves room for large models on a CPU."""
    finish_timeout_seconds: float = 6 * 3600.0
    """Longest wait, in seconds, of a rank that finished for the slowest rank to finish (the end-of-run
    gather of records), unless the trial's runPolicy.activeDeadlineSeconds bounds it. Long, because under
    ASP a straggler may finish far behind the others; a peer that dies meanwhile is noticed at once
    (its sockets close), and one that hangs makes its own partners time out and exit, which does too."""
    bucket_bytes: int = DEFAULT_BUCKET_BYTES
    """Ring allreduce bucket size, in bytes: 25 MiB, DDP's default, trades per-message latency for overlap."""
    trace_iterations: int = 20
    """Iterations kept in the Chrome trace and per-layer timings, from the end of warm-up: enough to see
    the steady state, small enough to open in chrome://tracing."""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> RankSettings:
        defaults = cls()

        def number(name: str, default: float, kind: type) -> float:
            text = environ.get(name)
            if not text:
                return default
            try:
                value = kind(text)
            except ValueError:
                raise ValueError(f"environment variable {name}={text!r} must be a number") from None
            if value <= 0:
                raise ValueError(f"environment variable {name}={text!r} must be greater than 0")
            return value

        return cls(
            timeout_seconds=number(TIMEOUT_SECONDS, defaults.timeout_seconds, float),
            stall_timeout_seconds=number(STALL_TIMEOUT_SECONDS, defaults.stall_timeout_seconds, float),
            finish_timeout_seconds=number(FINISH_TIMEOUT_SECONDS, defaults.finish_timeout_seconds, float),
            bucket_bytes=int(number(BUCKET_BYTES, defaults.bucket_bytes, int)),
            trace_iterations=int(number(TRACE_ITERATIONS, defaults.trace_iterations, int)),
        )

    def to_environ(self) -> dict[str, str]:
        """The variables that reproduce these settings in another process (tests, the local launcher)."""
        return {
            TIMEOUT_SECONDS: str(self.timeout_seconds),
            STALL_TIMEOUT_SECONDS: str(self.stall_timeout_seconds),
            FINISH_TIMEOUT_SECONDS: str(self.finish_timeout_seconds),
            BUCKET_BYTES: str(self.bucket_bytes),
            TRACE_ITERATIONS: str(self.trace_iterations),
        }
