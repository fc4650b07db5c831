"""`ringleader publish DIR`: send what `ringleader run` left unpublished (the store was away) to MLflow; cli.py delegates here.

    ringleader publish ringleader-runs/                       # every run directory in it
    ringleader publish ringleader-runs/quickstart-20250101-120000 --tracking-uri http://127.0.0.1:5000

Each store has its own publish cursors, so publishing into a second store (--tracking-uri) sends everything
there too. A run whose `ringleader run` died (SIGKILL, a full disk) is closed first: its trials that were
still running end as KILLED, from the records on disk. Exit status (contract/exits.py): 0 when
everything is published; 1 when DIR holds no run, when the store still does not answer or refuses (run
it again later: nothing is lost, nothing is sent twice), or when a run's URI had credentials, which are
never stored (give it again with --tracking-uri).
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from ringleader.contract import exits


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR",
                        help="a run directory written by `ringleader run`, or a directory of them (ringleader-runs/)")
    parser.add_argument("--tracking-uri", metavar="URI",
                        help="publish there instead of the store the run was started with; needed in full when "
                             "that store's URI had credentials (they are never written to disk)")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    # The streams of the moment of the call, not of the import: a caller may have replaced sys.stdout since.
    out, err = out or sys.stdout, err or sys.stderr
    # Imported here: MLflow takes seconds to import and the `ringleader` parser is built with this module.
    from ringleader.tracking import replay

    try:
        replayed = replay.publish_dir(args.directory, tracking_uri=args.tracking_uri)
    except FileNotFoundError as error:
        print(str(error), file=err)
        return exits.FAILED
    except OSError as error:  # a full disk: a cursor could not be saved; what MLflow accepted is not sent again
        print(f"{args.directory}: not all published: {error.filename or ''}{': ' if error.filename else ''}"
              f"{error.strerror or error}; run it again once there is room", file=err)
        return exits.FAILED
    for directory in replayed.closed:
        print(f"{directory}: its `ringleader run` ended without recording its end; closed from the records on disk",
              file=out)
    for session in replayed.sessions:
        metrics = sum(trial.metrics for trial in session.trials)
        print(f"{session.directory}: {len(session.trials)} trial(s), {metrics} new metric values; "
              f"sweep run {session.parent_run_id}", file=out)
    for directory, problem in replayed.unavailable:
        print(f"{directory}: not published: {problem}", file=err)
    return exits.OK if replayed.ok else exits.FAILED
