"""The launcher's parts, each with real processes and files but no training: environments, progress, stopping,
reasons."""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import pathlib
import subprocess
import sys
import time

import launching

from ringleader.models import eta
from ringleader.api import experiment, trial
from ringleader.commands import publish
from ringleader.contract import failures
from ringleader.launch import cli, display, processes, sweep, trials
from ringleader.launch import settings as settings_
from ringleader.contract import environment as contract


def a_trial() -> trial.Trial:
    return trial.expand(experiment.parse({
        "apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment",
        "metadata": {"name": "parts"}, "spec": {"workers": {"replicas": 2}, "model": {"iterations": 40}},
    })).trials[0]


def test_a_rank_gets_the_pod_contract_and_an_allow_list_of_the_users_environment(tmp_path):
    the_trial = a_trial()
    slot = the_trial.slots()[2]
    user = {"HOME": "/home/me", "PYTHONPATH": "mine", "MLFLOW_TRACKING_URI": "http://shared:5000",
            "RINGLEADER_MLFLOW_RUN_ID": "abc", "RANK": "7", "MLFLOW_TRACKING_PASSWORD": "pw", "SECRET_X": "x",
            "LC_ALL": "C.UTF-8", "RINGLEADER_BUCKET_BYTES": "1024", "HF_HOME": "/cache/hf"}

    environ = trials.rank_environ(user, slot, the_trial.world_size, 29123, tmp_path / "trial.json", tmp_path,
                                  passed=("HF_HOME", "RINGLEADER_MLFLOW_RUN_ID"))

    env = contract.PodEnvironment.from_environ(environ)
    assert ((env.role, env.rank, env.world_size, env.master_addr, env.master_port)
            == ("worker", 2, 3, "127.0.0.1", 29123))
    assert env.trial_file == str(tmp_path / "trial.json") and env.output_dir == str(tmp_path)
    assert env.run_id is None and env.tracking_uri is None  # the launcher is MLflow's one writer
    assert environ["PYTHONPATH"].split(os.pathsep) == [str(trials.PACKAGE_ROOT), "mine"]
    assert (environ["HOME"], environ["LC_ALL"], environ["RINGLEADER_BUCKET_BYTES"]) == ("/home/me", "C.UTF-8", "1024")
    assert environ["HF_HOME"] == "/cache/hf"  # named by the user
    assert "MLFLOW_TRACKING_PASSWORD" not in environ and "SECRET_X" not in environ


def test_progress_is_the_slowest_workers_complete_lines_read_incrementally(tmp_path):
    trial_dir = tmp_path / "parts-0"
    for rank, lines in ((1, 7), (2, 4)):
        (trial_dir / f"rank-{rank}").mkdir(parents=True)
        (trial_dir / f"rank-{rank}" / "iterations.jsonl").write_text('{"step": 0}\n' * lines)
    counts: dict = {}
    assert trials.worker_progress(trial_dir, [1, 2], counts) == 4
    with open(trial_dir / "rank-2" / "iterations.jsonl", "a") as handle:
        handle.write('{"step": 4}\n{"step": 5}\n{"st')
    assert trials.worker_progress(trial_dir, [1, 2], counts) == 6
    assert trials.worker_progress(trial_dir, [1, 2, 3], counts) == 0  # a worker that has not started yet


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeRun:
    """Stands in for a TrialRun in the display: a name, a progress, an elapsed time and a pace of `seconds_each`
    per iteration, measured up to the moment the display asks (None: no pace measured yet)."""

    def __init__(self, name: str, done: int, seconds_each: float | None = 1.0):
        self.trial = a_trial().model_copy(update={"name": name})
        self.done = done
        self.total_iterations = 40
        self.seconds_each = seconds_each

    def progress(self) -> int:
        return self.done

    def elapsed(self) -> float:
        return 12.0

    def for_eta(self) -> eta.UnfinishedTrial:
        now = time.monotonic()
        samples = () if self.seconds_each is None else ((now - self.seconds_each, self.done - 1), (now, self.done))
        return dataclasses.replace(eta.planned(self.trial), started=now - 12.0, samples=samples)


