"""A loopback listener that records every request it gets, for tests about where the operator's credentials go.

With an upstream (a real `mlflow server`), it forwards each request there and relays the answer, so
the operator records for real through it; without one it answers 404 like a server that knows nothing.
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "host", "content-length"}


class Listener:
    def __init__(self, upstream: str | None = None) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self._lock = threading.Lock()
        listener = self
        target = urllib.parse.urlsplit(upstream) if upstream else None

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with listener._lock:
                    listener.requests.append((self.command, self.path, dict(self.headers), body))
                if target is None:
                    status, headers = 404, {"Content-Type": "application/json"}
                    reply = json.dumps({"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "nothing here"}).encode()
                else:
                    connection = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
                    try:
                        connection.request(self.command, self.path, body=body, headers={
                            k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP})
                        response = connection.getresponse()
                        status, reply = response.status, response.read()
                        headers = {k: v for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP}
                    finally:
                        connection.close()
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

            def log_message(self, *_):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def seen(self) -> list[tuple[str, str, dict[str, str], bytes]]:
        with self._lock:
            return list(self.requests)

    def authorizations(self) -> set[str | None]:
        return {headers.get("Authorization") for _, _, headers, _ in self.seen()}

    def saw(self, text: str) -> bool:
        return any(text in f"{path} {headers} {body!r}" for _, path, headers, body in self.seen())


class MlflowServer:
    """A real `mlflow server` on 127.0.0.1 with a SQLite store in `directory`."""

    def __init__(self, directory: pathlib.Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.uri = f"http://127.0.0.1:{self.port}"
        self.log = directory / "mlflow-server.log"
        command = [str(pathlib.Path(sys.executable).parent / "mlflow"), "server", "--host", "127.0.0.1",
                   "--port", str(self.port), "--workers", "1",
                   "--backend-store-uri", f"sqlite:///{directory / 'mlflow.db'}",
                   "--artifacts-destination", str(directory / "artifacts")]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"},
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
