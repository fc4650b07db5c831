"""The `ringleader` command: validate, render, crd and version here; run, operator, publish, report, whatif, predict,
profile and ui delegated.

    ringleader validate examples/*.yaml           # every problem with its field and fix; the trials
    ringleader validate -o json sweep.yaml        # the same, one JSON document per file
    ringleader render examples/quickstart.yaml    # the Kubernetes objects of every trial, as YAML
    ringleader crd | kubectl apply -f -           # the CustomResourceDefinition
    ringleader run examples/quickstart.yaml       # run locally into ./mlflow.db (ringleader.launch)
    ringleader operator                           # the operator (ringleader.controller)
    ringleader publish ringleader-runs/           # what runs could not send to MLflow, sent (ringleader.commands)
    ringleader report ringleader-runs/            # the newest run's report (HTML, figures, CSV), attached in MLflow
    ringleader ui                                 # MLflow's UI on ./mlflow.db, opened at the newest sweep
    ringleader whatif ringleader-runs/            # a trial's scaling factor at other N, bandwidths, compressions
    ringleader predict ringleader-runs/           # each trial's iteration time predicted, and 1PS's, P2P's, ring's
    ringleader profile examples/quickstart.yaml   # the model's profile on this machine, from one worker
    ringleader version                            # ringleader's, Python's, torch's, MLflow's, kopf's

Results go to stdout, problems to stderr; every command exits 0 (ok), 1 (invalid input or failed) or 2
(usage), as contract/exits.py says and docs/cli.md lists. validate, render, crd and version import
neither torch nor kopf, so they answer in a moment; the delegated commands import their modules only when called.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import json
import os
import platform
import signal
import sys
from typing import Any, Callable

import yaml

import ringleader
from ringleader import api, topology
from ringleader.api import crd, reading, rules
from ringleader.api.problems import Problem
from ringleader.contract import exits, redaction
from ringleader.topology import settings as render_settings
from ringleader.topology import workload as topology_workload

# Subcommands owned by other packages: name -> (module with add_arguments(parser) and run(args) -> int, help).
DELEGATED = {
    "run": ("ringleader.launch.cli", "run an experiment as local processes, recording into a local MLflow store"),
    "operator": ("ringleader.controller.cli", "run the Kubernetes operator (kopf) that reconciles experiments"),
    "publish": ("ringleader.commands.publish", "publish records that ringleader run could not send to MLflow"),
    "report": ("ringleader.commands.report", "write a sweep's report (HTML, figures, CSV) and attach it in MLflow"),
    "whatif": ("ringleader.commands.whatif", "model a trial's scaling factor at other worker counts, bandwidths and "
                                             "compression ratios"),
    "predict": ("ringleader.commands.predict", "predict a trial's iteration time and that of the other "
                                               "architectures from its own measurements"),
    "profile": ("ringleader.commands.profile", "record a model's profile on this machine from one worker: its "
                                               "gradients, forward, backward and update (the input of planning a "
                                               "cluster)"),
    "ui": ("ringleader.commands.ui", "serve MLflow's UI on a local store, opened at the newest sweep in its "
                                     "model-training view"),
}
# Distributions whose versions `ringleader version` shows: read from their metadata, never imported (torch takes
# seconds).
COMPONENTS = ("torch", "mlflow", "kopf")
FORMATS = ("text", "json", "yaml")


@dataclasses.dataclass(frozen=True)
class Checked:
    """One experiment file, checked: its trials when valid, else its problems."""

    file: str
    """The name shown: the path as given, "<stdin>" for '-'."""
    expansion: api.Expansion | None
    problems: list[Problem]
    unreadable: bool = False
    """No YAML to take (loading.LoadError): its one problem is said on one line, the excerpt under it."""
    excerpt: str = ""
    """Where a parser placed that problem: the file's line, a caret under the column (loading.excerpt)."""
    warnings: tuple[str, ...] = ()
    """What a valid file sets that no trial reads (api.rules.unread_fields): said, not refused."""

    def document(self) -> dict[str, Any]:
        """What `validate -o json|yaml` shows of the file; docs/cli.md describes it."""
        trials = self.expansion.trials if self.expansion else []
        return {
            "file": self.file,
            "valid": self.expansion is not None,
            "problems": [{"field": problem.field, "message": problem.message} for problem in self.problems],
            "warnings": list(self.warnings),
            "trials": [{"name": trial.name, "architecture": trial.spec.architecture.value,
                        "paradigm": trial.spec.sync.paradigm.value, "worldSize": trial.world_size,
                        "parameters": trial.parameters} for trial in trials],
            "skipped": [{"parameters": parameters, "reason": reason}
                        for parameters, reason in (self.expansion.skipped if self.expansion else [])],
        }


