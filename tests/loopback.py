"""Loopback helpers: a free port (the kernel's pick) and a listener that records requests; tests talk only to
127.0.0.1."""

from __future__ import annotations

import http.client
import http.server
import json
import socket
import threading
import urllib.parse


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "host", "content-length"}


class Listener:
    """Records every request; with an upstream (a real `mlflow server`) forwards it there and relays the answer,
    so the operator records for real through it; without one answers like a server that knows nothing."""

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
                if target is None:  # like a server that knows nothing, but takes artifact uploads (PUT)
                    status, headers = (200, {}) if self.command == "PUT" else (404, {})
                    headers["Content-Type"] = "application/json"
                    reply = json.dumps({} if status == 200 else {"error_code": "RESOURCE_DOES_NOT_EXIST",
                                                                 "message": "nothing here"}).encode()
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
