"""`ringleader publish DIR`: send what `ringleader run` left unpublished (the store was away) to MLflow; and
`ringleader publish --from-log LOG`: what a pod's rank handed over in its log; cli.py delegates here.

    ringleader publish ringleader-runs/                       # every run directory in it
    ringleader publish ringleader-runs/quickstart-20250101-120000 --tracking-uri http://127.0.0.1:5000
    kubectl logs -n team-a q-0-worker-1 | ringleader publish --from-log - --tracking-uri http://127.0.0.1:5000

Each store has its own publish cursors, so publishing into a second store (--tracking-uri) sends everything
there too. A run whose `ringleader run` died (SIGKILL, a full disk) is closed first: its trials that were
still running end as KILLED, from the records on disk. Exit status (contract/exits.py): 0 when
everything is published; 1 when DIR holds no run, when the store still does not answer or refuses (run
it again later: nothing is lost, nothing is sent twice), or when a run's URI had credentials, which are
never stored (give it again with --tracking-uri).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from typing import TextIO

from ringleader.contract import exits

HANDOVER_DIR = "ringleader-handover"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", nargs="?",
                        help="a run directory written by `ringleader run`, or a directory of them (ringleader-runs/)")
    parser.add_argument("--from-log", metavar="LOG",
                        help="instead of DIR: a pod's log (`kubectl logs POD > LOG`, or - for standard input) whose "
                             "rank handed over the records MLflow did not take (reason RecordsIncomplete)")
    parser.add_argument("--work-dir", metavar="DIR", default=HANDOVER_DIR,
                        help=f"with --from-log: where the records are unpacked and kept with their publish cursors, "
                             f"so that running it again sends nothing twice (default {HANDOVER_DIR})")
    parser.add_argument("--tracking-uri", metavar="URI",
                        help="publish there instead of the store the run was started with (with --from-log: the "
                             "store the pod published to, as reached from here, a port-forward say); needed in full "
                             "when that store's URI had credentials (they are never written to disk)")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    # The streams of the moment of the call, not of the import: a caller may have replaced sys.stdout since.
    out, err = out or sys.stdout, err or sys.stderr
    if (args.directory is None) == (args.from_log is None):
        print("give a run directory (DIR) or a pod's log (--from-log LOG), one of them", file=err)
        return exits.USAGE
    if args.from_log is not None:
        return _from_log(args, out, err)
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


def _from_log(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The records a pod's rank handed over in its log, into the MLflow runs its trial has."""
    from ringleader.contract import unpublished
    from ringleader.tracking import handover

    try:
        if args.from_log == "-":
            published = handover.publish_log(sys.stdin, pathlib.Path(args.work_dir), args.tracking_uri)
        else:
            with open(args.from_log, encoding="utf-8", errors="replace") as log:
                published = handover.publish_log(log, pathlib.Path(args.work_dir), args.tracking_uri)
    except (OSError, unpublished.BlockError) as error:
        print(f"{args.from_log}: {error}", file=err)
        return exits.FAILED
    if not published:
        print(f"{args.from_log}: no records handed over in this log (a rank prints them when it fails with "
              "RecordsIncomplete)", file=err)
        return exits.FAILED
    for result in published:
        if result.problem:
            print(f"{result.block}: not published: {result.problem}", file=err)
        else:
            print(f"{result.block}: published into rank run {result.run_id}, now FINISHED", file=out)
    return exits.OK if all(r.problem is None for r in published) else exits.FAILED
