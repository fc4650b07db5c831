"""The agent of a pod of several ranks: starts them, ends them all when one fails, and speaks for the pod.

`python -m ringleader.runtime` runs it instead of a rank where the pod's environment has LOCAL_WORLD_SIZE > 1 and no
LOCAL_RANK (contract/environment.py): a pod has one container command, as a node has one torchrun agent. It imports
no torch, so it costs the pod next to no memory.

- Each rank is `python -m ringleader.runtime` with the pod's environment and RANK=first+i, LOCAL_RANK=i and a
  termination file of its own, leading a process group of its own (its own children are stopped with it), and
  leaving when the agent is gone (LAUNCHER_PID, runtime/parent.py). Its output is the pod's log.
- The first rank to fail (a non-zero exit, a signal) ends the others: SIGTERM, whose handler publishes their
  records first (runtime/termination.py), then SIGKILL after GRACE_SECONDS. None is left behind, none waits in a
  collective for the dead one. SIGTERM (or SIGINT) to the agent, the kubelet stopping the pod, goes to every rank
  the same way.
- The pod then exits as its failed rank did, as a shell reports it (1, or 128 + the signal: 137 after a SIGKILL),
  so the operator weighs the pod as it would a pod of that one rank (runPolicy.backoffLimit, restarts), and its
  termination message is a failure line naming that rank (RANK, pod and local rank, its exit or signal) with the
  rank's own reason. A pod whose ranks all succeed exits 0 with its first rank's message: the trial summary in the
  first worker's pod. Stopped by SIGTERM with no failure of its own, it exits 143 as a rank would.

Which rank failed first is contract/failures.py's `blame`: a signal from outside before a rank's own error before
a rank that only lost contact with another, whatever order they were reaped in.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
from typing import Mapping

from ringleader.api.trial import Slot, Trial
from ringleader.contract import environment as contract
from ringleader.contract import exits, failures
from ringleader.runtime import termination, termination_message

GRACE_SECONDS = termination.PUBLISH_SECONDS + 5.0
"""How long stopped ranks have between SIGTERM and SIGKILL: their SIGTERM handler publishes for at most
PUBLISH_SECONDS; within Kubernetes' default 30 s grace, so the agent's SIGKILL comes before the kubelet's."""
POLL_SECONDS = 0.05
"""How often the agent looks at its ranks: a dead rank's peers in the pod are told within this."""


@dataclasses.dataclass
class PodRank:
    """One rank of the pod, as its agent started it."""

    slot: Slot
    popen: subprocess.Popen
    message_file: pathlib.Path
    stopped: bool = False
    """stopped is set when the agent told the rank to stop (another failed, or the pod is being stopped)."""
    ended_at: float | None = None

    @property
    def by_signal(self) -> bool:
        """Whether a signal ended it (Popen's negative return code)."""
        return (self.popen.returncode or 0) < 0

    def how(self) -> str:
        """"exit code 1", "killed by SIGKILL"."""
        code = self.popen.returncode
        if code is not None and code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def exit_status(self) -> int:
        """Its end as a shell reports it: the exit code, or 128 + the signal."""
        code = self.popen.returncode or 0
        return exits.signalled(-code) if code < 0 else code

    def message(self) -> str:
        try:
            return self.message_file.read_text(encoding="utf-8").strip()
        except OSError:
            return ""

    def exit(self) -> failures.Exit:
        """Its end for failures.blame(): by a signal (external), with its own failure line's reason if it left one."""
        said = [self.message()]
        return failures.Exit(rank=self.slot.rank, external=self.by_signal,
                             reason=failures.reason_of(said), permanent=failures.is_permanent(said),
                             stopped=self.stopped, order=self.ended_at or 0.0)

    def failure_line(self) -> str:
        """The pod's termination message for this rank's failure: its rank, where it ran, how it ended, and why."""
        said = [self.message()]
        reason = failures.reason_of(said)
        if reason is None:
            reason = (f"no reason of its own: {self.how()} from outside the runtime (the OOM killer sends SIGKILL)"
                      if self.by_signal else
                      f"{self.how()} without a failure line (user code ending the process?); see the pod's log")
        who = f"{self.slot.hostname} local rank {self.slot.local_rank}, {self.how()}"
        return failures.failure_line(self.slot.rank, who, reason, permanent=failures.is_permanent(said))

    def signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.popen.pid, signum)  # the rank leads its own group: what it started goes too
        except (ProcessLookupError, PermissionError):
            pass


