"""`ringleader run FILE`: an experiment's trials as local processes, recorded into MLflow; cli.py delegates here.

    ringleader run examples/quickstart.yaml                   # into ./mlflow.db, records in ringleader-runs/
    ringleader run sweep.yaml --trial 2 --timeout-seconds 300 # one trial, with a deadline
    ringleader run sweep.yaml --stall-timeout-seconds 120     # a slow model: allow 2 min without an iteration
    ringleader run sweep.yaml --tracking-uri http://127.0.0.1:5000
    ringleader run mine.yaml --env HF_HOME                    # ranks get this shell variable too
    ringleader run cifar.yaml --data-dir ~/datasets           # data.path is read under ~/datasets
    ringleader run --resume ringleader-runs/quickstart-20250101-120000   # the trials left after a Ctrl-C
    make ui                                                   # then compare the runs (ringleader ui)

Exit status (contract/exits.py): 0 when every trial finished; 1 when the file is invalid, a trial
failed or the disk filled up; 2 when an option cannot work (--trial out of range, an --output-dir
that cannot hold a run); 128 + N after signal N (Ctrl-C: 130). Importing this module is cheap (the `ringleader`
parser is built with it); torch, MLflow and matplotlib are imported when `run` is called.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import pathlib
import shutil
import signal
import sys
from typing import TYPE_CHECKING, Sequence, TextIO

from ringleader.contract import environment as contract
from ringleader.contract import exits, redaction
from ringleader.launch import allowlist, devices
from ringleader.launch.preflight import Refused, load_experiment
from ringleader.launch.settings import LaunchSettings

if TYPE_CHECKING:  # imported when `run` is called: `ringleader validate` builds this parser and must stay instant
    from ringleader.api import DistributedTrainingExperiment, Trial
    from ringleader.contract.layout import Session
    from ringleader.tracking.settings import TrackingSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = LaunchSettings()
    parser.add_argument("file", metavar="FILE", nargs="?",
                        help="experiment file (a DistributedTrainingExperiment in YAML); '-' reads standard input")
    parser.add_argument("--resume", metavar="DIR",
                        help="instead of FILE: run the trials of this run directory that never ran or did not "
                             "finish, into the same directory, MLflow sweep run and report")
    parser.add_argument("--output-dir", metavar="DIR", default=defaults.output_dir,
                        help="where each run keeps its records, logs and traces, in a new subdirectory "
                             f"(default: {defaults.output_dir})")
    parser.add_argument("--tracking-uri", metavar="URI",
                        help="MLflow tracking URI (default: the experiment's tracking.uri, else "
                             "$MLFLOW_TRACKING_URI, else sqlite:///mlflow.db in this directory)")
    parser.add_argument("--trial", metavar="N", type=int, action="append",
                        help="run only trial N (0-based, as `ringleader validate` lists them); repeatable")
    parser.add_argument("--timeout-seconds", metavar="S", type=float,
                        help="fail a trial that runs longer than S seconds (also spec.runPolicy.activeDeadlineSeconds)")
    parser.add_argument("--env", metavar="NAME", action="append", dest="passed_variables",
                        help="give the ranks this variable of the shell too (by default they get PATH, HOME, the "
                             "locale and the runtime's knobs, never the whole shell: docs/security.md); repeatable")
    parser.add_argument("--data-dir", metavar="DIR", default=defaults.data_dir,
                        help="where a relative data.path is read from, as a cluster's pods read it under the "
                             "data volume (default: the current directory)")
    parser.add_argument("--stall-timeout-seconds", metavar="S", type=float,
                        help="fail a trial in which a rank stopped (no heartbeat) and recorded no iteration for S "
                             "seconds (5 x S for one that still beats), naming it "
                             f"(default: ${contract.STALL_TIMEOUT_SECONDS}, "
                             f"else {contract.DEFAULT_STALL_TIMEOUT_SECONDS:g})")


@dataclasses.dataclass(frozen=True)
class _Launch:
    """What `run` checked and prepared before any rank starts."""

    experiment: DistributedTrainingExperiment
    skipped: list[tuple[dict[str, str], str]]
    trials: list[Trial]
    name: str
    """The file as messages name it."""
    source: str
    environ: dict[str, str]
    settings: LaunchSettings
    tracking_settings: TrackingSettings
    tracking_uri: str
    session_dir: pathlib.Path
    resumed: Session | None = None
    """resumed: the session `--resume` continues; None for a new run."""


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    # The streams of the moment of the call, not of the import: a caller may have replaced sys.stdout since.
    out, err = out or sys.stdout, err or sys.stderr
    try:
        launch = _prepare(args, out, err)
    except Refused as refused:
        print(str(refused), file=err)
        return refused.status
    _announce(launch, out, err)
    try:
        return _run_and_report(args, launch, out)
    except KeyboardInterrupt:
        # A second Ctrl-C, while publishing: every rank is already stopped; the records are on disk.
        print(f"\ninterrupted while publishing; the records are in {shown(launch.session_dir)}: "
              f"ringleader publish {shown(launch.session_dir)}", file=out)
        return exits.signalled(signal.SIGINT)
    except OSError as error:  # a full disk, most likely; every rank is stopped by now
        print(f"ringleader run stopped: {_why(error)}; what was recorded is kept in {shown(launch.session_dir)}: "
              f"once there is room, `ringleader publish {shown(launch.session_dir)}` publishes it", file=err)
        return exits.FAILED


def _prepare(args: argparse.Namespace, out: TextIO, err: TextIO) -> _Launch:
    """Checks the file, then the options, then the machine (raising `Refused`), and opens the session directory."""
    # Imported here, not at the top: `ringleader validate` builds this parser and must stay instant.
    from ringleader.api import reading

    if (args.file is None) == (args.resume is None):
        raise Refused("ringleader run: give an experiment FILE, or --resume DIR (a run directory), not both",
                      exits.USAGE)
    if args.resume is not None:
        return _prepare_resume(args, out, err)
    name, experiment, expansion = load_experiment(args.file, err)
    # Only now MLflow (and, in _run_and_report, torch and matplotlib): a file that cannot run is refused in a moment.
    from ringleader.tracking.settings import TrackingSettings, resolve_uri

    trials = _chosen_trials(args, expansion.trials, name)
    environ, settings = _environ_and_settings(args, trials, name, err)
    output_dir = pathlib.Path(settings.output_dir).resolve()
    try:
        session_dir = new_session_dir(output_dir, experiment.name)
    except OSError as error:
        raise Refused(f"--output-dir {settings.output_dir}: cannot create a run directory in it: {_why(error)}; "
                      "choose a writable directory", exits.USAGE) from error
    close_abandoned(output_dir, session_dir, out, err)
    return _Launch(experiment, expansion.skipped, trials, name,
                   name if args.file == reading.STDIN else str(pathlib.Path(args.file).resolve()), environ, settings,
                   TrackingSettings(), resolve_uri(args.tracking_uri, experiment.spec.tracking.uri), session_dir)


def _environ_and_settings(args: argparse.Namespace, trials: list[Trial], name: str,
                          err: TextIO) -> tuple[dict[str, str], LaunchSettings]:
    for flag, value in (("--timeout-seconds", args.timeout_seconds),
                        ("--stall-timeout-seconds", args.stall_timeout_seconds)):
        if value is not None and not value > 0:
            raise Refused(f"{flag} must be greater than 0", exits.USAGE)
    environ = dict(os.environ)
    if args.stall_timeout_seconds is not None:  # the ranks read it (runtime/settings.py)
        environ[contract.STALL_TIMEOUT_SECONDS] = str(args.stall_timeout_seconds)
    return environ, _settings(args, _passed_variables(args, err), trials, name)


def _prepare_resume(args: argparse.Namespace, out: TextIO, err: TextIO) -> _Launch:
    """The trials of the run directory `--resume` names that are left to run, into that same directory."""
    from ringleader import api
    from ringleader.contract import layout
    from ringleader.launch import sweep
    from ringleader.tracking import abandoned
    from ringleader.tracking.settings import TrackingSettings, resolve_uri

    directory = pathlib.Path(args.resume).resolve()
    name = shown(directory)
    if args.trial:
        raise Refused("--resume runs every trial left in the run directory: leave out --trial", exits.USAGE)
    try:
        session = layout.Session.load(directory)
    except FileNotFoundError:
        raise Refused(f"--resume {args.resume}: not a run directory of `ringleader run` (no {layout.SESSION_FILE}); "
                      "pass one of the directories in ringleader-runs/", exits.USAGE) from None
    except api.SpecError as error:  # said as any invalid experiment is, naming the file once
        raise Refused(str(api.SpecError(f"--resume {args.resume}: {layout.SESSION_FILE}", error.problems)),
                      exits.FAILED) from error
    except (api.LoadError, KeyError) as error:
        raise Refused(f"--resume {args.resume}: {layout.SESSION_FILE} is damaged: {error}", exits.FAILED) from error
    if abandoned.is_running(directory):
        raise Refused(f"{name}: another `ringleader run` is running it now; resume it once that one ends",
                      exits.USAGE)
    left = set(sweep.left_to_run(session))
    if not left:
        raise Refused(f"{name}: every trial finished; nothing to resume", exits.USAGE)
    trials = [t for t in api.expand(session.experiment).trials if t.name in left]
    _refuse_network_caps(name, trials)
    environ, settings = _environ_and_settings(args, trials, name, err)
    close_abandoned(directory.parent, directory, out, err)
    return _Launch(session.experiment, [], trials, name, session.source or name, environ, settings,
                   TrackingSettings(), resolve_uri(args.tracking_uri, session.tracking_uri), directory, session)


def _chosen_trials(args: argparse.Namespace, trials: list[Trial], name: str) -> list[Trial]:
    """The trials `--trial` names (all by default), once the launcher can run them all."""
    _refuse_network_caps(name, trials)
    if not args.trial:
        return trials
    wrong = [n for n in args.trial if not 0 <= n < len(trials)]
    if wrong:
        raise Refused(f"{name}: --trial {wrong[0]} does not exist: the experiment has trials 0 to {len(trials) - 1}",
                      exits.USAGE)
    return [trials[n] for n in sorted(set(args.trial))]


def _refuse_network_caps(source: str, trials: Sequence[Trial]) -> None:
    """Refused when a trial's cap is to be enforced by the network (`spec.network.enforcement: Network`).

    Local ranks talk over the loopback, which no CNI shapes. Emulating instead would measure something else (the
    runtime sleeps; the kernel's token bucket queues, bursts and paces TCP), so such a trial is refused rather than
    quietly run another way."""
    from ringleader.api.spec import BandwidthEnforcement

    enforced = [t for t in trials if t.spec.network.enforcement == BandwidthEnforcement.NETWORK]
    if enforced:
        raise Refused(f"{source}: `spec.network.enforcement` is Network (trial {enforced[0].name}), which `ringleader "
                      "run` cannot apply: its ranks are local processes on the loopback, which no network plugin "
                      "shapes. Set `network.enforcement: Emulated` (or leave it out) to have the runtime emulate the "
                      "cap locally, or apply the experiment to a cluster whose CNI chains the bandwidth plugin "
                      "(docs/operator.md)", exits.FAILED)


def _placement_note(trials: Sequence[Trial]) -> str | None:
    """One line saying that the trials' `spec.scheduling.placement` does not apply on one machine; None when none
    asks for one."""
    placed = sorted({t.spec.scheduling.placement.label() for t in trials if not t.spec.scheduling.placement.is_any()})
    if not placed:
        return None
    return (f"note: `scheduling.placement` ({', '.join(placed)}) does not apply to `ringleader run`: every rank runs "
            "on this machine, so every exchange crosses its loopback, not a network; apply the experiment to a "
            "cluster to place ranks on nodes")


def _passed_variables(args: argparse.Namespace, err: TextIO) -> tuple[str, ...]:
    """The `--env` names, once each; a name that may not pass is refused, one this shell lacks is warned of."""
    passed = tuple(dict.fromkeys(args.passed_variables or ()))
    refusal = next((r for r in map(allowlist.refusal, passed) if r), None)
    if refusal:
        raise Refused(refusal, exits.USAGE)
    for variable in passed:
        if variable not in os.environ:
            print(f"warning: --env {variable} is not set in this shell; the ranks will not have it", file=err)
    return passed


def _settings(args: argparse.Namespace, passed: tuple[str, ...], trials: list[Trial], name: str) -> LaunchSettings:
    """The launcher's settings, once the data directory exists and the GPUs the trials need are visible."""
    if not pathlib.Path(args.data_dir).is_dir():
        raise Refused(f"--data-dir {args.data_dir}: not a directory; pass the directory that holds the datasets",
                      exits.USAGE)
    gpus = devices.visible(os.environ, trials)
    refused = devices.refusal(name, trials, gpus)
    if refused:
        raise Refused(refused, exits.FAILED)
    return LaunchSettings(output_dir=args.output_dir, passed_variables=passed, data_dir=args.data_dir,
                          gpus=tuple(gpus))


def _announce(launch: _Launch, out: TextIO, err: TextIO) -> None:
    """What runs where, before it starts; a warning when the file, not the user, chose where MLflow is."""
    from ringleader.tracking import credentials

    uri = redaction.redact(launch.tracking_uri)
    withheld = credentials.withheld_from(launch.tracking_uri)
    if withheld:
        print(f"warning: MLflow at {uri} is named by {launch.name}, not by you: your {', '.join(withheld)} "
              f"stay(s) here; to send them there, run again with --tracking-uri {uri}", file=err)
    count = f"{len(launch.trials)} trial{'s' if len(launch.trials) != 1 else ''}"
    if launch.resumed is not None:
        count = f"resuming {count} left"
    print(f"{launch.name}: {count} of {launch.experiment.name}; records in {shown(launch.session_dir)}; MLflow: {uri}",
          file=out)
    for parameters, reason in launch.skipped:
        print(f"  skipped ({', '.join(f'{k}={v}' for k, v in parameters.items())}): {reason}", file=out)
    placed = _placement_note(launch.trials)
    if placed:
        print(placed, file=out)
    out.flush()


def _run_and_report(args: argparse.Namespace, launch: _Launch, out: TextIO) -> int:
    from ringleader.report import tables
    from ringleader.launch import sweep
    from ringleader.tracking import schema, sessions

    session_dir, tracking_uri = launch.session_dir, launch.tracking_uri
    if launch.resumed is not None:
        result = sweep.resume_sweep(launch.resumed, launch.trials, tracking_uri, launch.settings,
                                    launch.tracking_settings, launch.environ, args.timeout_seconds, out=out)
    else:
        result = sweep.run_sweep(launch.experiment, launch.trials, session_dir, tracking_uri, launch.settings,
                                 launch.tracking_settings, launch.environ, args.timeout_seconds, source=launch.source,
                                 out=out)
    print("", file=out)
    table = tables.format_table(result.rows)
    print(table, end="", file=out)
    (session_dir / "comparison.txt").write_text(table)
    print("", file=out)
    publishing = result.tracker
    if publishing.away is None and publishing.experiment_id and publishing.parent_run_id:
        print(f'MLflow: experiment "{launch.experiment.mlflow_experiment_name()}" (id {publishing.experiment_id}), '
              f"sweep run {publishing.parent_run_id}", file=out)
        print(f"Open it: {how_to_open(tracking_uri, publishing.experiment_id, publishing.parent_run_id)}", file=out)
        html = sessions.report_directory(session_dir) / "report.html"
        if html.is_file():
            print(f"Report: {shown(html)}", file=out)
    else:
        # Credentials in the URI are never written down: a later publish needs them given again.
        again = " --tracking-uri URI" if redaction.carries_credentials(tracking_uri) else ""
        print(f"MLflow at {redaction.redact(tracking_uri)} is unavailable; nothing is lost: the records are in "
              f"{shown(session_dir)}. When it is back: ringleader publish {shown(session_dir)}{again}", file=out)
    print_answer(session_dir, out)
    # Last of all where trials are left: what to do next.
    left = [row.trial for row in result.rows if row.status != schema.FINISHED]
    if left:
        print(f"{len(left)} of {len(result.rows)} trials did not finish ({', '.join(left)}); to run them into this "
              f"sweep: ringleader run --resume {shown(session_dir)}", file=out)
    return result.exit_code


CONSOLE_FINDINGS = 5
"""Findings the console ends on at most: the answer, where the time goes, what is not settled; the rest is in the
report."""


def print_answer(session_dir: pathlib.Path, out: TextIO) -> None:
    """The session's findings (report.findings, the report's first lines), in their order: what the data settle
    first, then where the time goes, then what they do not settle and what would. Read from the run directory, so
    they are said whether MLflow took the run or not."""
    from ringleader.report import findings
    from ringleader.tracking import reading

    found = findings.findings(reading.from_directory(session_dir))
    if not found:
        return
    print("", file=out)
    print("The answer:", file=out)
    for finding in found[:CONSOLE_FINDINGS]:
        print(f"- {finding.text}", file=out)
    if len(found) > CONSOLE_FINDINGS:
        print(f"  ({len(found) - CONSOLE_FINDINGS} more in the report: ringleader report {shown(session_dir)})",
              file=out)


def close_abandoned(output_dir: pathlib.Path, current: pathlib.Path, out: TextIO, err: TextIO) -> None:
    """Close and publish the sessions in `output_dir` whose launcher died (tracking/abandoned.py), so their MLflow
    runs do not stay RUNNING forever."""
    from ringleader.contract import layout
    from ringleader.tracking import abandoned, replay

    for directory in layout.find_sessions(output_dir):
        try:
            if directory == current or not abandoned.close_if_abandoned(directory):
                continue
            replayed = replay.publish_dir(directory)
        except OSError as error:
            print(f"{shown(directory)}: its `ringleader run` ended without recording its end, and closing it failed: "
                  f"{_why(error)}; later: ringleader publish {shown(directory)}", file=err)
            continue
        print(f"{shown(directory)}: its `ringleader run` ended without recording its end; closed from the "
              f"records on disk{', and published' if replayed.ok else ''}", file=out)
        for _, problem in replayed.unavailable:
            print(f"{shown(directory)}: not published: {problem}; later: ringleader publish {shown(directory)}",
                  file=err)


def _why(error: OSError) -> str:
    """"/runs/x: No space left on device": the path and the system's reason, without Python's "[Errno 28]"."""
    where = f"{error.filename}: " if error.filename else ""
    return f"{where}{error.strerror or error}"


# A file name holds 255 bytes and an experiment's name up to 253 characters: longer names keep a prefix and a hash.
MAX_SESSION_PREFIX = 100


def new_session_dir(output_dir: pathlib.Path, experiment_name: str) -> pathlib.Path:
    """<output>/<experiment>-<YYYYmmdd-HHMMSS>[-n]: a fresh directory per run, so records never mix."""
    from ringleader.api.trial import bounded_name

    prefix = bounded_name(experiment_name, MAX_SESSION_PREFIX)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    output_dir.mkdir(parents=True, exist_ok=True)
    for attempt in range(1000):
        candidate = output_dir / (f"{prefix}-{stamp}" + (f"-{attempt}" if attempt else ""))
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue
    raise FileExistsError(f"no free session directory name in {output_dir}")


def shown(path: pathlib.Path) -> str:
    """`path` relative to the working directory when it is inside it: shorter to read and to paste."""
    try:
        return str(path.relative_to(pathlib.Path.cwd()))
    except ValueError:
        return str(path)


def how_to_open(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    """Where to see the sweep run: its page on a tracking server, or for a file store the command that serves it
    (`make ui` in a checkout whose Makefile has it, for ./mlflow.db; else `ringleader ui`) and the page it will serve;
    credentials in the URI masked."""
    from ringleader.tracking import schema

    tracking_uri = redaction.redact(tracking_uri)
    if tracking_uri.startswith(("http://", "https://")):
        return schema.ui_url(tracking_uri, experiment_id, run_id)
    if tracking_uri.startswith("sqlite:///"):
        tracking_uri = "sqlite:///" + shown(pathlib.Path(tracking_uri[len("sqlite:///"):]))
    command = f"{venv_command('ringleader')} ui --tracking-uri {tracking_uri}"
    if tracking_uri == MAKE_UI_STORE and _makefile_has_ui(pathlib.Path.cwd() / "Makefile"):
        command = "make ui"
    return f"{command}\n      then open {schema.ui_url(LOCAL_UI, experiment_id, run_id)}"


MAKE_UI_STORE = "sqlite:///mlflow.db"
"""MAKE_UI_STORE is the store the Makefile's `ui` target serves (what `make run` records into)."""


def _makefile_has_ui(makefile: pathlib.Path) -> bool:
    try:
        return any(line.startswith("ui:") for line in makefile.read_text().splitlines())
    except OSError:
        return False


def venv_command(name: str) -> str:
    """`name` when the shell finds this environment's own, else its full path: the line is pasted into a
    fresh shell, where the cached venv that `make run` used is not on PATH."""
    beside = pathlib.Path(sys.executable).parent / name
    on_path = shutil.which(name)
    if not beside.exists() or (on_path is not None and os.path.samefile(on_path, beside)):
        return name
    return str(beside)


LOCAL_UI = "http://127.0.0.1:5000"  # where `mlflow ui` serves by default
