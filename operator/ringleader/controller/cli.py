"""`ringleader operator`: runs the kopf operator with the controller's handlers; `ringleader.cli` delegates here.

    ringleader operator                         # cluster-wide, in-cluster config or ~/.kube/config
    ringleader operator -n team-a -n team-b     # only these namespaces
    ringleader operator --tracking-uri http://mlflow.ringleader:5000 --liveness none
"""

from __future__ import annotations

import argparse
import logging
import sys

import kopf

from ringleader.contract import exits
from ringleader.tracking import credentials
from ringleader.controller import settings as settings_


def add_arguments(parser: argparse.ArgumentParser) -> None:
    settings_.add_arguments(parser)
    parser.add_argument("--verbose", "-v", action="store_true", help="log kopf's and the controller's debug messages")
    parser.add_argument("--log-format", choices=("plain", "full", "json"), default="full",
                        help="log line format (json for log collectors)")


def run(args: argparse.Namespace) -> int:
    """Run the operator until SIGINT/SIGTERM; returns the exit status (contract/exits.py; USAGE: a setting that can
    never work)."""
    try:
        settings = settings_.from_args(args)
        # Before anything uses MLflow: its credentials leave the environment, bound to the operator's server.
        taken = credentials.take(settings.tracking.default_uri)
    except ValueError as error:
        print(f"ringleader operator: {error}", file=sys.stderr)
        return exits.USAGE
    if settings.tracking.default_uri or settings.tracking.allowed_uris:
        credentials.bind(taken)
    kopf.configure(verbose=args.verbose, log_format=kopf.LogFormat[args.log_format.upper()])
    if not args.verbose:
        logging.getLogger("kopf.objects").addFilter(_without_handler_successes)
    # Importing the module registers its handlers with kopf's default registry.
    from ringleader.controller import handlers
    if settings.pods.kueue:
        handlers.watch_workloads()

    namespaces = list(settings.scope.namespaces)
    logging.getLogger(__name__).info("watching %s", ", ".join(namespaces) if namespaces else "the whole cluster")
    kopf.run(
        clusterwide=not namespaces,
        namespaces=namespaces,
        standalone=settings.standalone,
        liveness_endpoint=settings.liveness_endpoint,
        memo=kopf.Memo(settings=settings),
    )
    return exits.OK


def _without_handler_successes(record: logging.LogRecord) -> bool:
    """Drops kopf's "Handler '...' succeeded." lines: every handler here only queues a pass, once per watch
    event (a line per pod change, thousands a minute on a busy cluster); failures are still logged, and
    --verbose keeps them all."""
    return not (record.levelno == logging.INFO and isinstance(record.msg, str) and record.msg.startswith("Handler '")
                and record.msg.endswith(" succeeded."))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ringleader operator", description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))
