"""`ringleader profile FILE`: the model's profile on this machine, recorded from one worker; cli.py delegates here.

    ringleader profile examples/quickstart.yaml                  # writes profile.json
    ringleader profile sweep.yaml --trial 2 -o resnet.json       # trial 2's model, data and batch size
    ringleader profile cifar.yaml --data-dir ~/datasets --records-dir profiling/

Whatever the experiment's architecture, workers and sweep, its first trial (or `--trial N`) is run as ONE worker,
RingAllReduce with one rank: its model, data, batch size, optimizer and device, nothing to communicate. The local
launcher's real processes run it (launch/trials.py), warm-up first, then `--iterations` measured iterations, every
one traced (RINGLEADER_TRACE_ITERATIONS), and the trial's records are read as any trial's are
(planning/profile_records.py): the gradients' ready times are medians over those iterations. The profile file it
writes (docs/plan.md, "The profile") says what, where and with what versions it was recorded, never the
experiment's tracking URI. Nothing is sent to MLflow.

Exit status (contract/exits.py): 0 when the profile is written; 1 when the file is invalid, its worker asks for a
GPU none is visible here, or the run failed; 2 for options that cannot work; 128 + N after signal N. Importing
this module is cheap: the launcher and the readers are imported when `profile` is called.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import math
import os
import pathlib
import platform
import signal
import socket
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any, TextIO

from ringleader.contract import exits
from ringleader.launch.preflight import Refused, load_experiment

if TYPE_CHECKING:  # imported when `profile` is called: `ringleader validate` builds this parser and must stay instant
    from ringleader.api import Trial
    from ringleader.contract.layout import Outcome
    from ringleader.launch.trials import TrialRun
    from ringleader.planning.profiles import ModelProfile

DEFAULT_ITERATIONS = 20
"""DEFAULT_ITERATIONS measured after warm-up, each traced: the gradients' ready times are medians of 20 (the runtime's
default RINGLEADER_TRACE_ITERATIONS)."""
MIN_ITERATIONS = 3
DEFAULT_OUTPUT = "profile.json"
PROGRESS_SECONDS = 5.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE",
                        help="experiment file (a DistributedTrainingExperiment in YAML); '-' reads standard input")
    parser.add_argument("-o", "--output", metavar="FILE", default=DEFAULT_OUTPUT,
                        help=f"where the profile is written (default: {DEFAULT_OUTPUT})")
    parser.add_argument("--iterations", metavar="N", type=int, default=DEFAULT_ITERATIONS,
                        help="iterations measured after warm-up, each one traced: the profile's medians are over "
                             f"them (default {DEFAULT_ITERATIONS}; at least {MIN_ITERATIONS})")
    parser.add_argument("--trial", metavar="N", type=int, default=0,
                        help="of a sweep, the trial whose model, data and batch size are profiled (0-based, as "
                             "`ringleader validate` lists them; default 0)")
    parser.add_argument("--data-dir", metavar="DIR", default=".",
                        help="where a relative data.path is read from, as for `ringleader run` (default: the current "
                             "directory)")
    parser.add_argument("--records-dir", metavar="DIR",
                        help="keep the profiling trial's records and logs in DIR/<trial> (default: a temporary "
                             "directory, removed at the end)")
    parser.add_argument("--timeout-seconds", metavar="S", type=float,
                        help="stop the profiling trial if it runs longer than S seconds")
    # cli.py binds the user's MLflow credentials for the local commands; this one talks to no MLflow.
    parser.set_defaults(tracking_uri=None)


class _Stopped(BaseException):
    """SIGTERM reached the command (SIGINT arrives as KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    # The streams of the moment of the call, not of the import: a caller may have replaced sys.stdout since.
    out, err = out or sys.stdout, err or sys.stderr
    try:
        _check_options(args)
        name, trial, chosen = _chosen_trial(args, err)
        gpus = _gpus(name, trial)
        with _RecordsDirectory(args.records_dir) as directory:
            measured = _record(args, trial, directory, gpus, err)
            profile = _described(measured, args, name, chosen, trial, gpus)
        from ringleader.planning import profiles

        profiles.write(profile, args.output)
    except Refused as refused:
        print(str(refused), file=err)
        return refused.status
    except KeyboardInterrupt:
        print("\nringleader profile: interrupted; nothing written", file=err)
        return exits.signalled(signal.SIGINT)
    except _Stopped as stopped:
        print(f"ringleader profile: stopped by {stopped}; nothing written", file=err)
        return exits.signalled(stopped.signum)
    print(profile.summary(), file=out)
    print(f"Profile: {args.output}", file=out)
    return exits.OK


def _check_options(args: argparse.Namespace) -> None:
    if args.iterations < MIN_ITERATIONS:
        raise Refused(f"ringleader profile: --iterations must be at least {MIN_ITERATIONS} (the profile is their "
                      "medians)", exits.USAGE)
    if args.timeout_seconds is not None and not args.timeout_seconds > 0:
        raise Refused("ringleader profile: --timeout-seconds must be greater than 0", exits.USAGE)
    if not pathlib.Path(args.data_dir).is_dir():
        raise Refused(f"--data-dir {args.data_dir}: not a directory; pass the directory that holds the datasets",
                      exits.USAGE)
    parent = pathlib.Path(args.output).resolve().parent
    if not parent.is_dir() or pathlib.Path(args.output).is_dir():
        raise Refused(f"-o {args.output}: cannot be written (its directory does not exist, or it is a directory); "
                      "name a file in an existing directory", exits.USAGE)


def _chosen_trial(args: argparse.Namespace, err: TextIO) -> tuple[str, Trial, Trial]:
    """(the file as messages name it, the one-worker trial to run, the experiment's trial it was made from), the file
    checked as `ringleader validate` checks it."""
    name, _, expansion = load_experiment(args.file, err)
    trials = expansion.trials
    if not 0 <= args.trial < len(trials):
        raise Refused(f"{name}: --trial {args.trial} does not exist: the experiment has trials 0 to "
                      f"{len(trials) - 1}", exits.USAGE)
    chosen = trials[args.trial]
    if len(trials) > 1:
        described = ", ".join(f"{k}={v}" for k, v in chosen.parameters.items())
        print(f"{name}: a sweep of {len(trials)} trials: profiling trial {chosen.name} ({described}): its model, data "
              "and batch size (--trial N takes another)", file=err)
    try:
        return name, one_worker(chosen, args.iterations), chosen
    except ValueError as error:  # pydantic's ValidationError: what one worker cannot be made of
        raise Refused(f"{name}: trial {chosen.name} cannot be run as one worker: {str(error).splitlines()[0]}",
                      exits.FAILED) from error


def one_worker(trial: Trial, measured: int) -> Trial:
    """The trial as one RingAllReduce worker with nothing to communicate: its first worker's model, data, batch size,
    optimizer and device, that worker's share of its pod's CPUs, `measured` iterations after a warm-up of at least
    one; no evaluation, target, cap, compression or spec.profiling (the profiler would slow the traced iterations)."""
    from ringleader.api import spec as spec_
    from ringleader.api import trial as trial_
    from ringleader.api import variants

    first = trial.worker_slots()[0]
    document = trial.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    for unused in ("parameterServers", "network", "compression", "profiling", "tracking", "runPolicy", "scheduling",
                   "sweep"):
        document.pop(unused, None)
    document["architecture"] = variants.Architecture.RING_ALL_REDUCE.value
    document["sync"] = {"paradigm": variants.Paradigm.BSP.value}
    document["workers"] = {"replicas": 1, "ranksPerPod": 1, "resources": {
        "cpu": _cpu_share(first.resources.cpu, first.local_world_size), "memory": first.resources.memory,
        "gpu": min(first.resources.gpu, 1)}}
    model = document["model"]
    model.pop("evaluation", None)
    model.pop("target", None)
    model["warmupIterations"] = max(1, model.get("warmupIterations", 0))
    model["iterations"] = model["warmupIterations"] + measured
    return trial_.Trial(experiment=trial.experiment, namespace=trial.namespace,
                        name=trial_.trial_name(f"{trial.experiment}-profile", 0), index=0,
                        spec=spec_.ExperimentSpec.model_validate(document))


def _cpu_share(quantity: str, ranks: int) -> str:
    """A rank's share of its pod's CPUs, in millicores: the threads it trains with (runtime's cpu_threads)."""
    cores = float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)
    return f"{max(1, math.floor(1000 * cores / ranks))}m"


