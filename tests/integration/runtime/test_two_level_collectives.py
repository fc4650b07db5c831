"""The two-level collectives' checks of tests/gpu/check_two_level.py, on gloo: 4 CPU ranks on loopback in pods of 2.

The same script checks NCCL on a GPU machine; here it proves the checks themselves and the CPU path: the
hierarchical sum of odd-sized tensors (one with an empty chunk) equals torch.distributed's allreduce and sends what
it says it sends, the ring trains with it as with the flat one, and the pod's point-to-point messages arrive.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "gpu" / "check_two_level.py"


def test_the_two_level_collectives_sum_send_and_train_as_the_flat_ones_on_gloo():
    done = subprocess.run([sys.executable, str(SCRIPT), "--cpu"], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "ok: 4 ranks on gloo, pods of 2" in done.stdout