def test_on_a_terminal_one_line_is_redrawn_and_messages_go_above_it():
    out = Terminal()
    screen = display.ProgressDisplay(settings_.LaunchSettings(redraw_seconds=0), out, total_trials=2)
    screen.update([(1, FakeRun("parts-0", 3)), (2, FakeRun("parts-1", 9))])
    screen.message("[1/2] parts-0: FINISHED")
    screen.update([(2, FakeRun("parts-1", 10))])
    screen.close()
    assert out.getvalue() == (
        "\r\x1b[K[1/2] parts-0 iteration 3/40 7% (12 s), ETA 37s | [2/2] parts-1 iteration 9/40 22% (12 s), ETA 31s"
        "\r\x1b[K[1/2] parts-0: FINISHED\n"
        "\r\x1b[K[2/2] parts-1 iteration 10/40 25% (12 s), ETA 30s"
        "\r\x1b[K")


def test_in_a_log_progress_is_a_plain_line_every_few_seconds():
    out, now = io.StringIO(), [time.monotonic()]  # FakeRun started on the real clock
    screen = display.ProgressDisplay(settings_.LaunchSettings(progress_seconds=0.2), out, total_trials=1,
                                       clock=lambda: now[0])
    running = [(1, FakeRun("parts-0", 5))]
    screen.update(running)
    now[0] += 0.19
    screen.update(running)
    assert out.getvalue() == ""
    now[0] += 0.02
    screen.update(running)
    assert out.getvalue() == "[1/1] parts-0 iteration 5/40 12% (12 s), ETA 35s\n"
    assert "\r" not in out.getvalue()


def test_the_sweeps_eta_adds_the_trials_still_to_run_at_their_predicted_iteration_time_plus_start_up():
    out = Terminal()
    screen = display.ProgressDisplay(settings_.LaunchSettings(redraw_seconds=0), out, total_trials=3)
    # parts-0 took 50 s for 40 iterations of 1 s: 10 s of start-up; it predicted the ring at 0.5 s.
    done = [eta.Finished({}, 40, 1.0, 50.0, {"ring": 0.5})]
    waiting = a_trial().model_copy(update={"name": "parts-2"})
    screen.update([(2, FakeRun("parts-1", 10))], [waiting], done)  # same combination: 1 s measured
    assert out.getvalue().endswith("[2/3] parts-1 iteration 10/40 25% (12 s), ETA 30s; sweep ETA 1m20s")
    screen.update([(2, FakeRun("parts-1", 10, seconds_each=None))], [waiting], [])
    assert out.getvalue().endswith(
        "[2/3] parts-1 iteration 10/40 25% (12 s), ETA unknown until the first iterations; "
        "sweep ETA unknown until the first iterations")


def rank_process(tmp_path, script: str) -> processes.RankProcess:
    slot = a_trial().slots()[1]
    stdout, stderr = tmp_path / "out", tmp_path / "err"
    with open(stdout, "wb") as out, open(stderr, "wb") as err:
        popen = subprocess.Popen(["bash", "-c", script], stdout=out, stderr=err, start_new_session=True)
    return processes.RankProcess(slot, popen, stdout, stderr)


