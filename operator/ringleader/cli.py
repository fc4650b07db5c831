"""The `ringleader` command: validate, render and crd here; run and operator delegated to launch/ and controller/.

    ringleader validate examples/*.yaml           # every problem with its field and fix; the trials
    ringleader render examples/quickstart.yaml    # the Kubernetes objects of every trial, as YAML
    ringleader crd | kubectl apply -f -           # the CustomResourceDefinition
    ringleader run examples/quickstart.yaml       # run locally into ./mlflow.db (ringleader.launch)
    ringleader operator                           # the operator (ringleader.controller)

validate, render and crd import neither torch nor kopf, so they answer in a moment; run and
operator import their modules only when called.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from typing import Callable, TextIO

import yaml

import ringleader
from ringleader import api, topology
from ringleader.api import crd, loading
from ringleader.contract import redaction
from ringleader.topology import settings as render_settings

# Subcommands owned by other packages: name -> (module with add_arguments(parser) and run(args) -> int, help).
DELEGATED = {
    "run": ("ringleader.launch.cli", "run an experiment as local processes, recording into a local MLflow store"),
    "operator": ("ringleader.controller.cli", "run the Kubernetes operator (kopf) that reconciles experiments"),
    "publish": ("ringleader.launch.publish", "publish records that ringleader run could not send to MLflow"),
    "report": ("ringleader.launch.report", "write a sweep's report (HTML, figures, CSV) and attach it in MLflow"),
}


def _expansion(path: str, out: TextIO) -> api.Expansion | None:
    """The file's trials, or None after printing its problems to `out`: one line when it is no YAML to take."""
    try:
        return api.expand(api.load(path))
    except api.LoadError as error:
        print(error, file=out)
        return None
    except api.SpecError as error:
        print(f"{loading.display_name(path)}: invalid", file=out)
        for problem in error.problems:
            print(f"  - {problem}", file=out)
        return None


def validate(args: argparse.Namespace) -> int:
    """Exit 0 when every file is valid, 1 when any is not; the trials of each valid file are listed."""
    all_valid = True
    for path in args.files:
        expansion = _expansion(path, sys.stdout)
        if expansion is None:
            all_valid = False
            continue
        trials = expansion.trials
        print(f"{loading.display_name(path)}: valid, {len(trials)} trial{'s' if len(trials) != 1 else ''}")
        for trial in trials:
            spec = trial.spec
            described = ", ".join(f"{k}={v}" for k, v in trial.parameters.items()) or "no sweep"
            print(f"  {trial.name}: {spec.architecture.value} {spec.sync.paradigm.value}, "
                  f"{trial.world_size} pod{'s' if trial.world_size != 1 else ''} ({described})")
        for parameters, reason in expansion.skipped:
            combination = ", ".join(f"{k}={v}" for k, v in parameters.items())
            print(f"  skipped ({combination}): {reason}")
    return 0 if all_valid else 1


def render(args: argparse.Namespace) -> int:
    """Print every trial's objects (or one trial's, with --trial) as one YAML multi-document stream."""
    expansion = _expansion(args.file, sys.stderr)
    if expansion is None:
        return 1
    trials = expansion.trials
    if args.trial is not None:
        if not 0 <= args.trial < len(trials):
            print(f"{args.file}: --trial {args.trial} does not exist: the experiment has trials 0 to {len(trials) - 1}",
                  file=sys.stderr)
            return 1
        trials = [trials[args.trial]]
    if args.tracking_uri and redaction.carries_credentials(args.tracking_uri):
        print(f"--tracking-uri {redaction.redact(args.tracking_uri)} carries credentials, which would be written into "
              "every pod: name a Secret with them in the experiment's tracking.credentialsSecret", file=sys.stderr)
        return 1
    settings = render_settings.from_args(args, default_tracking_uri=args.tracking_uri)
    documents = [document for trial in trials for document in topology.render(trial, settings, args.run_id)]
    sys.stdout.write(yaml.safe_dump_all(documents, sort_keys=False, width=120))
    return 0


def print_crd(args: argparse.Namespace) -> int:
    sys.stdout.write(crd.to_yaml())
    return 0


def _delegate(command: str, argv: list[str]) -> int:
    """Import the subcommand's module now, so validate and render never pay for torch or kopf."""
    module_name, help_text = DELEGATED[command]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"ringleader {command}", description=help_text)
    module.add_arguments(parser)
    return module.run(parser.parse_args(argv))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ringleader",
        description="Distributed-training experiments (parameter server, peer-to-peer, ring allreduce; "
                    "BSP/ASP/SSP/DSSP) on Kubernetes or locally.",
        epilog="`ringleader COMMAND --help` shows a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"ringleader {ringleader.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    check = commands.add_parser("validate", help="check experiment files; list their trials",
                                description="Check experiment files against the API. Prints every problem with "
                                            "its field and fix; for valid files, the trials and skipped "
                                            "sweep combinations. Exit status 1 if any file is invalid.")
    check.add_argument("files", nargs="+", metavar="FILE", help="experiment file; '-' reads standard input")
    check.set_defaults(handler=validate)

    show = commands.add_parser("render", help="print the Kubernetes objects of an experiment's trials",
                               description="Print the Service, ConfigMap, PodGroup and Pods the operator creates "
                                           "for each trial, as a YAML multi-document stream.")
    show.add_argument("file", metavar="FILE", help="experiment file; '-' reads standard input")
    show.add_argument("--trial", type=int, metavar="N", help="only trial N (0-based, as `validate` lists them)")
    show.add_argument("--run-id", help="MLflow run id given to the pods (RINGLEADER_MLFLOW_RUN_ID)")
    show.add_argument("--tracking-uri", help="MLFLOW_TRACKING_URI when the experiment sets no tracking.uri")
    render_settings.add_arguments(show)  # the operator's own pod flags: the same objects for the same flags
    show.set_defaults(handler=render)

    definition = commands.add_parser("crd", help="print the CustomResourceDefinition",
                                     description="Print the DistributedTrainingExperiment CRD as YAML.")
    definition.set_defaults(handler=print_crd)

    for command, (_, help_text) in DELEGATED.items():
        # Options are the delegate's own (`ringleader run --help`); main() hands it the rest of the line.
        commands.add_parser(command, help=help_text, add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        return _delegate(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except BrokenPipeError:
        # `ringleader render ... | head` closed the pipe early: exit as Unix tools killed by SIGPIPE do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
