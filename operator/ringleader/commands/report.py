"""`ringleader report SOURCE`: a sweep's report (HTML, figures, CSV, JSON), attached to its MLflow sweep run; cli.py
delegates here.

    ringleader report ringleader-runs/                        # the newest run directory in it
    ringleader report ringleader-runs/quickstart-20250101-120000 -o /tmp/quickstart
    ringleader report default/quickstart                      # an MLflow experiment's newest sweep run
    ringleader report 3f2a9c...                               # one sweep run, by id
    ringleader report quickstart --tracking-uri http://127.0.0.1:5000 --no-attach

SOURCE is tried as a run directory first, then in MLflow as a sweep run id, an experiment name (also
"default/<name>") and an experiment id. Exit status: 0 when the report is written (and attached), 1
when SOURCE names nothing, MLflow does not answer or attaching failed (the files are still written),
2 for wrong options. Importing this module is cheap; MLflow and matplotlib are imported by `run`.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys
from typing import TextIO

from ringleader.contract import exits, layout, redaction

DEFAULT_OUTPUT = pathlib.Path("ringleader-report")
"""DEFAULT_OUTPUT holds <experiment>/ for a report from MLflow; a run directory's report goes into it, as report/."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", metavar="SOURCE",
                        help="a run directory of `ringleader run` (or the directory holding them: the newest is "
                             "taken), an MLflow experiment name or id (its newest sweep run), or a sweep run id")
    parser.add_argument("-o", "--output-dir", metavar="DIR", type=pathlib.Path,
                        help="where the report's files go (default: <run dir>/report for a run directory, else "
                             f"./{DEFAULT_OUTPUT}/<experiment>)")
    parser.add_argument("--tracking-uri", metavar="URI",
                        help="MLflow tracking URI (default: for a run directory, the store it was published to; "
                             "else $MLFLOW_TRACKING_URI, else sqlite:///mlflow.db in this directory)")
    parser.add_argument("--no-attach", action="store_true",
                        help="only write the files; do not attach them to the sweep run in MLflow")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    # The streams of the moment of the call, not of the import: a caller may have replaced sys.stdout since.
    out, err = out or sys.stdout, err or sys.stderr
    missing = layout.missing_path(args.source)
    if missing:  # said before MLflow is imported to look it up
        print(f"ringleader report: {missing}", file=err)
        return exits.FAILED
    # Imported here: MLflow and matplotlib take seconds, and the `ringleader` parser is built with this module.
    from ringleader.report import assembly
    from ringleader.tracking import reading, reports
    from ringleader.tracking.store import TrackingUnavailable

    try:
        if pathlib.Path(args.source).is_dir():
            result, output, attach_to = _from_directory(args, err)
        else:
            result, output, attach_to = _from_mlflow(args, err)
    except (reading.SourceNotFound, TrackingUnavailable) as error:
        print(f"ringleader report: {error}", file=err)  # as predict and whatif say theirs
        return exits.FAILED

    built = assembly.build(result, output)
    for finding in built.findings:
        print(f"- {finding}", file=out)
    print(f"Report: {built.html}", file=out)
    if args.no_attach:
        return exits.OK
    if isinstance(attach_to, str):  # why it cannot be attached
        print(f"not attached: {attach_to}", file=err)
        return exits.FAILED
    store, run_id = attach_to
    try:
        reports.attach(store, run_id, built)
    except TrackingUnavailable as error:
        print(f"not attached: {error}; the files are in {built.directory}", file=err)
        return exits.FAILED
    print(f"Attached to sweep run {run_id} at {redaction.redact(store.uri)}: artifacts report/, and its description",
          file=out)
    return exits.OK


def _from_directory(args: argparse.Namespace, notices: TextIO):
    """(result, output directory, (store, sweep run id) or why not) for a run directory; which run was taken, on
    `notices` (stderr, as every command says it)."""
    from ringleader.tracking import links, reading, sessions
    from ringleader.tracking.cursor import Cursor, path_for
    from ringleader.tracking.settings import absolute_uri
    from ringleader.tracking.store import Store, TrackingUnavailable

    directory, picked = reading.session_directory(args.source)
    if picked:
        print(picked, file=notices)
    result = reading.from_directory(directory)
    output = args.output_dir or sessions.report_directory(directory)
    if args.no_attach:
        return result, output, None
    uri = absolute_uri(args.tracking_uri) if args.tracking_uri else layout.Session.load(directory).tracking_uri
    if redaction.is_redacted(uri):
        return result, output, (f"the run's MLflow URI {uri} carried credentials, which are never stored: give it "
                                "in full with --tracking-uri")
    store = Store(uri)
    run_id = Cursor.load(path_for(directory, store.uri)).run_id
    if run_id is None:
        return result, output, (f"{directory} was never published to {redaction.redact(uri)}: "
                                f"`ringleader publish {directory}` first, or --no-attach")
    try:
        result = dataclasses.replace(result, mlflow_pages=links.session_pages(store, layout.Session.load(directory),
                                                                              run_id))
    except TrackingUnavailable:
        pass  # no links; attaching says the store is away
    return result, output, (store, run_id)


def _from_mlflow(args: argparse.Namespace, notices: TextIO):
    """(result, output directory, (store, sweep run id)) for an experiment or a sweep run in MLflow; which sweep run
    an experiment's name took, on `notices`."""
    from ringleader.tracking import reading

    store = reading.lookup_store(args.tracking_uri, args.source, "not a run directory")
    try:
        result, run_id = reading.from_mlflow(store, args.source)
    except reading.SourceNotFound as error:
        raise reading.SourceNotFound(f"{args.source}: not a run directory; in MLflow at {redaction.redact(store.uri)}: "
                                     f"{str(error).removeprefix(args.source + ': ')}") from None
    picked = reading.picked_sweep(args.source, run_id)
    if picked:
        print(picked, file=notices)
    return result, args.output_dir or DEFAULT_OUTPUT / layout.directory_name(result.experiment), (store, run_id)