class Agent:
    """Starts the pod's ranks, stops them together, and leaves the pod's exit status and termination message."""

    def __init__(self, env: contract.PodEnvironment, ranks: list[Slot], environ: Mapping[str, str],
                 message_dir: pathlib.Path):
        self.env = env
        self.ranks = ranks
        self.environ = environ
        self.message_dir = message_dir
        self.processes: list[PodRank] = []
        self.stop_requested_at: float | None = None  # SIGTERM or SIGINT came: the pod is being stopped
        self.stopping_since: float | None = None

    def start(self) -> None:
        for slot in self.ranks:
            message_file = self.message_dir / f"rank-{slot.rank}"
            message_file.write_text("")  # the rank writes its message only where a file is (termination_message)
            rank_env = self.env.of_local_rank(slot.local_rank, str(message_file)).to_environ()
            popen = subprocess.Popen([sys.executable, "-m", "ringleader.runtime"], stdin=subprocess.DEVNULL,
                                     env={**self.environ, **rank_env, contract.LAUNCHER_PID: str(os.getpid())},
                                     start_new_session=True)
            self.processes.append(PodRank(slot, popen, message_file))

    def request_stop(self, signum: int, _frame=None) -> None:
        """The signal handler: the pod is being stopped (the kubelet's SIGTERM, a Ctrl-C)."""
        if self.stop_requested_at is None:
            print(f"agent: {signal.Signals(signum).name}: stopping the pod's ranks", file=sys.stderr, flush=True)
            self.stop_requested_at = time.monotonic()

    def supervise(self) -> None:
        """Until every rank has ended: reap them, stop them all at the first failure or stop request, SIGKILL what
        is left GRACE_SECONDS later. Bounded: past the grace nothing is left to wait for but the kernel."""
        while any(p.popen.returncode is None for p in self.processes):
            now = time.monotonic()
            for process in self.processes:
                if process.popen.returncode is None and process.popen.poll() is not None:
                    process.ended_at = now
            failed = next((p for p in self.processes if p.popen.returncode not in (None, 0)), None)
            if self.stopping_since is None and (failed is not None or self.stop_requested_at is not None):
                if failed is not None and self.stop_requested_at is None:
                    print(f"agent: rank {failed.slot.rank} ({failed.slot.label}) ended, {failed.how()}: stopping the "
                          "pod's other ranks", file=sys.stderr, flush=True)
                self.signal_running(signal.SIGTERM)
                self.stopping_since = now
            elif self.stopping_since is not None and now - self.stopping_since >= GRACE_SECONDS:
                self.signal_running(signal.SIGKILL)
            time.sleep(POLL_SECONDS)

    def signal_running(self, signum: int) -> None:
        """Signal every rank still running, each marked stopped: its end is then no failure of its own."""
        for process in self.processes:
            if process.popen.returncode is None:
                process.stopped = True
                process.signal_group(signum)

    def kill_all(self) -> None:
        """SIGKILL every rank's group, ended ranks' too (a child they started may still be there), and reap them."""
        for process in self.processes:
            process.signal_group(signal.SIGKILL)
            process.popen.wait()

    def outcome(self) -> tuple[int, str | None]:
        """The pod's exit status and termination message (None: leave none) once every rank has ended."""
        exits_ = [p.exit() for p in self.processes if p.popen.returncode != 0]
        causes = [e for e in exits_ if not e.stopped]
        if not causes:
            if self.stop_requested_at is not None or exits_:
                return exits.signalled(signal.SIGTERM), None
            messages = [p.message() for p in self.processes]
            # Every rank the runtime ends leaves a message: one without it ended outside the runtime, and so
            # does the pod, which the operator blames (controller/pods.ended_outside_runtime).
            return 0, messages[0] if all(messages) else None
        culprit = failures.blame(causes)
        rank = culprit.rank if isinstance(culprit, failures.Exit) else min(causes, key=lambda e: e.order).rank
        process = next(p for p in self.processes if p.slot.rank == rank)
        return process.exit_status() or 1, process.failure_line()


def load_ranks(env: contract.PodEnvironment) -> list[Slot]:
    """The pod's ranks, from the trial file; ContractError when the pod's environment does not match the trial."""
    try:
        trial = Trial.model_validate_json(pathlib.Path(env.trial_file).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise contract.ContractError(f"trial file {env.trial_file} cannot be read as a trial "
                                     f"({contract.TRIAL_FILE}): {str(error).splitlines()[0]}") from None
    if env.world_size != trial.world_size:
        raise contract.ContractError(f"{contract.WORLD_SIZE}={env.world_size} but trial {trial.name} has "
                                     f"{trial.world_size} ranks")
    ranks = trial.pod_of(env.rank)
    if ranks[0].rank != env.rank or len(ranks) != env.local_world_size:
        raise contract.ContractError(f"{contract.RANK}={env.rank} and {contract.LOCAL_WORLD_SIZE}="
                                     f"{env.local_world_size} are not a pod of trial {trial.name}: its pod of rank "
                                     f"{env.rank} runs ranks {ranks[0].rank}..{ranks[-1].rank}")
    return ranks


def main(environ: Mapping[str, str] = os.environ) -> int:
    env = contract.PodEnvironment.from_environ(environ)
    termination_message.leave_in(env.termination_file)  # the pod's own, unless told otherwise (a test)
    try:
        ranks = load_ranks(env)
    except contract.ContractError as error:  # the same after any restart
        line = failures.failure_line(env.rank, f"agent of {env.local_world_size} ranks", str(error), permanent=True)
        print(line, file=sys.stderr, flush=True)
        termination_message.write(failures.shorten_middle(line, termination_message.CHARACTERS))
        return 1
    with tempfile.TemporaryDirectory(prefix="ringleader-agent-") as message_dir:
        agent = Agent(env, ranks, environ, pathlib.Path(message_dir))
        # Installed before the first rank starts: PID 1 in a container must handle SIGTERM (termination.py).
        signal.signal(signal.SIGTERM, agent.request_stop)
        signal.signal(signal.SIGINT, agent.request_stop)
        print(f"agent: pod {ranks[0].hostname} starts ranks {ranks[0].rank}..{ranks[-1].rank}", flush=True)
        try:
            agent.start()
            agent.supervise()
        finally:
            agent.kill_all()  # nothing of the pod outlives its agent, whatever ended it
        status, message = agent.outcome()
    if message is not None:
        termination_message.write(message)
    if status:
        print(message or f"agent: the pod's ranks were stopped (exit {status})", file=sys.stderr, flush=True)
    return status
