"""`ringleader run` on a terminal (a real pseudo-terminal): the redrawn progress line carries each trial's ETA and,
while trials wait, the sweep's, priced by the repetitions that finished."""

from __future__ import annotations

import errno
import os
import pty
import re
import select
import subprocess
import sys
import time

import pytest

import launching

pytestmark = pytest.mark.integration

DURATION = r"\d+(s|m\d\ds|h\d\dm)"


def run_on_a_terminal(cwd, *arguments: str, timeout: float = 300) -> tuple[int, str]:
    """`ringleader run ...` with a pseudo-terminal as its output: (exit code, everything it wrote)."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "ringleader.cli", "run", *arguments], cwd=cwd,
                               env=launching.launcher_environ(), stdout=terminal, stderr=terminal,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    os.close(terminal)
    output, deadline = bytearray(), time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([controller], [], [], 1.0)[0]:
                try:
                    chunk = os.read(controller, 65536)
                except OSError as error:  # EIO: every writer closed the terminal
                    if error.errno != errno.EIO:
                        raise
                    break
                if not chunk:
                    break
                output += chunk
        else:
            process.kill()
            pytest.fail(f"ringleader run did not end within {timeout} s:\n{output.decode(errors='replace')}")
        return process.wait(timeout=60), output.decode(errors="replace")
    finally:
        os.close(controller)


def test_the_progress_line_shows_the_trials_eta_and_the_sweeps_once_a_repetition_measured_it(workdir):
    # Three repetitions of one combination, each forward pass at least 30 ms: 2 s of iterations per trial.
    path = launching.experiment_file(workdir, "eta", {
        "architecture": "RingAllReduce", "model": {"name": "paced_models:factory", "iterations": 60},
        "sweep": {"repetitions": 3}})

    code, output = run_on_a_terminal(workdir, str(path))

    assert code == 0, output
    drawn = [part.split("\r\n")[0] for part in output.split("\r\x1b[K")]
    shown = {position: [d for d in drawn if d.startswith(f"[{position}/3] eta-{position - 1} iteration")]
             for position in (1, 2, 3)}
    trial_eta = re.compile(rf"iteration (\d+)/60 (\d+)% \(\d+ s\), ETA {DURATION}")
    for position, lines in shown.items():
        assert any(trial_eta.search(line) for line in lines), (position, lines)
    # The first trial: nothing finished prices the two after it. The second: the first measured them both.
    assert any(line.endswith("; sweep ETA unknown until trial eta-1 runs") for line in shown[1]), shown[1]
    assert any(re.search(rf"; sweep ETA {DURATION}$", line) for line in shown[2]), shown[2]
    assert not any("sweep" in line for line in shown[3])  # the last trial's own ETA is the sweep's
