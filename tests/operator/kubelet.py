"""The kubelet's part, played on the apiserver tier: a Node, pods bound and reported Running, logs served; used by
the operator tests and bench/bench_operator.py.

The apiserver tier runs no kubelet and no scheduler, so tests and the benchmark do their work and say so:
each trial pod is bound to one Node (pods/binding, as a scheduler does), its status written Running (as a
kubelet does), and the API server's log requests for that Node are answered by an HTTPS server on 127.0.0.1
whose body is a worker's progress line: the log reads the operator makes travel the real path
(operator -> kube-apiserver -> "kubelet") and cost what they cost. Loopback only.
"""

from __future__ import annotations

import http.server
import pathlib
import ssl
import subprocess
import threading
import time
import urllib.parse
from typing import Callable

from apiserver_client import Client

NODE = "bench-node"
ITERATIONS = 1_000_000  # a trial that never finishes while the benchmark watches it


class LogServer:
    """Answers GET /containerLogs/<namespace>/<pod>/<container> with `log(pod)`; by default a progress line that
    advances once a second. Counts the requests and records which pods' logs were asked for."""

    def __init__(self, directory: pathlib.Path, log: Callable[[str], str] | None = None) -> None:
        self.requests = 0
        self.pods: set[str] = set()
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._log = log or self._progress
        certificate, key = directory / "kubelet.crt", directory / "kubelet.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                        "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(certificate)],
                       check=True, capture_output=True, timeout=60)
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 -- http.server's naming
                path = urllib.parse.urlsplit(self.path).path.split("/")
                if len(path) < 4 or path[1] != "containerLogs":
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with server._lock:
                    server.requests += 1
                    server.pods.add(path[3])
                body = server._log(path[3]).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(certificate), str(key))
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="kubelet-logs", daemon=True).start()

    def _progress(self, pod: str) -> str:
        iteration = 1 + int(time.monotonic() - self._started)
        return f"step {iteration}\nprogress: iteration {iteration}/{ITERATIONS} loss 0.1000 iteration 5.0 ms\n"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def add_node(admin: Client, port: int) -> None:
    """The Node every trial pod is bound to; its kubelet endpoint is the LogServer on 127.0.0.1."""
    admin.request("POST", "/api/v1/nodes", ok=(200, 201, 409), body={
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    admin.request("PATCH", f"/api/v1/nodes/{NODE}/status", content_type="application/merge-patch+json", body={
        "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                   "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "message": "played by bench/kubelet.py"}]}})


def run_pod(admin: Client, pod: dict, bind: bool) -> None:
    """Bind the pod to the Node (unless `bind` is False: its log then cannot be served) and report it Running."""
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    if bind:
        admin.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", ok=(200, 201, 409), body={
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": NODE}})
    admin.run_pod(pod)
