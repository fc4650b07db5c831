"""Runs a sweep's trials as local processes, one after another or a few at once, and reports them; used by
launch/cli.py.

Trials start in expansion order, at most sweep.maxParallel at a time and only while their ranks fit
on the machine's cores. A failed trial does not stop the sweep. SIGINT and SIGTERM stop every rank
(the trials in flight end KILLED), publish what was recorded, and return 128 + the signal number.
`resume_sweep` runs a session's trials that never ran or did not finish into the same directory and MLflow
sweep run (`ringleader run --resume DIR`); a trial's unfinished attempt is kept under <session>/attempts/.
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib
import signal
import sys
import time
from typing import Any, Mapping, TextIO

from ringleader.models import eta
from ringleader.models import summary as summary_
from ringleader.report import tables
from ringleader.api.experiment import DistributedTrainingExperiment
from ringleader.api.trial import Trial
from ringleader.contract import exits, layout, provenance
from ringleader.contract.outcomes import INTERRUPTED, sweep_reason
from ringleader.launch import display, tracker
from ringleader.launch.settings import LaunchSettings
from ringleader.launch.trials import TrialRun
from ringleader.tracking import abandoned, schema, sessions
from ringleader.tracking.settings import TrackingSettings


class Interrupted(BaseException):
    """SIGINT or SIGTERM reached the launcher (BaseException, like KeyboardInterrupt: nothing may swallow it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclasses.dataclass
class SweepOutcome:
    session_dir: pathlib.Path
    outcomes: dict[str, layout.Outcome]
    rows: list[tables.ComparisonRow]
    interrupted_by: int | None
    tracker: tracker.Tracker

    @property
    def exit_code(self) -> int:
        if self.interrupted_by is not None:
            return exits.signalled(self.interrupted_by)
        return exits.OK if all(o.status == schema.FINISHED for o in self.outcomes.values()) else exits.FAILED


class _Signals:
    """Turns the first SIGINT/SIGTERM into Interrupted; later ones are ignored until the ranks are stopped."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}  # what signal.signal returned: a handler, SIG_DFL or None

    def __enter__(self) -> _Signals:
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, _frame) -> None:
        if self.received is None:
            self.received = signum
            raise Interrupted(signum)

    def __exit__(self, *_) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def run_sweep(experiment: DistributedTrainingExperiment, trials: list[Trial],
              session_dir: pathlib.Path, tracking_uri: str, settings: LaunchSettings,
              tracking_settings: TrackingSettings, environ: Mapping[str, str],
              deadline_seconds: float | None = None, source: str | None = None,
              out: TextIO = sys.stdout) -> SweepOutcome:
    session, started = _open_session(session_dir, experiment, tracking_uri, trials, source)
    return _run(session, trials, started, {}, settings, tracking_settings, environ, deadline_seconds, out)


def resume_sweep(session: layout.Session, trials: list[Trial], tracking_uri: str, settings: LaunchSettings,
                 tracking_settings: TrackingSettings, environ: Mapping[str, str],
                 deadline_seconds: float | None = None, out: TextIO = sys.stdout) -> SweepOutcome:
    """Run `trials` (the session's trials left: `left_to_run`) into `session`; the sweep's outcome then covers every
    trial, those that finished before included."""
    session, started, earlier = _reopen_session(session, tracking_uri, {t.name for t in trials})
    return _run(session, trials, started, earlier, settings, tracking_settings, environ, deadline_seconds, out)


def left_to_run(session: layout.Session) -> list[str]:
    """The session's trials that never ran or did not finish, in the sweep's order."""
    left = []
    for name in session.trials:
        outcome = layout.read_outcome(session.directory / name)
        if outcome is None or outcome.status != schema.FINISHED:
            left.append(name)
    return left


def _run(session: layout.Session, trials: list[Trial], started: float, earlier: dict[str, layout.Outcome],
         settings: LaunchSettings, tracking_settings: TrackingSettings, environ: Mapping[str, str],
         deadline_seconds: float | None, out: TextIO) -> SweepOutcome:
    session_dir, experiment = session.directory, session.experiment
    screen = display.ProgressDisplay(settings, out, len(trials))
    publishing = tracker.Tracker(session, tracking_settings, screen.message)
    publishing.open()
    schedule = _Schedule(trials, session_dir, settings, environ, deadline_seconds,
                         experiment.spec.sweep.max_parallel if experiment.spec.sweep else 1, publishing, screen)
    interrupted_by = schedule.run_all()
    # Ranks are gone: from here, a second Ctrl-C interrupts publishing only (the records stay on disk).
    unsaved = next((run.unsaved for run in schedule.started if run.unsaved is not None), None)
    if unsaved is not None:
        raise unsaved
    for _, run in schedule.running:  # the trials stopped, not ended
        publishing.trial_ended(run.directory)
    outcomes = {**earlier, **schedule.outcomes}
    session = dataclasses.replace(session, provenance=provenance.ended(session.provenance))
    session.save()
    publishing.session = session
    layout.write_outcome(session_dir, _sweep_outcome(outcomes, session.trials, interrupted_by, started))
    rows = sessions.comparison_rows(session)
    publishing.session_ended()
    return SweepOutcome(session_dir, outcomes, rows, interrupted_by, publishing)


def _open_session(session_dir: pathlib.Path, experiment: DistributedTrainingExperiment,
                  tracking_uri: str, trials: list[Trial], source: str | None) -> tuple[layout.Session, float]:
    """The session's directory and files, marked RUNNING; returns the session and when it started."""
    session_dir.mkdir(parents=True, exist_ok=True)
    # Held until this process ends: a later run or publish closes the session if this one dies first.
    abandoned.hold(session_dir)
    started = time.time()
    session = layout.Session(session_dir, experiment, tracking_uri, [t.name for t in trials], source, [started],
                             provenance.at_start(provenance.command_line(), source))
    session.save()
    layout.write_outcome(session_dir, layout.Outcome(schema.RUNNING, started))
    return session, started


ATTEMPTS_DIR = "attempts"
"""ATTEMPTS_DIR keeps, per resumed trial, the directory of its unfinished attempt (<trial>-<n>): never overwritten."""


def _reopen_session(session: layout.Session, tracking_uri: str,
                    rerun: set[str]) -> tuple[layout.Session, float, dict[str, layout.Outcome]]:
    """The session marked RUNNING again: its lock held, the unfinished attempts of `rerun` moved aside, the new start
    recorded, its sweep-wide publishing (comparison, report, status) to be done again. Returns the session, when the
    sweep first started, and the outcomes of its trials that stay as they are."""
    directory = session.directory
    abandoned.close_if_abandoned(directory)  # a launcher that died left it RUNNING: its trials are closed first
    abandoned.hold(directory)  # BlockingIOError while another launcher runs it
    earlier = {}
    for name in session.trials:
        outcome = layout.read_outcome(directory / name)
        if name not in rerun:
            if outcome is not None:
                earlier[name] = outcome
        elif (directory / name).exists():
            _set_aside(directory, name)
    now = time.time()
    session = dataclasses.replace(session, tracking_uri=tracking_uri, start_times=[*session.start_times, now],
                                  provenance=provenance.resumed(session.provenance, provenance.at_start(
                                      provenance.command_line(), session.source)))
    session.save()
    first = layout.read_outcome(directory)
    started = first.start_time if first else now
    sessions.reopen(directory)
    layout.write_outcome(directory, layout.Outcome(schema.RUNNING, started))
    return session, started, earlier


def _set_aside(directory: pathlib.Path, name: str) -> None:
    attempts = directory / ATTEMPTS_DIR
    attempts.mkdir(exist_ok=True)
    attempt = 1
    while (attempts / f"{name}-{attempt}").exists():
        attempt += 1
    (directory / name).rename(attempts / f"{name}-{attempt}")


@dataclasses.dataclass
class _Schedule:
    """The sweep's trials on their way from pending through running to ended: the state of `run_all`'s loop."""

    trials: list[Trial]
    session_dir: pathlib.Path
    settings: LaunchSettings
    environ: Mapping[str, str]
    deadline_seconds: float | None
    max_parallel: int
    publishing: tracker.Tracker
    screen: display.ProgressDisplay
    pending: collections.deque[tuple[int, Trial]] = dataclasses.field(init=False)
    running: list[tuple[int, TrialRun]] = dataclasses.field(default_factory=list)
    started: list[TrialRun] = dataclasses.field(default_factory=list)
    outcomes: dict[str, layout.Outcome] = dataclasses.field(default_factory=dict)
    finished: list[eta.Finished] = dataclasses.field(default_factory=list)
    """What the ETA of the trials still to run is made of."""

    def __post_init__(self) -> None:
        self.pending = collections.deque(enumerate(self.trials, 1))

    def run_all(self) -> int | None:
        """Every trial to its end, or until a signal stops them all; returns that signal's number, if one came."""
        interrupted_by = None
        with _Signals() as signals:
            try:
                while self.pending or self.running:
                    self._start_ready()
                    time.sleep(self.settings.poll_seconds)
                    self._collect_ended()
                    self.screen.update(self.running, [trial for _, trial in self.pending], self.finished)
            except Interrupted as interrupt:
                interrupted_by = interrupt.signum
                self.screen.message(f"{signal.Signals(interrupt.signum).name}: stopping the running trials")
            finally:
                # Also on any error of the launcher itself: no rank outlives it.
                self._stop_running(announce=interrupted_by is not None)
                self.screen.close()
                if signals.received is not None and interrupted_by is None:
                    interrupted_by = signals.received
        return interrupted_by

    def _start_ready(self) -> None:
        """The next pending trials, while they fit beside those running."""
        while self.pending and can_start(self.pending[0][1].world_size, [r.trial.world_size for _, r in self.running],
                                         self.max_parallel, self.settings.cores):
            position, trial = self.pending.popleft()
            run = TrialRun(trial, self.session_dir, self.settings, self.environ,
                           _deadline(trial, self.deadline_seconds))
            run.write_files()
            self.publishing.trial_started(run.directory)
            self.running.append((position, run))  # before start(): an interrupt during it stops its ranks
            self.started.append(run)
            run.start()
            self.screen.message(f"[{position}/{len(self.trials)}] {run.label}: started {trial.world_size} ranks")

    def _collect_ended(self) -> None:
        for position, run in list(self.running):
            outcome = run.poll()
            if outcome is None:
                continue
            self.running.remove((position, run))
            self.outcomes[run.trial.name] = outcome
            self.screen.message(_ended(position, len(self.trials), run, outcome))
            self.publishing.trial_ended(run.directory)
            ended = display.finished_for_eta(run, outcome)
            if ended is not None:
                self.finished.append(ended)

    def _stop_running(self, announce: bool) -> None:
        for position, run in self.running:
            outcome = run.stop()
            self.outcomes[run.trial.name] = outcome
            if announce:
                self.screen.message(_ended(position, len(self.trials), run, outcome))


def _sweep_outcome(outcomes: dict[str, layout.Outcome], planned: list[str], interrupted_by: int | None,
                   started: float) -> layout.Outcome:
    """The session's end: KILLED by a signal, FINISHED when every trial finished, else FAILED and why; the message
    names every trial not finished, those that never ran included."""
    if interrupted_by is not None:
        status = schema.KILLED
    elif all(o.status == schema.FINISHED for o in outcomes.values()) and len(outcomes) == len(planned):
        status = schema.FINISHED
    else:
        status = schema.FAILED
    failed = [name for name, o in outcomes.items() if o.status != schema.FINISHED]
    never = [name for name in planned if name not in outcomes]
    reason = {schema.FINISHED: None, schema.KILLED: INTERRUPTED,
              schema.FAILED: sweep_reason(outcomes[name].reason for name in failed)}[status]
    message = "; ".join(part for part in (f"trials not finished: {', '.join(failed)}" if failed else "",
                                           f"never ran: {', '.join(never)}" if never else "") if part)
    return layout.Outcome(status, started, time.time(), reason=reason, message=message or None)


def can_start(ranks: int, running: list[int], max_parallel: int, cores: int) -> bool:
    """Whether a trial of `ranks` ranks may start beside trials of `running` ranks: always when none runs (a
    trial larger than the machine still runs, alone), else within maxParallel and the cores."""
    return not running or (len(running) < max_parallel and sum(running) + ranks <= cores)


def _deadline(trial: Trial, flag_seconds: float | None) -> float | None:
    """The trial's deadline: --timeout-seconds, runPolicy.activeDeadlineSeconds, whichever is shorter."""
    limits = [s for s in (flag_seconds, trial.spec.run_policy.active_deadline_seconds) if s is not None]
    return min(limits) if limits else None


def _ended(position: int, total: int, run: TrialRun, outcome: layout.Outcome) -> str:
    seconds = (outcome.end_time or time.time()) - outcome.start_time
    text = f"[{position}/{total}] {run.label}: {outcome.status} in {seconds:.1f} s"
    if outcome.status == schema.FINISHED:
        summary = summary_.read(layout.read_json(run.directory / layout.SUMMARY_FILE))
        throughput, p50 = (summary.timing.throughput, summary.timing.iteration_time_p50_seconds) if summary else \
            (None, None)
        if throughput is not None and p50 is not None:
            text += f": {throughput:.1f} samples/s, iteration p50 {p50 * 1000:.1f} ms"
        return text
    return f"{text}: {outcome.message}" if outcome.message else text
