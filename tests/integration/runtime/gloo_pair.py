"""Two real gloo ranks on loopback running one rank script, each writing rank-<r>.json into a directory."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

from loopback import free_port

SOURCE_ROOT = pathlib.Path(__file__).resolve().parents[3] / "operator"


def run(rank_script: pathlib.Path, output: pathlib.Path, timeout_seconds: float) -> list[dict]:
    """Both ranks' reports, once both exited 0 (else the assertion shows their logs)."""
    environ = {**os.environ, "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
               "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")]))}
    ranks = [subprocess.Popen([sys.executable, str(rank_script), str(output)], env={**environ, "RANK": str(rank)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
             for rank in (0, 1)]
    try:
        logs = [process.communicate(timeout=timeout_seconds)[0] for process in ranks]
    finally:
        for process in ranks:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
    assert [process.returncode for process in ranks] == [0, 0], logs
    return [json.loads((output / f"rank-{rank}.json").read_text()) for rank in (0, 1)]
