"""`ringleader run` and `ringleader publish` under faults: each ends in one line and a nonzero exit, never a
traceback, and loses nothing already recorded.

Faults are real: a tmpfs mounted small (a real ENOSPC) or read-only, a launcher killed with SIGKILL, concurrent
processes on a new sqlite file, a value MLflow itself refuses. Mounting needs root; those tests skip without it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import textwrap
import time

import mlflow.tracking
import pytest

import launching
from ringleader.tracking import schema

pytestmark = pytest.mark.integration


@contextlib.contextmanager
def tmpfs(directory, options: str):
    """A tmpfs mounted at `directory` for the block (skips the test where mounting is not permitted)."""
    directory.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"mounting a tmpfs needs root: {mounted.stderr.decode().strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=True)


def publish(cwd, *arguments: str) -> launching.Finished:
    completed = subprocess.run([sys.executable, "-m", "ringleader.cli", "publish", *arguments], cwd=cwd,
                               env=launching.launcher_environ(), capture_output=True, text=True, timeout=120)
    return launching.Finished(completed.returncode, completed.stdout + completed.stderr, 0.0)


def runs_by_kind(database, experiment_name: str) -> dict[str, list]:
    client = mlflow.tracking.MlflowClient(f"sqlite:///{database}")
    experiment = client.get_experiment_by_name(experiment_name)
    assert experiment is not None, f"no MLflow experiment {experiment_name} in {database}"
    found: dict[str, list] = {}
    for run in client.search_runs([experiment.experiment_id], max_results=1000):
        found.setdefault(run.data.tags["ringleader.kind"], []).append(run)
    return found


def steps_published(database, rank_run) -> list[int]:
    client = mlflow.tracking.MlflowClient(f"sqlite:///{database}")
    return sorted(m.step for key in ("time/iteration_ms", "warmup/time/iteration_ms")
                  for m in client.get_metric_history(rank_run.info.run_id, key))


def steps_on_disk(rank_dir) -> list[int]:
    return [json.loads(line)["step"] for line in (rank_dir / "iterations.jsonl").read_text().splitlines()]


def assert_one_line_error(finished: launching.Finished, code: int, text: str) -> None:
    assert finished.returncode == code, finished.output
    assert "Traceback" not in finished.output, finished.output
    assert [line for line in finished.output.splitlines() if text in line], finished.output


def start_training(workdir, name: str, *arguments: str, extra_env: dict[str, str] | None = None):
    """A run far too long to finish, seen training (both ranks wrote records); returns the launcher process."""
    path = launching.experiment_file(workdir, name,
                                     {"architecture": "RingAllReduce", "model": {"iterations": 1_000_000}})
    launcher = launching.start_run(workdir, str(path), *arguments, extra_env=extra_env)

    def training() -> bool:
        if launcher.poll() is not None:
            raise AssertionError(f"the launcher exited early:\n{(workdir / 'launcher.log').read_text()}")
        files = list(workdir.glob(f"**/{name}-0/rank-*/iterations.jsonl"))
        return len(files) == 2 and all(f.read_bytes().count(b"\n") >= 3 for f in files)

    launching.wait_for(training, 240, "two ranks training")  # a bound for a starved machine: 5 s alone
    return launcher


# Bad output directories.

def test_an_output_dir_that_is_a_file_or_below_one_is_refused_in_one_line(workdir):
    path = launching.experiment_file(workdir, "outdir", {})
    (workdir / "a-file").write_text("")

    for output in (workdir / "a-file", workdir / "a-file" / "runs"):
        finished = launching.run(workdir, str(path), "--output-dir", str(output))

        assert_one_line_error(finished, 2, f"--output-dir {output}: cannot create a run directory in it")
        assert len(finished.output.strip().splitlines()) == 1, finished.output


def test_a_read_only_output_dir_is_refused_in_one_line(workdir):
    path = launching.experiment_file(workdir, "readonly", {})
    with tmpfs(workdir / "ro", "ro,size=1m") as read_only:
        finished = launching.run(workdir, str(path), "--output-dir", str(read_only / "runs"))

    assert_one_line_error(finished, 2, "Read-only file system; choose a writable directory")


# A full disk.

def test_a_full_disk_stops_the_run_in_one_line_and_a_later_publish_loses_no_record(workdir):
    with tmpfs(workdir / "disk", "size=8m") as disk:
        launcher = start_training(workdir, "full", "--output-dir", str(disk / "runs"))
        [session] = list((disk / "runs").iterdir())
        seen = {rank: len(steps_on_disk(session / "full-0" / f"rank-{rank}")) for rank in (0, 1)}
        with open(disk / "filler", "wb") as filler:
            with pytest.raises(OSError) as full:
                while True:
                    filler.write(b"\0" * 65536)
                    filler.flush()
        assert full.value.errno == errno.ENOSPC
        launcher.wait(120)

        output = (workdir / "launcher.log").read_text()
        assert_one_line_error(launching.Finished(launcher.returncode, output, 0), 1, "No space left on device")
        assert f"ringleader publish {session.relative_to(workdir)}" in output
        assert launching.processes_mentioning(f"RINGLEADER_OUTPUT_DIR={session}") == []

        (disk / "filler").unlink()
        published = publish(workdir, str(session))

        assert published.returncode == 0, published.output
        assert "closed from the records on disk" in published.output
        runs = runs_by_kind(workdir / "mlflow.db", "default/full")
        assert [r.info.status for r in runs["sweep"]] == ["KILLED"]
        assert [r.info.status for r in runs["trial"]] == ["KILLED"]
        for rank_run in runs["rank"]:
            rank = int(rank_run.data.tags["ringleader.rank"])
            on_disk = steps_on_disk(session / "full-0" / f"rank-{rank}")  # restored from the journal
            assert on_disk == list(range(len(on_disk))) and len(on_disk) >= seen[rank]
            assert steps_published(workdir / "mlflow.db", rank_run) == on_disk
            assert rank_run.info.status == "KILLED"


# What MLflow refuses.

def test_a_node_selector_key_mlflow_would_refuse_is_made_acceptable_and_the_run_publishes(workdir):
    # Kubernetes takes a label key of a 253-character prefix and a name; MLflow refuses a param name that long.
    long_key = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61]) + "/disk-type"
    path = launching.experiment_file(workdir, "selector", {
        "architecture": "RingAllReduce", "model": {"iterations": 5}, "scheduling": {"nodeSelector": {long_key: "ssd"}}})

    finished = launching.run(workdir, str(path))

    assert finished.returncode == 0, finished.output
    assert "Traceback" not in finished.output and "refused" not in finished.output
    runs = runs_by_kind(workdir / "mlflow.db", "default/selector")
    [trial_run] = runs["trial"]
    assert trial_run.info.status == "FINISHED"
    assert trial_run.data.params[schema.param_key(f"scheduling.nodeSelector.{long_key}")] == "ssd"
    assert all(steps_published(workdir / "mlflow.db", r) == list(range(5)) for r in runs["rank"])


# Stores.

def new_metric_values(output: str) -> int:
    [count] = re.findall(r"\b(\d+) new metric values", output)
    return int(count)


def test_publishing_into_a_second_store_sends_everything_there_once(workdir):
    path = launching.experiment_file(workdir, "second", {"architecture": "RingAllReduce", "model": {"iterations": 5}})
    assert launching.run(workdir, str(path)).returncode == 0
    [session] = list((workdir / "ringleader-runs").iterdir())
    first_store = (workdir / "mlflow.db").read_bytes()

    into_other = publish(workdir, str(session), "--tracking-uri", "sqlite:///other.db")  # a new file
    again = publish(workdir, str(session), "--tracking-uri", "sqlite:///other.db")

    assert into_other.returncode == 0 and again.returncode == 0, into_other.output + again.output
    assert new_metric_values(into_other.output) > 0 and new_metric_values(again.output) == 0
    runs = runs_by_kind(workdir / "other.db", "default/second")
    assert [r.info.status for r in runs["sweep"] + runs["trial"]] == ["FINISHED", "FINISHED"]
    assert sorted(r.info.status for r in runs["rank"]) == ["FINISHED", "FINISHED"]
    assert all(steps_published(workdir / "other.db", r) == list(range(5)) for r in runs["rank"])
    assert (workdir / "mlflow.db").read_bytes() == first_store  # the first store got nothing more


def test_a_publish_of_damaged_record_files_ends_naming_each_bad_line_and_publishes_every_record(workdir):
    path = launching.experiment_file(workdir, "damaged", {"architecture": "RingAllReduce", "model": {"iterations": 5}})
    assert launching.run(workdir, str(path)).returncode == 0
    [session] = list((workdir / "ringleader-runs").iterdir())
    rank_dirs = sorted(session.glob("*/rank-*"))
    for rank_dir in rank_dirs:
        (rank_dir / "iterations.journal").unlink(missing_ok=True)
        records = (rank_dir / "iterations.jsonl").read_text().splitlines()
        last = json.loads(records[-1])
        with open(rank_dir / "iterations.jsonl", "a") as handle:
            handle.write("\n[1, 2, 3]\n")  # a blank line, then JSON that is no record
            handle.write(json.dumps({**last, "step": last["step"] + 1, "timestamp": "yesterday"}) + "\n")
            handle.write("\n")  # the file ends with a blank line

    published = publish(workdir, str(session), "--tracking-uri", "sqlite:///other.db")

    assert published.returncode == 0, published.output
    problems = [line for line in published.output.splitlines() if ": the line at byte " in line]
    assert len(problems) == 4 * len(rank_dirs), published.output
    assert sum('"timestamp" is str, not a number: that value dropped' in line for line in problems) == len(rank_dirs)
    assert "Traceback" not in published.output
    runs = runs_by_kind(workdir / "other.db", "default/damaged")
    assert all(r.info.status == "FINISHED" for kind in runs.values() for r in kind)
    assert all(steps_published(workdir / "other.db", r) == list(range(6)) for r in runs["rank"])


def test_a_damaged_trial_file_leaves_that_trial_out_in_one_line_and_the_others_are_published(workdir):
    path = launching.experiment_file(workdir, "edited", {"model": {"iterations": 5}, "sweep": {
        "matrix": {"architecture": ["ParameterServer", "RingAllReduce"]}}})
    assert launching.run(workdir, str(path)).returncode == 0
    [session] = list((workdir / "ringleader-runs").iterdir())
    (session / "edited-0" / "trial.json").write_text('{"name": 5}')

    published = publish(workdir, str(session), "--tracking-uri", "sqlite:///other.db")

    assert published.returncode == 1 and "Traceback" not in published.output, published.output
    [line] = [line for line in published.output.splitlines() if "trial.json" in line]
    assert line.endswith("edited-0/trial.json: damaged, not a trial ringleader wrote (experiment: Field required): "
                         "this trial is left out")
    runs = runs_by_kind(workdir / "other.db", "default/edited")
    assert [r.data.tags["ringleader.trial"] for r in runs["trial"]] == ["edited-1"]


FIRST_USE = textwrap.dedent("""
    import sys, time
    from ringleader.tracking import store
    uri, name, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    time.sleep(max(0.0, start - time.time()))  # every process starts at the same moment
    the_store = store.Store(uri)
    experiment_id = the_store.ensure_experiment(name)
    the_store.create_run_once(experiment_id, name, {})