def check(path: str) -> Checked:
    """Load, validate and expand one file ('-': standard input), keeping its problems rather than raising them."""
    file = reading.display_name(path)
    try:
        experiment = api.load(path)
        return Checked(file, api.expand(experiment), [], warnings=tuple(rules.unread_fields(experiment.spec)))
    except api.LoadError as error:
        return Checked(file, None, [Problem(None, error.problem)], unreadable=True, excerpt=error.excerpt)
    except api.SpecError as error:
        return Checked(file, None, error.problems)


def print_problems(checked: Checked) -> None:
    """To stderr, whatever the output format: a script reading stdout never parses an error as a result."""
    if checked.unreadable:
        print(api.LoadError(checked.file, checked.problems[0], checked.excerpt).shown(), file=sys.stderr)
    elif checked.problems:
        print(api.SpecError(checked.file, checked.problems), file=sys.stderr)
    for warning in checked.warnings:
        print(f"{checked.file}: warning: {warning}", file=sys.stderr)


def print_trials(expansion: api.Expansion, file: str) -> None:
    trials = expansion.trials
    print(f"{file}: valid, {len(trials)} trial{'s' if len(trials) != 1 else ''}")
    for trial in trials:
        described = ", ".join(f"{k}={v}" for k, v in trial.parameters.items()) or "no sweep"
        print(f"  {trial.name}: {trial.spec.architecture.value} {trial.spec.sync.paradigm.value}, "
              f"{trial.world_size} pod{'s' if trial.world_size != 1 else ''} ({described})")
    for parameters, reason in expansion.skipped:
        combination = ", ".join(f"{k}={v}" for k, v in parameters.items())
        print(f"  skipped ({combination}): {reason}")


def validate(args: argparse.Namespace) -> int:
    """Exit 0 when every file is valid, 1 when any is not; problems on stderr, trials (or documents) on stdout."""
    if args.files.count(reading.STDIN) > 1:
        print("ringleader validate: '-' (standard input) can be read once: name it once among the files",
              file=sys.stderr)
        return exits.USAGE
    results = []
    for path in args.files:
        checked = check(path)
        print_problems(checked)
        if args.output == "text" and checked.expansion is not None:
            print_trials(checked.expansion, checked.file)
        results.append(checked)
    if args.output == "json":
        for checked in results:  # JSON Lines: one document per file, in the order given
            print(json.dumps(checked.document(), separators=(",", ":")))
    elif args.output == "yaml":
        sys.stdout.write(yaml.safe_dump_all([checked.document() for checked in results], sort_keys=False, width=120))
    return exits.OK if all(checked.expansion is not None for checked in results) else exits.FAILED


def render(args: argparse.Namespace) -> int:
    """Print every trial's objects (or one trial's, with --trial) as one YAML multi-document stream."""
    checked = check(args.file)
    print_problems(checked)
    if checked.expansion is None:
        return exits.FAILED
    trials = checked.expansion.trials
    if args.trial is not None:
        if not 0 <= args.trial < len(trials):
            print(f"{checked.file}: --trial {args.trial} does not exist: the experiment has trials 0 to "
                  f"{len(trials) - 1}", file=sys.stderr)
            return exits.USAGE
        trials = [trials[args.trial]]
    if args.tracking_uri and redaction.carries_credentials(args.tracking_uri):
        print(f"--tracking-uri {redaction.redact(args.tracking_uri)} carries credentials, which would be written into "
              "every pod: name a Secret with them in the experiment's tracking.credentialsSecret", file=sys.stderr)
        return exits.USAGE
    settings = render_settings.from_args(args, default_tracking_uri=args.tracking_uri)
    documents = []
    for trial in trials:
        objects = topology.render(trial, settings, args.run_id)
        queue_name = trial.spec.scheduling.queue_name
        if queue_name:  # created first: the others exist only once Kueue admits it
            documents.append(topology_workload.workload(trial, objects, queue_name))
        documents.extend(objects)
    sys.stdout.write(yaml.safe_dump_all(documents, sort_keys=False, width=120))
    return exits.OK


