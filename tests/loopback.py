"""The one way tests pick a port: free on 127.0.0.1 right now (the kernel's pick); tests talk only to loopback."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
