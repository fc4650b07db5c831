"""Records survive the abrupt death of their rank: SIGKILL (what the OOM killer sends), os._exit, a fatal signal.

Each case is a real process that records through RankRecorder and dies right after the last
log_iteration returns, with no close(), no atexit, no flush of its own. 40 processes in all. Then,
as the launcher does when a trial ends, records.restore() completes the readable file from the journal.
"""

import signal
import subprocess
import sys

import pytest

from ringleader.contract import records

ITERATIONS = 5
DEATHS = {
    "sigkill": "os.kill(os.getpid(), signal.SIGKILL)",  # the OOM killer's signal too
    "os_exit": "os._exit(3)",
    "sigsegv": "signal.signal(signal.SIGSEGV, signal.SIG_DFL); os.kill(os.getpid(), signal.SIGSEGV)",
    "sigterm_default": "signal.signal(signal.SIGTERM, signal.SIG_DFL); os.kill(os.getpid(), signal.SIGTERM)",
}
PROGRAM = """
import os, signal, sys
from ringleader.contract import records
recorder = records.RankRecorder(sys.argv[1], "trial", int(sys.argv[2]))
for step in range({iterations}):
    recorder.log_iteration(step, {{"time/iteration": 0.001 * step, "loss": 2.0 - step, "bytes/sent": 1e6}})
{death}
"""
PROCESSES_PER_DEATH = 10


@pytest.mark.parametrize("death", sorted(DEATHS))
def test_a_rank_that_dies_right_after_recording_loses_nothing(tmp_path, death):
    program = PROGRAM.format(iterations=ITERATIONS, death=DEATHS[death])
    # Started together, so they die while the machine is busy with their siblings.
    started = [subprocess.Popen([sys.executable, "-c", program, str(tmp_path), str(rank)])
               for rank in range(PROCESSES_PER_DEATH)]
    for process in started:
        assert process.wait(timeout=120) != 0
    for rank in range(PROCESSES_PER_DEATH):
        records.restore(records.rank_dir(tmp_path, "trial", rank))
        written = records.read_iterations(records.rank_dir(tmp_path, "trial", rank) / records.ITERATIONS_FILE)
        assert [r["step"] for r in written] == list(range(ITERATIONS)), (death, rank)
        assert [r["loss"] for r in written] == [2.0 - step for step in range(ITERATIONS)]


def test_the_signal_cases_really_died_of_their_signal(tmp_path):
    program = PROGRAM.format(iterations=1, death=DEATHS["sigkill"])
    finished = subprocess.run([sys.executable, "-c", program, str(tmp_path), "0"], timeout=120)
    assert finished.returncode == -signal.SIGKILL