def print_crd(args: argparse.Namespace) -> int:
    sys.stdout.write(crd.to_yaml())
    return exits.OK


def versions() -> dict[str, str | None]:
    """ringleader's and Python's versions, and each of COMPONENTS' (None when it is not installed)."""
    found: dict[str, str | None] = {"ringleader": ringleader.__version__, "python": platform.python_version()}
    for name in COMPONENTS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def print_version(args: argparse.Namespace) -> int:
    found = versions()
    if args.output == "json":
        print(json.dumps(found))
    elif args.output == "yaml":
        sys.stdout.write(yaml.safe_dump(found, sort_keys=False))
    else:
        for name, number in found.items():
            print(f"{name} {number or 'not installed'}")
    return exits.OK


def _delegate(command: str, argv: list[str]) -> int:
    """Import the subcommand's module now, so validate and render never pay for torch or kopf."""
    module_name, help_text = DELEGATED[command]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"ringleader {command}", description=help_text,
                                     epilog=EXIT_STATUSES, formatter_class=argparse.RawDescriptionHelpFormatter)
    module.add_arguments(parser)
    args = parser.parse_args(argv)
    if module_name.startswith(("ringleader.launch.", "ringleader.commands.")):
        # The local commands talk to MLflow as the user: the user's credentials go to the server the user
        # named and to no other, whatever an experiment file or a run directory names (the operator binds
        # its own in controller.cli).
        from ringleader.tracking import credentials

        credentials.bind(credentials.take_users(args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")))
    return module.run(args)


EXIT_STATUSES = ("exit status: 0 ok, 1 invalid input or failed, 2 usage (a wrong command line), "
                 "128+N stopped by signal N; docs/cli.md")


def _output_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("-o", "--output", choices=FORMATS, default="text",
                        help=f"text for people (default); json or yaml: {what}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ringleader",
        description="Distributed-training experiments (parameter server, peer-to-peer, ring allreduce; "
                    "BSP/ASP/SSP/DSSP) on Kubernetes or locally.",
        epilog=f"`ringleader COMMAND --help` shows a command's options. {EXIT_STATUSES}.",
    )
    parser.add_argument("--version", action="version", version=f"ringleader {ringleader.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    checking = commands.add_parser("validate", help="check experiment files; list their trials",
                                   description="Check experiment files against the API. Prints every problem "
                                               "with its field and fix (on stderr); for valid files, the trials "
                                               "and skipped sweep combinations. Exit status 1 if any file is "
                                               "invalid.")
    checking.add_argument("files", nargs="+", metavar="FILE", help="experiment file; '-' reads standard input")
    _output_option(checking, "one document per file: {file, valid, problems, warnings, trials, skipped} "
                             "(JSON Lines; a YAML stream)")
    checking.set_defaults(handler=validate)

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

    about = commands.add_parser("version", help="print the versions of ringleader, Python, torch, MLflow and kopf",
                                description="Print the versions of ringleader, Python and the installed torch, "
                                            "MLflow and kopf (read from their metadata, without importing them).")
    _output_option(about, "one mapping of name to version (null: not installed)")
    about.set_defaults(handler=print_version)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        # As kubectl and helm do: the command alone is a request for help, not a mistake.
        build_parser().print_help()
        return exits.OK
    if argv[0] in DELEGATED:
        return _delegate(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except BrokenPipeError:
        # `ringleader render ... | head` closed the pipe early: exit as Unix tools killed by SIGPIPE do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return exits.signalled(signal.SIGPIPE)


if __name__ == "__main__":
    sys.exit(main())
