"""Headless Chromium (Debian's package) driven by Playwright, able to reach 127.0.0.1 only; it records what it asked
for.

Two records, because a page's requests are not all of a browser's traffic: Playwright sees what the pages
ask for, the net log (`--log-net-log`) sees every socket of the browser, its own background services included.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import os
import pathlib
import shutil
import urllib.parse
from typing import Iterator

from playwright.sync_api import BrowserContext, expect, sync_playwright

# The binary itself, not Debian's /usr/bin/chromium wrapper: the wrapper adds flags and Google API keys of its own.
DEFAULT_EXECUTABLE = "/usr/lib/chromium/chromium"
INSTALL_HINT = "install Debian's chromium: `make browser-deps` (apt-get install --no-install-recommends chromium)"

# Every wait of a test is bounded by these (milliseconds, Playwright's unit).
LAUNCH_TIMEOUT_MS = 60_000
ACTION_TIMEOUT_MS = 60_000  # the first page of a cold MLflow UI loads ~40 JavaScript chunks on a loaded 2-core machine

LOOPBACK_ONLY = [
    # Every name resolves to nothing but 127.0.0.1, and nothing goes through a proxy: a request meant for
    # anywhere else fails inside the browser before a packet leaves the machine.
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    "--no-proxy-server",
    # The browser's own traffic: updates, sync, default apps, crash reports, pings, probes.
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-breakpad",
    "--disable-crash-reporter",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--no-pings",
    "--no-first-run",
    "--disable-quic",
    # No --disable-features here: Playwright passes its own list (optimization hints, network time, search
    # preconnects...) and a second one would replace it. What the browser still wants (its account list, an
    # update check) the host resolver rule refuses; Traffic.refused() lists it.
    # Chromium refuses to start as root with its sandbox on (the sandbox drops to an unprivileged user, which
    # a root test process in a container cannot do); the pages it opens are the test's own loopback server.
    "--no-sandbox",
]

# Net log events that put a packet on the wire, and the parameter naming where it went.
SENDING_EVENTS = {"TCP_CONNECT_ATTEMPT": "address", "UDP_BYTES_SENT": "address"}
# Any DNS transaction left the machine: the browser only ever needs the literal 127.0.0.1.
DNS_EVENTS = {"DNS_TRANSACTION", "DNS_TRANSACTION_QUERY"}


def executable() -> pathlib.Path:
    """Debian's chromium, or RINGLEADER_CHROMIUM; a clear error when neither is installed."""
    path = pathlib.Path(os.environ.get("RINGLEADER_CHROMIUM") or DEFAULT_EXECUTABLE)
    if not (path.is_file() and os.access(path, os.X_OK)):
        found = shutil.which("chromium")
        raise FileNotFoundError(f"no Chromium at {path}"
                                + (f" (found {found}: a wrapper script; "
                                   "set RINGLEADER_CHROMIUM to the binary it starts)" if found else "")
                                + f": {INSTALL_HINT}")
    return path


def is_loopback_url(url: str) -> bool:
    """Whether a page's request stays on this machine: 127.0.0.1, or no network at all (blob:, data:, about:)."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme in ("blob", "data", "about"):
        return True
    return parts.hostname == "127.0.0.1"


def _is_loopback_address(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclasses.dataclass
class Traffic:
    """What the browser asked for: the pages' request URLs, and (after the browser closed) its net log."""

    net_log: pathlib.Path
    page_requests: list[str] = dataclasses.field(default_factory=list)

    def pages_outside_loopback(self) -> list[str]:
        return [url for url in self.page_requests if not is_loopback_url(url)]

    def _events(self) -> Iterator[tuple[str, dict]]:
        log = json.loads(self.net_log.read_text())
        names = {number: name for name, number in log["constants"]["logEventTypes"].items()}
        for event in log["events"]:
            yield names.get(event["type"], str(event["type"])), event.get("params") or {}

    def sent(self) -> list[str]:
        """Every packet's destination the net log shows (TCP connection attempts, UDP sends, DNS queries)."""
        found = []
        for name, params in self._events():
            if name in SENDING_EVENTS and SENDING_EVENTS[name] in params:
                found.append(f"{name} {params[SENDING_EVENTS[name]]}")
            elif name in DNS_EVENTS:
                found.append(f"{name} {params.get('hostname') or params.get('qname') or '?'}")
        return found

    def sent_outside_loopback(self) -> list[str]:
        return [entry for entry in self.sent() if entry.split()[0] in DNS_EVENTS
                or not _is_loopback_address(entry.split()[1])]

    def refused(self) -> list[str]:
        """URLs the browser itself (not a page) wanted and the host resolver rule refused: kept for the record."""
        return sorted({params["url"] for name, params in self._events()
                       if name == "REQUEST_ALIVE" and "url" in params and not is_loopback_url(params["url"])})


@contextlib.contextmanager
def session(directory: pathlib.Path) -> Iterator[tuple[BrowserContext, Traffic]]:
    """A fresh browser and context (1400x1000, no stored state); the net log is complete once this exits."""
    directory.mkdir(parents=True, exist_ok=True)
    traffic = Traffic(net_log=directory / "netlog.json")
    # Playwright must use the Chromium given, never fetch one of its own.
    os.environ.setdefault("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(executable()), headless=True, timeout=LAUNCH_TIMEOUT_MS,
            args=[*LOOPBACK_ONLY, f"--log-net-log={traffic.net_log}", "--net-log-capture-mode=Default"])
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.set_default_timeout(ACTION_TIMEOUT_MS)
            context.set_default_navigation_timeout(ACTION_TIMEOUT_MS)
            expect.set_options(timeout=ACTION_TIMEOUT_MS)  # expect()'s own default is 5 s
            context.on("request", lambda request: traffic.page_requests.append(request.url))
            context.on("websocket", lambda socket: traffic.page_requests.append(socket.url))
            yield context, traffic
        finally:
            browser.close()  # writes the end of the net log