def _gpus(name: str, trial: Trial) -> list[str]:
    """The GPUs the worker may use; refused when it asks for one and none is visible here."""
    from ringleader.launch import devices

    asked = trial.worker_slots()[0].resources.gpu
    gpus = devices.visible(os.environ, [trial])
    if asked and not gpus:
        raise Refused(f"{name}: trial {trial.name}'s workers ask for a GPU (`resources.gpu`), and none is visible "
                      f"here ({devices.VISIBLE}, torch.cuda): profile on a machine with one, or set "
                      "`workers.resources.gpu: 0` for a CPU profile", exits.FAILED)
    return gpus


class _RecordsDirectory:
    """`DIR` when given (made if need be), else a temporary directory removed at the end."""

    def __init__(self, given: str | None):
        self.given, self.temporary = given, None if given else tempfile.TemporaryDirectory(prefix="ringleader-profile-")

    def __enter__(self) -> pathlib.Path:
        if self.temporary is not None:
            return pathlib.Path(self.temporary.name)
        path = pathlib.Path(self.given or ".").resolve()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise Refused(f"--records-dir {self.given}: cannot be made: {error.strerror or error}", exits.USAGE) \
                from None
        return path

    def __exit__(self, *_: Any) -> None:
        if self.temporary is not None:
            self.temporary.cleanup()


