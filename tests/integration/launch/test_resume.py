"""`ringleader run --resume DIR`: a sweep stopped by Ctrl-C after its first trial is finished later into the same run
directory, MLflow sweep run and report."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import mlflow.tracking
import pytest

import launching

pytestmark = [pytest.mark.integration, pytest.mark.timing]


def quickstart_like(workdir):
    """The quickstart's three architectures, on tiny data; long enough that Ctrl-C lands inside the second trial."""
    return launching.experiment_file(workdir, "resumable", {
        "parameterServers": {"replicas": 1}, "model": {"iterations": 300},
        "sweep": {"matrix": {"architecture": ["ParameterServer", "PeerToPeer", "RingAllReduce"]}}})


def test_an_interrupted_sweep_resumed_ends_as_one_sweep_run_with_every_trial_finished_and_one_report(workdir):
    launcher = launching.start_run(workdir, str(quickstart_like(workdir)))

    def first_finished() -> bool:
        if launcher.poll() is not None:
            raise AssertionError(f"the launcher exited early:\n{(workdir / 'launcher.log').read_text()}")
        outcome = list(workdir.glob("ringleader-runs/*/resumable-0/outcome.json"))
        return bool(outcome) and json.loads(outcome[0].read_text())["status"] == "FINISHED"

    launching.wait_for(first_finished, 180, "the first trial finished")
    os.kill(launcher.pid, signal.SIGINT)
    launcher.wait(60)
    stopped = (workdir / "launcher.log").read_text()
    [session] = list((workdir / "ringleader-runs").iterdir())
    shown = f"ringleader-runs/{session.name}"

    assert launcher.returncode == 130, stopped
    table = stopped[re.search(r"(?m)^trial\s", stopped).start():]  # the header line, not a progress line
    assert all(f"resumable-{i} " in table for i in range(3)), table  # every trial has its row, never-run ones too
    assert "NOT RUN" in table
    assert stopped.rstrip().splitlines()[-1].endswith(f"to run them into this sweep: ringleader run --resume {shown}")
    assert "Incomplete:" in json.loads((session / "report" / "report.json").read_text())["findings"][0]

    resumed = launching.run(workdir, "--resume", shown)

    assert resumed.returncode == 0, resumed.output
    assert f"{shown}: resuming 2 trials left" in resumed.output
    assert "--resume" not in resumed.output.splitlines()[-1]
    assert [p.name for p in (workdir / "ringleader-runs").iterdir()] == [session.name]
    assert json.loads((session / "outcome.json").read_text())["status"] == "FINISHED"
    assert [json.loads((session / f"resumable-{i}" / "outcome.json").read_text())["status"] for i in range(3)] \
        == ["FINISHED"] * 3
    # The attempt Ctrl-C stopped, if it had started, is kept aside.
    assert (session / "attempts" / "resumable-1-1" / "trial.json").is_file() == ("KILLED" in table)
    document = json.loads((session / "report" / "report.json").read_text())
    assert [t["name"] for t in document["trials"]] == [f"resumable-{i}" for i in range(3)]
    assert not [f for f in document["findingRecords"] if f["kind"] in ("incomplete", "failure")]
    # Where the numbers were taken, from the resumed run: machine, load before and after, versions, command.
    assert f"--resume {shown}" in document["provenance"] and " after; ringleader " in document["provenance"]
    assert "Taken on " in (session / "report" / "report.html").read_text()
    assert [f for f in document["findingRecords"] if f["kind"] == "fastest"][0]["subjects"][1:]  # a runner-up

    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("default/resumable")
    [sweep] = client.search_runs([experiment.experiment_id], "tags.`ringleader.kind` = 'sweep'")
    assert sweep.info.status == "FINISHED"
    assert sweep.data.tags["ringleader.provenance.command"].endswith(f"--resume {shown}")
    assert {"host", "cpus", "cpuQuota", "loadBefore", "loadAfter", "torch", "python", "ringleader"} <= {
        key.rsplit(".", 1)[1] for key in sweep.data.tags if key.startswith("ringleader.provenance.")}
    assert sum(key.startswith("throughput") for key in sweep.data.metrics) == 3
    from_mlflow = subprocess.run([sys.executable, "-m", "ringleader.cli", "report", sweep.info.run_id, "--no-attach",
                                  "--tracking-uri", f"sqlite:///{workdir / 'mlflow.db'}", "--output-dir",
                                  str(workdir / "from-mlflow")], cwd=workdir, env=launching.launcher_environ(),
                                 capture_output=True, text=True, timeout=300)
    assert from_mlflow.returncode == 0, from_mlflow.stderr
    again = json.loads((workdir / "from-mlflow" / "report.json").read_text())
    assert [t["name"] for t in again["trials"]] == [f"resumable-{i}" for i in range(3)]  # one run per trial
