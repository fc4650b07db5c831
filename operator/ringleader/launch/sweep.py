"""Runs a sweep's trials as local processes, one after another or a few at once, and reports them; used by launch/cli.py.

Trials start in expansion order, at most sweep.maxParallel at a time and only while their ranks fit
on the machine's cores. A failed trial does not stop the sweep. SIGINT and SIGTERM stop every rank
(the trials in flight end KILLED), publish what was recorded, and return 128 + the signal number.
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib
import signal
import sys
import time
from typing import Any, Mapping, TextIO

from ringleader.analysis import eta, tables
from ringleader.api import experiment as experiment_
from ringleader.api import trial as trial_
from ringleader.contract import exits, keys, layout
from ringleader.contract import outcomes as outcomes_
from ringleader.launch import display, tracker
from ringleader.launch import settings as settings_
from ringleader.launch import trials as trials_
from ringleader.tracking import abandoned, schema, sessions
from ringleader.tracking import settings as tracking_settings_


class Interrupted(BaseException):
    """SIGINT or SIGTERM reached the launcher (BaseException, like KeyboardInterrupt: nothing may swallow it)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclasses.dataclass
class SweepResult:
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


def run_sweep(experiment: experiment_.DistributedTrainingExperiment, trials: list[trial_.Trial],
              session_dir: pathlib.Path, tracking_uri: str, settings: settings_.LaunchSettings,
              tracking_settings: tracking_settings_.TrackingSettings, environ: Mapping[str, str],
              deadline_seconds: float | None = None, source: str | None = None,
              out: TextIO = sys.stdout) -> SweepResult:
    session_dir.mkdir(parents=True, exist_ok=True)
    # Held until this process ends: a later run or publish closes the session if this one dies first.
    abandoned.hold(session_dir)
    session = layout.Session(session_dir, experiment, tracking_uri, [t.name for t in trials], source)
    session.save()
    started = time.time()
    layout.write_outcome(session_dir, layout.Outcome(schema.RUNNING, started))
    screen = display.ProgressDisplay(settings, out, len(trials))
    publishing = tracker.Tracker(session, tracking_settings, screen.message)
    publishing.open()

    max_parallel = experiment.spec.sweep.max_parallel if experiment.spec.sweep else 1
    pending = collections.deque(enumerate(trials, 1))
    running: list[tuple[int, trials_.TrialRun]] = []
    started_runs: list[trials_.TrialRun] = []
    outcomes: dict[str, layout.Outcome] = {}
    finished: list[eta.Finished] = []  # what the ETA of the trials still to run is made of
    interrupted_by = None

    with _Signals() as signals:
        try:
            while pending or running:
                while pending and can_start(pending[0][1].world_size, [r.trial.world_size for _, r in running],
                                            max_parallel, settings.cores):
                    position, trial = pending.popleft()
                    run = trials_.TrialRun(trial, session_dir, settings, environ,
                                           _deadline(trial, deadline_seconds))
                    run.write_files()
                    publishing.trial_started(run.directory)
                    running.append((position, run))  # before start(): an interrupt during it stops its ranks
                    started_runs.append(run)
                    run.start()
                    screen.message(f"[{position}/{len(trials)}] {run.label}: started {trial.world_size} ranks")
                time.sleep(settings.poll_seconds)
                for position, run in list(running):
                    outcome = run.poll()
                    if outcome is None:
                        continue
                    running.remove((position, run))
                    outcomes[run.trial.name] = outcome
                    screen.message(_ended(position, len(trials), run, outcome))
                    publishing.trial_ended(run.directory)
                    ended = display.finished_for_eta(run, outcome)
                    if ended is not None:
                        finished.append(ended)
                screen.update(running, [trial for _, trial in pending], finished)
        except Interrupted as interrupt:
            interrupted_by = interrupt.signum
            screen.message(f"{signal.Signals(interrupt.signum).name}: stopping the running trials")
        finally:
            # Also on any error of the launcher itself: no rank outlives it.
            for position, run in running:
                outcome = run.stop()
                outcomes[run.trial.name] = outcome
                if interrupted_by is not None:
                    screen.message(_ended(position, len(trials), run, outcome))
            screen.close()
            if signals.received is not None and interrupted_by is None:
                interrupted_by = signals.received
    # Ranks are gone: from here, a second Ctrl-C interrupts publishing only (the records stay on disk).
    unsaved = next((run.unsaved for run in started_runs if run.unsaved is not None), None)
    if unsaved is not None:
        raise unsaved
    for _, run in running:
        publishing.trial_ended(run.directory)
    if interrupted_by is not None:
        status = schema.KILLED
    elif all(o.status == schema.FINISHED for o in outcomes.values()) and len(outcomes) == len(trials):
        status = schema.FINISHED
    else:
        status = schema.FAILED
    failed = [name for name, o in outcomes.items() if o.status != schema.FINISHED]
    reason = {schema.FINISHED: None, schema.KILLED: outcomes_.INTERRUPTED,
              schema.FAILED: outcomes_.sweep_reason(outcomes[name].reason for name in failed)}[status]
    layout.write_outcome(session_dir, layout.Outcome(
        status, started, time.time(), reason=reason,
        message=f"trials not finished: {', '.join(failed)}" if failed else None))
    rows = sessions.comparison_rows(session)
    publishing.session_ended()
    return SweepResult(session_dir, outcomes, rows, interrupted_by, publishing)


def can_start(ranks: int, running: list[int], max_parallel: int, cores: int) -> bool:
    """Whether a trial of `ranks` ranks may start beside trials of `running` ranks: always when none runs (a
    trial larger than the machine still runs, alone), else within maxParallel and the cores."""
    return not running or (len(running) < max_parallel and sum(running) + ranks <= cores)


def _deadline(trial: trial_.Trial, flag_seconds: float | None) -> float | None:
    """The trial's deadline: --timeout-seconds, runPolicy.activeDeadlineSeconds, whichever is shorter."""
    limits = [s for s in (flag_seconds, trial.spec.run_policy.active_deadline_seconds) if s is not None]
    return min(limits) if limits else None


def _ended(position: int, total: int, run: trials_.TrialRun, outcome: layout.Outcome) -> str:
    seconds = (outcome.end_time or time.time()) - outcome.start_time
    text = f"[{position}/{total}] {run.label}: {outcome.status} in {seconds:.1f} s"
    if outcome.status == schema.FINISHED:
        summary = layout.read_json(run.directory / layout.SUMMARY_FILE) or {}
        throughput, p50 = summary.get(keys.THROUGHPUT), summary.get(keys.P50)
        if throughput is not None and p50 is not None:
            text += f": {throughput:.1f} samples/s, iteration p50 {p50 * 1000:.1f} ms"
        return text
    return f"{text}: {outcome.message}" if outcome.message else text
