"""A real `mlflow server` on 127.0.0.1 for tests about where the operator's credentials go (the listener in
front of it is tests/loopback.py's)."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

from loopback import free_port

class MlflowServer:
    """A real `mlflow server` on 127.0.0.1 with a SQLite store in `directory`."""

    def __init__(self, directory: pathlib.Path, port: int | None = None) -> None:
        """`port`: that of a stopped server, to start it again where its clients look for it."""
        self.port = port or free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.log = directory / "mlflow-server.log"
        command = [str(pathlib.Path(sys.executable).parent / "mlflow"), "server", "--host", "127.0.0.1",
                   "--port", str(self.port), "--workers", "1",
                   "--backend-store-uri", f"sqlite:///{directory / 'mlflow.db'}",
                   "--artifacts-destination", str(directory / "artifacts")]
        with open(self.log, "ab") as log:
            # No job runner (seven worker processes no test uses), as the chart's server runs.
            self.process = subprocess.Popen(command, env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true",
                                                          "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
                                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True)

    def wait_healthy(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"mlflow server did not start:\n{self.log.read_text(errors='replace')[-3000:]}")

    def stop(self) -> None:
        for signum in (signal.SIGTERM, signal.SIGKILL):  # SIGKILL: uvicorn's worker, if it outlived the group leader
            try:
                os.killpg(self.process.pid, signum)
            except ProcessLookupError:
                return
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                pass
