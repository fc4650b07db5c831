"""`ringleader ui`: MLflow's UI on the store `ringleader run` wrote, opened at the newest sweep in its model-training
view; cli.py delegates here.

    ringleader ui                                   # sqlite:///mlflow.db here, at http://127.0.0.1:5000
    ringleader ui --tracking-uri sqlite:///other.db --port 5001

MLflow 3's UI opens an experiment in its GenAI view unless the address asks for model training; its
experiment list does not pass that on when a link is clicked. So this prints the page of the newest sweep
run, which does, once the server answers (one web worker, no request log). A tracking server (http) has its own
UI: only that page is printed.
Exit status (contract/exits.py): MLflow's own once it stops; 1 when the store does not exist.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import signal
import subprocess
import sys
import time
import urllib.request
from typing import TextIO

from ringleader.contract import exits, redaction

DEFAULT_PORT = 5000
HOST = "127.0.0.1"
"""Loopback only: the UI has no login, and a store's runs are not for the network."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tracking-uri", metavar="URI",
                        help="the MLflow store (default: $MLFLOW_TRACKING_URI, "
                             "else sqlite:///mlflow.db in this directory)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"where to serve it on {HOST} (default {DEFAULT_PORT})")


def _newest_sweep(store):
    """The newest sweep run in `store`, None if it has none."""
    from ringleader.tracking import schema

    experiments = store.call("search experiments", lambda client: client.search_experiments())
    runs = store.call("search runs", lambda client: client.search_runs(
        [e.experiment_id for e in experiments], filter_string=f"tags.`{schema.TAG_KIND}` = '{schema.KIND_SWEEP}'",
        order_by=["attributes.start_time DESC"], max_results=1)) if experiments else []
    return runs[0] if runs else None


def newest_sweep_page(store, base: str) -> str:
    """The page of the newest sweep run in `store` under `base`, model-training view; the experiment list if none."""
    return newest_pages(store, base)[0]


def newest_pages(store, base: str) -> tuple[str, str | None]:
    """(the newest sweep run's page, its experiment's trials side by side: schema.trials_url; None without a sweep)."""
    from ringleader.tracking import schema

    run = _newest_sweep(store)
    if run is None:
        return f"{base}/#/experiments?{schema.UI_TRAINING_VIEW}", None
    return (schema.ui_url(base, run.info.experiment_id, run.info.run_id),
            schema.trials_url(base, run.info.experiment_id))


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out, err = out or sys.stdout, err or sys.stderr
    from ringleader.tracking import reading
    from ringleader.tracking.settings import resolve_uri
    from ringleader.tracking.store import TrackingUnavailable

    uri = resolve_uri(args.tracking_uri)
    try:
        store = reading.lookup_store(args.tracking_uri, "ringleader ui", "nothing to show")
        if uri.startswith(("http://", "https://")):
            print(f"MLflow at {redaction.redact(uri)} serves its own UI; the newest sweep: "
                  f"{newest_sweep_page(store, redaction.redact(uri).rstrip('/'))}", file=out)
            return exits.OK
        page, trials = newest_pages(store, f"http://{HOST}:{args.port}")
    except (reading.SourceNotFound, TrackingUnavailable) as error:
        print(str(error), file=err)
        return exits.FAILED
    mlflow = pathlib.Path(sys.executable).parent / "mlflow"
    # One web worker and no request log: one local user reads one local store. No job runner (seven worker processes
    # that ringleader never uses; the chart's server turns it off too). The allowed hosts named, the loopback ones,
    # so that MLflow's notice does not advise `--host 0.0.0.0`. Its start-up notes (stores, deprecations) are
    # quietened; its warnings and errors still show.
    served = f"{HOST}:{args.port}"
    command = [str(mlflow) if mlflow.exists() else "mlflow", "ui", "--backend-store-uri", uri, "--registry-store-uri",
               uri, "--host", HOST, "--port", str(args.port), "--workers", "1",
               "--allowed-hosts", f"{served},localhost:{args.port}",
               "--cors-allowed-origins", f"http://{served},http://localhost:{args.port}",
               "--uvicorn-opts", "--no-access-log --log-level warning"]
    quiet = {"MLFLOW_LOGGING_LEVEL": "WARNING", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
             "PYTHONWARNINGS": "ignore::DeprecationWarning,ignore:starlette.middleware.wsgi is deprecated"}
    # Its own session: the server and the process it starts (its web worker) form one group, which the
    # signals below reach whole, whether they came from a terminal's Ctrl-C or from `kill` of this process.
    server = subprocess.Popen(command, env={**os.environ, **quiet}, start_new_session=True)
    stopped: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        stopped.append(signum)
        _signal_group(server, signum)

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        if _answers(f"http://{HOST}:{args.port}/health", server):
            print(f"MLflow UI: {page}  (Ctrl-C stops it)", file=out, flush=True)
            if trials:
                print(f"Trials side by side: {trials}", file=out, flush=True)
        code = _wait(server, stopped)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if server.poll() is None:  # an error of ours above: the server does not outlive this process
            _signal_group(server, signal.SIGKILL)
            server.wait()
    return exits.signalled(stopped[0]) if stopped else code


STOP_SECONDS = 20
"""STOP_SECONDS the server's processes have to end after a signal before they are killed."""


def _signal_group(server: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(server.pid, signum)
    except ProcessLookupError:  # already gone
        pass


def _wait(server: subprocess.Popen, stopped: list[int]) -> int:
    """The server's exit status; once a signal came, at most STOP_SECONDS for its group to end, then SIGKILL.
    Short waits, so that the bound starts when the signal comes, not when a blocking wait would return."""
    deadline = None
    while True:
        try:
            code = server.wait(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            if stopped and deadline is None:
                deadline = time.monotonic() + STOP_SECONDS
            if deadline is not None and time.monotonic() > deadline:
                _signal_group(server, signal.SIGKILL)
    if stopped:  # the server gone, what it started (its web worker) goes with it
        _signal_group(server, signal.SIGKILL)
    return code


STARTUP_SECONDS = 120
"""STARTUP_SECONDS the server may take to answer (about 30 on a busy 2-core machine) before the address is given up."""


def _answers(url: str, server: subprocess.Popen) -> bool:
    """Whether the server answers at `url` before it exits or STARTUP_SECONDS pass: the address is printed then, so
    the page it names opens at once."""
    deadline = time.monotonic() + STARTUP_SECONDS
    while server.poll() is None and time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return True
        except OSError:
            time.sleep(0.5)
    return False
