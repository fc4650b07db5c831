"""Stopping `ringleader run`: Ctrl-C (SIGINT) stops and records the trial, a killed launcher takes its ranks along;
either way no rank process is left behind."""

from __future__ import annotations

import json
import os
import signal

import mlflow.tracking
import pytest

import launching

pytestmark = [pytest.mark.integration, pytest.mark.timing]


def long_experiment(workdir, name: str):
    return launching.experiment_file(workdir, name, {"architecture": "RingAllReduce",
                                                     "model": {"iterations": 1_000_000}})


def start_long_run(workdir, name: str):
    """A trial far too long to finish, started and seen training (its workers have written records)."""
    path = long_experiment(workdir, name)
    launcher = launching.start_run(workdir, str(path))
    marker = f"RINGLEADER_OUTPUT_DIR={workdir}"

    def training() -> list:
        ranks = launching.processes_mentioning(marker)
        records = list(workdir.glob("ringleader-runs/*/*/rank-*/iterations.jsonl"))
        done = len(records) == 2 and all(p.read_bytes().count(b"\n") >= 2 for p in records)
        if launcher.poll() is not None:
            raise AssertionError(f"the launcher exited early:\n{(workdir / 'launcher.log').read_text()}")
        return ranks if done and len(ranks) == 2 else []

    ranks = launching.wait_for(training, 90, "two ranks training")
    return launcher, marker, ranks


def test_sigint_stops_every_rank_records_the_trial_as_killed_and_exits_130(workdir):
    launcher, marker, ranks = start_long_run(workdir, "interrupt")
    assert all("ringleader.runtime" in command for _, command in ranks)

    os.kill(launcher.pid, signal.SIGINT)
    launcher.wait(30)

    output = (workdir / "launcher.log").read_text()
    assert launcher.returncode == 130, output
    assert launching.processes_mentioning(marker) == []
    assert "SIGINT: stopping the running trials" in output
    assert "interrupt-0 (RingAllReduce, BSP, 2 workers): KILLED" in output
    [session] = list((workdir / "ringleader-runs").iterdir())
    outcome = json.loads((session / "interrupt-0" / "outcome.json").read_text())
    assert outcome["status"] == "KILLED" and outcome["reason"] == "Interrupted"
    assert {r["status"] for r in outcome["ranks"]} == {"KILLED"}

    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("default/interrupt")
    statuses = {r.data.tags["ringleader.kind"]: r.info.status for r in client.search_runs([experiment.experiment_id])}
    assert statuses == {"sweep": "KILLED", "trial": "KILLED", "rank": "KILLED"}


def test_a_killed_launcher_takes_its_ranks_along(workdir):
    launcher, marker, ranks = start_long_run(workdir, "orphans")

    os.kill(launcher.pid, signal.SIGKILL)  # no handler runs: only the kernel can clean up now
    launcher.wait(10)

    launching.wait_for(lambda: launching.processes_mentioning(marker) == [], 10, "every rank gone")


def test_a_trial_past_its_deadline_is_stopped_and_fails(workdir):
    finished = launching.run(workdir, str(long_experiment(workdir, "deadline")), "--timeout-seconds", "3")

    assert finished.returncode == 1, finished.output
    assert "deadline-0 (RingAllReduce, BSP, 2 workers): FAILED" in finished.output
    assert "trial ran longer than its deadline of 3 s" in finished.output
    assert launching.processes_mentioning(f"RINGLEADER_OUTPUT_DIR={workdir}") == []
    [session] = list((workdir / "ringleader-runs").iterdir())
    outcome = json.loads((session / "deadline-0" / "outcome.json").read_text())
    assert outcome["reason"] == "DeadlineExceeded"