""")


def test_processes_using_a_new_sqlite_store_at_once_create_it_once_and_all_publish(tmp_path):
    uri = f"sqlite:///{tmp_path / 'new.db'}"
    start = time.time() + 5  # after every interpreter has imported MLflow
    names = [f"default/first-{n}" for n in range(4)]
    processes = [subprocess.Popen([sys.executable, "-c", FIRST_USE, uri, name, str(start)],
                                  env=launching.launcher_environ(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                 for name in names]
    outputs = [process.communicate(timeout=120)[0].decode() for process in processes]

    assert [process.returncode for process in processes] == [0] * 4, "\n".join(outputs)
    client = mlflow.tracking.MlflowClient(uri)
    for name in names:
        experiment = client.get_experiment_by_name(name)
        assert len(client.search_runs([experiment.experiment_id])) == 1


def test_a_store_that_cannot_be_opened_is_unavailable_and_the_records_wait(workdir):
    path = launching.experiment_file(workdir, "nostore", {"architecture": "RingAllReduce", "model": {"iterations": 5}})
    (workdir / "half.db").write_bytes(b"not a database, or a half-migrated one" * 100)

    finished = launching.run(workdir, str(path), "--tracking-uri", "sqlite:///half.db")

    assert finished.returncode == 0, finished.output  # the trials ran; only publishing waits
    assert "Traceback" not in finished.output
    assert "is unavailable; nothing is lost" in finished.output


# A launcher killed with SIGKILL.

@pytest.mark.parametrize("closed_by", ["publish", "the next run"])
def test_the_runs_of_a_launcher_killed_with_sigkill_are_closed_as_killed_with_every_record(workdir, closed_by):
    launcher = start_training(workdir, "sigkill")
    [session] = list((workdir / "ringleader-runs").iterdir())
    os.kill(launcher.pid, signal.SIGKILL)
    launcher.wait(10)
    launching.wait_for(lambda: launching.processes_mentioning(f"RINGLEADER_OUTPUT_DIR={session}") == [], 10,
                       "every rank gone")
    assert {r.info.status for rs in runs_by_kind(workdir / "mlflow.db", "default/sigkill").values() for r in rs} == {
        "RUNNING"}

    if closed_by == "publish":
        finished = publish(workdir, "ringleader-runs")
    else:
        path = launching.experiment_file(workdir, "next", {"architecture": "RingAllReduce", "model": {"iterations": 3}})
        finished = launching.run(workdir, str(path))

    assert finished.returncode == 0, finished.output
    assert "ended without recording its end; closed from the records on disk" in finished.output
    runs = runs_by_kind(workdir / "mlflow.db", "default/sigkill")
    assert {kind: [r.info.status for r in rs] for kind, rs in runs.items()} == {
        "sweep": ["KILLED"], "trial": ["KILLED"], "rank": ["KILLED", "KILLED"]}
    assert runs["trial"][0].data.tags["ringleader.reason"] == "LauncherLost"
    for rank_run in runs["rank"]:
        on_disk = steps_on_disk(session / "sigkill-0" / f"rank-{rank_run.data.tags['ringleader.rank']}")
        assert len(on_disk) >= 3 and steps_published(workdir / "mlflow.db", rank_run) == on_disk


# A rank that makes no progress.

def rank_pid(session, rank: int) -> int:
    [pid] = [pid for pid, _ in launching.processes_mentioning(f"RINGLEADER_OUTPUT_DIR={session}")
             if f"\0RANK={rank}\0".encode() in pathlib.Path(f"/proc/{pid}/environ").read_bytes()]
    return pid


@pytest.mark.timing  # named within a bound
@pytest.mark.parametrize("stopped", [1, 0], ids=["a worker", "the store host"])
def test_a_stopped_rank_is_named_within_the_stall_timeout_and_blamed_not_its_waiting_peer(workdir, stopped):
    # The communication timeout is far away (120 s): only the stall watchdog can end this trial quickly.
    launcher = start_training(workdir, "stall", "--stall-timeout-seconds", "5",
                              extra_env={"RINGLEADER_TIMEOUT_SECONDS": "120"})
    [session] = list((workdir / "ringleader-runs").iterdir())
    os.kill(rank_pid(session, stopped), signal.SIGSTOP)
    stopped_at = time.monotonic()
    launcher.wait(120)
    seconds = time.monotonic() - stopped_at

    output = (workdir / "launcher.log").read_text()
    assert launcher.returncode == 1, output
    assert f"rank {stopped} (worker-{stopped}) stopped responding" in output
    assert f"rank {stopped} (worker-{stopped}) made no progress for 5 s" in output
    assert ("the rendezvous store it hosts did not answer" if stopped == 0 else "and no heartbeat") in output
    assert seconds < 60, output  # stall timeout + checks + the launcher's blame grace + SIGTERM grace
    outcome = json.loads((session / "stall-0" / "outcome.json").read_text())
    assert {r["rank"]: r["status"] for r in outcome["ranks"]} == {stopped: "FAILED", 1 - stopped: "KILLED"}
    assert launching.processes_mentioning(f"RINGLEADER_OUTPUT_DIR={session}") == []  # SIGKILL ends a stopped rank