def _record(args: argparse.Namespace, trial: Trial, directory: pathlib.Path, gpus: list[str],
            err: TextIO) -> ModelProfile:
    """Run the trial's one worker as the local launcher runs a rank, and read its records."""
    from ringleader.contract import environment as contract
    from ringleader.launch.settings import LaunchSettings
    from ringleader.launch.trials import TrialRun
    from ringleader.planning import profiles
    from ringleader.tracking import schema

    measured, warmup = args.iterations, trial.spec.model.warmup_iterations
    environ = {**os.environ, contract.TRACE_ITERATIONS: str(measured)}
    settings = LaunchSettings(output_dir=str(directory), data_dir=args.data_dir, gpus=tuple(gpus))
    running = TrialRun(trial, directory, settings, environ, args.timeout_seconds)
    print(f"profiling {trial.spec.model.name} (batch {trial.spec.model.batch_size}) as one worker: {warmup} warm-up "
          f"and {measured} measured iterations, records in {running.directory}", file=err)
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        running.start()
        outcome = _wait(running, settings.poll_seconds, err)
    except BaseException:
        running.stop()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    if outcome.status != schema.FINISHED:
        kept = f"; its logs are in {running.directory / 'logs'}" if args.records_dir else \
            "; --records-dir DIR keeps its logs"
        raise Refused(f"ringleader profile: the profiling trial failed: {outcome.message or outcome.reason}{kept}",
                      exits.FAILED)
    try:
        return profiles.read(running.directory)
    except profiles.ProfileError as error:
        raise Refused(f"ringleader profile: the trial ran but its records make no profile: {error}",
                      exits.FAILED) from None


def _stop(signum: int, _frame: Any) -> None:
    raise _Stopped(signum)


def _wait(running: TrialRun, poll_seconds: float, err: TextIO) -> Outcome:
    """Poll the trial until it ends, a progress line on `err` every few seconds; its outcome."""
    total, said, last = running.total_iterations, -1, time.monotonic()
    while True:
        outcome = running.poll()
        done = running.progress()
        if outcome is not None:
            print(f"  iteration {done}/{total}: done in {running.elapsed():.0f} s", file=err)
            return outcome
        if done != said and time.monotonic() - last >= PROGRESS_SECONDS:
            print(f"  iteration {done}/{total} ({running.elapsed():.0f} s)", file=err)
            said, last = done, time.monotonic()
        time.sleep(poll_seconds)


def _described(measured: ModelProfile, args: argparse.Namespace, name: str, chosen: Trial, trial: Trial,
               gpus: list[str]) -> ModelProfile:
    """The records' profile, said as recorded here: the device by name, where it came from, the provenance."""
    device = _device(measured.device, gpus)
    warmup = trial.spec.model.warmup_iterations
    source = (f"recorded by `ringleader profile {name}`: trial {chosen.name}'s model {trial.spec.model.name} as one "
              f"worker on {device}, medians of {args.iterations} iterations after {warmup} of warm-up")
    return dataclasses.replace(measured, device=device, source=source,
                               provenance=_provenance(args, name, chosen, device))


def _device(recorded: str, gpus: list[str]) -> str:
    """"cpu (AMD EPYC 7B13, 1 thread)" or "cuda (NVIDIA H100 80GB HBM3)": what the worker's log said it ran on, with
    the processor's name."""
    if recorded.startswith("cuda") and gpus:
        import torch  # only for a GPU's name: it takes seconds

        return f"cuda ({torch.cuda.get_device_name(0)})"
    if recorded.startswith("cpu"):
        threads = recorded.removeprefix("cpu").strip().strip("()")
        return f"cpu ({cpu_model()}{', ' + threads if threads else ''})"
    return recorded


def cpu_model() -> str:
    """The processor's name (/proc/cpuinfo's model name), else what the platform says, else its architecture."""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown processor"


def _provenance(args: argparse.Namespace, name: str, chosen: Trial, device: str) -> dict[str, Any]:
    """Who, when and where: the versions, the machine, the date, the experiment file's sha256 and the trial taken
    (never the spec's tracking URI, nor anything of the shell's environment)."""
    from ringleader.contract import provenance

    file = pathlib.Path(args.file)
    try:
        sha256 = hashlib.sha256(file.read_bytes()).hexdigest() if args.file != "-" else None
    except OSError:
        sha256 = None
    return {
        "recordedBy": "ringleader profile", "ringleader": provenance.version("ringleader"),
        "python": platform.python_version(), "torch": provenance.version("torch"), "host": socket.gethostname(),
        "cpus": os.cpu_count(), "cpuQuota": provenance.cpus(), "device": device,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "experimentFile": name if name == "<stdin>" else file.name, "experimentSha256": sha256,
        "experiment": chosen.experiment, "trial": chosen.name, "parameters": dict(chosen.parameters),
        "iterations": args.iterations, "warmupIterations": max(1, chosen.spec.model.warmup_iterations),
        "load": provenance.load(),
    }