def group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs. A killed grandchild is a zombie until init reaps it, which on a
    busy machine can take seconds: a zombie runs nothing, so it does not count."""
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
        except (OSError, IndexError):
            continue  # ended while being read
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def test_stopping_kills_the_whole_group_even_a_child_that_ignores_sigterm(tmp_path):
    # The rank ignores SIGTERM and has a child doing the same: only SIGKILL after the grace period ends them.
    ready = tmp_path / "ready"
    process = rank_process(tmp_path, f"trap '' TERM; bash -c \"trap '' TERM; touch {ready}; sleep 60\" & sleep 60")
    deadline = time.monotonic() + 30
    while not ready.exists():  # both traps are set once the child has touched it
        assert time.monotonic() < deadline, "the rank's child never started"
        time.sleep(0.01)
    started = time.monotonic()

    processes.stop([process], grace_seconds=0.5)

    assert 0.5 <= time.monotonic() - started < 5
    assert process.stopped and process.exit_description() == "was killed by signal 9 (SIGKILL)"
    assert not group_alive(process.pid)


def test_a_failure_reason_prefers_the_runtimes_own_line_else_quotes_the_last_stderr_lines(tmp_path):
    said = rank_process(tmp_path, "echo noise >&2; echo 'ringleader: rank 1 (worker) failed: RuntimeError: "
                                  "out of memory' >&2; exit 1")
    said.popen.wait()
    assert said.failure_reason(3) == "rank 1 (worker-0) exited with code 1: RuntimeError: out of memory"

    silent = rank_process(tmp_path, "for i in 1 2 3 4 5 6; do echo line $i >&2; done; kill -SEGV $$")
    silent.popen.wait()
    reason = silent.failure_reason(2)
    assert reason.startswith("rank 1 (worker-0) was killed by signal 11 (SIGSEGV); last stderr lines:")
    assert reason.splitlines()[1:] == ["    line 5", "    line 6"]


def test_a_rank_that_lost_its_peer_is_an_echo_not_the_cause(tmp_path):
    echo = rank_process(tmp_path,
                        "echo 'ringleader: rank 0 (worker) failed: lost contact with rank 1 (it died)' >&2; exit 1")
    echo.popen.wait()
    assert echo.exit(order=0).echo and failures.lost_rank(echo.own_reason()) == 1


def test_each_run_gets_its_own_directory(tmp_path):
    first = cli.new_session_dir(tmp_path, "quickstart")
    second = cli.new_session_dir(tmp_path, "quickstart")
    assert first != second and first.is_dir() and second.is_dir()
    assert first.name.startswith("quickstart-")


def test_the_output_says_how_to_open_the_runs(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    local = cli.how_to_open(f"sqlite:///{tmp_path}/mlflow.db", "1", "abc")
    assert local.startswith("ringleader ui --tracking-uri sqlite:///mlflow.db\n")
    assert local.endswith("then open http://127.0.0.1:5000/#/experiments/1/runs/abc?workflowType=machine_learning")
    (tmp_path / "Makefile").write_text("ui: venv  ## the MLflow UI on ./mlflow.db\n")  # a checkout: `make ui`
    assert cli.how_to_open(f"sqlite:///{tmp_path}/mlflow.db", "1", "abc").startswith("make ui\n")
    assert cli.how_to_open(f"sqlite:///{tmp_path}/other.db", "1", "abc").startswith(
        "ringleader ui --tracking-uri sqlite:///other.db\n")
    assert cli.how_to_open("http://127.0.0.1:5000", "7", "abc") == \
        "http://127.0.0.1:5000/#/experiments/7/runs/abc?workflowType=machine_learning"


def test_the_ui_command_printed_runs_in_a_fresh_shell_without_the_venv_on_path(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/local/bin:/usr/bin:/bin")
    command = cli.how_to_open(f"sqlite:///{tmp_path}/mlflow.db", "1", "abc").split(" ui ")[0]
    assert command == str(pathlib.Path(sys.executable).parent / "ringleader")
    done = subprocess.run([command, "ui", "--help"], env={**launching.launcher_environ(), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "--tracking-uri" in done.stdout


def test_run_refuses_an_invalid_file_with_status_1_and_a_missing_trial_with_status_2(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: ringleader.dev/v1alpha1\nkind: DistributedTrainingExperiment\n"
                    "metadata: {name: bad}\nspec: {workers: {replicas: 0}}\n")
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    err = io.StringIO()
    assert cli.run(parser.parse_args([str(path)]), io.StringIO(), err) == 1  # the input is wrong
    assert "`spec.workers.replicas` must be greater than or equal to 1" in err.getvalue()

    path.write_text(path.read_text().replace("replicas: 0", "replicas: 2"))
    err = io.StringIO()
    assert cli.run(parser.parse_args([str(path), "--trial", "3"]), io.StringIO(), err) == 2  # the command line is
    assert "--trial 3 does not exist: the experiment has trials 0 to 0" in err.getvalue()


def test_publish_refuses_a_directory_without_runs(tmp_path):
    parser = argparse.ArgumentParser()
    publish.add_arguments(parser)
    err = io.StringIO()
    assert publish.run(parser.parse_args([str(tmp_path)]), io.StringIO(), err) == 1  # as a missing file is
    assert "no session written by `ringleader run`" in err.getvalue()


def test_trials_run_side_by_side_only_within_max_parallel_and_the_cores():
    assert sweep.can_start(ranks=5, running=[], max_parallel=1, cores=2)  # too big for the machine: runs alone
    assert not sweep.can_start(ranks=2, running=[2], max_parallel=1, cores=16)
    assert sweep.can_start(ranks=3, running=[2, 3], max_parallel=4, cores=8)
    assert not sweep.can_start(ranks=3, running=[2, 3], max_parallel=4, cores=7)
    assert not sweep.can_start(ranks=1, running=[1, 1], max_parallel=2, cores=16)
