"""`ringleader report`: a real sweep with 2 repetitions, reported from its run directory and from MLflow."""

from __future__ import annotations

import csv
import json
import os
import pathlib
import re
import subprocess
import sys

import mlflow.tracking
import pytest

import launching

pytestmark = pytest.mark.integration


def report(cwd: pathlib.Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ringleader.cli", "report", *arguments], cwd=cwd,
                          env=launching.launcher_environ(), capture_output=True, text=True, timeout=120)


def upload_records(client: mlflow.tracking.MlflowClient, session: pathlib.Path, sweep_run_id: str) -> None:
    # The trial run's summary.json and each rank run's records/iterations.jsonl are uploaded by the publisher
    # on another branch; until then this test uploads them itself, at the same paths, before reading MLflow.
    experiment_id = client.get_run(sweep_run_id).info.experiment_id
    for trial_run in client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{sweep_run_id}'"):
        trial_dir = session / trial_run.data.tags["ringleader.trial"]
        if not any(a.path == "summary.json" for a in client.list_artifacts(trial_run.info.run_id)):
            client.log_artifact(trial_run.info.run_id, str(trial_dir / "summary.json"))
        for rank_run in client.search_runs([experiment_id], f"tags.`mlflow.parentRunId` = '{trial_run.info.run_id}'"):
            rank_dir = trial_dir / f"rank-{rank_run.data.tags['ringleader.rank']}"
            if not any(a.path == "records" for a in client.list_artifacts(rank_run.info.run_id)):
                client.log_artifact(rank_run.info.run_id, str(rank_dir / "iterations.jsonl"), "records")


def self_contained(page: str) -> bool:
    return not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page) and "<script" not in page


def test_a_repeated_sweep_is_reported_from_its_directory_and_from_mlflow_with_the_same_numbers(workdir):
    path = launching.experiment_file(workdir, "rep", {
        "sweep": {"repetitions": 2, "matrix": {"architecture": ["ParameterServer", "RingAllReduce"]}}})
    finished = launching.run(workdir, str(path), timeout=300)
    assert finished.returncode == 0, finished.output
    [session] = [d for d in (workdir / "ringleader-runs").iterdir() if d.is_dir()]
    assert f"Report: {(session / 'report' / 'report.html').relative_to(workdir)}" in finished.output

    # The launcher attached the report to the sweep run at its end.
    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    [sweep] = client.search_runs([client.get_experiment_by_name("default/rep").experiment_id],
                                 "tags.`ringleader.kind` = 'sweep'")
    attached = {a.path for a in client.list_artifacts(sweep.info.run_id, "report")}
    assert {"report/report.html", "report/report.csv", "report/report.json", "report/comparison.png",
            "report/time.png", "report/repetitions.png"} <= attached
    note = sweep.data.tags["mlflow.note.content"]
    assert note.startswith("- ") and "| ParameterServer | 2/2 |" in note and "report/report.html" in note

    # From the directory (the directory holding it: the newest run is taken).
    by_directory = report(workdir, "ringleader-runs", "--no-attach")
    assert by_directory.returncode == 0, by_directory.stderr
    # Which run was taken is a notice, on stderr as every command says it; stdout holds the results.
    assert f"taking the newest, {session.name}" in by_directory.stderr and "taking" not in by_directory.stdout
    local = session / "report"
    page = (local / "report.html").read_text()
    assert self_contained(page)
    assert re.findall(r'<figure id="([^"]+)">', page) == ["comparison", "time", "repetitions", "prediction", "overlap"]
    assert 'alt="stacked bars per trial: compute, communication, waiting and evaluation-and-other' in page
    document = json.loads((local / "report.json").read_text())
    rows = list(csv.DictReader((local / "report.csv").open()))
    assert [row["trial"] for row in rows] == [f"rep-{i}" for i in range(4)]
    for row, entry in zip(rows, document["trials"]):
        summary = json.loads((session / row["trial"] / "summary.json").read_text())
        assert float(row["throughput"]) == summary["throughput"] == entry["summary"]["throughput"]
        assert float(row["iteration_time_p50_seconds"]) == summary["iterationTimeP50Seconds"]
        assert float(row["comm_seconds"]) == summary["commSeconds"]
    fastest = max(rows[:2], rows[2:], key=lambda pair: sum(float(r["throughput"]) for r in pair))
    # Two repetitions each: a winner is named only when the interval across them excludes parity.
    [first] = [r for r in document["findingRecords"] if r["kind"] == "fastest"]
    assert (first["subjects"][0], first["basis"]) == (fastest[0]["architecture"], "repetitions")
    assert first["low"] < first["ratio"] < first["high"] and first["distinguishable"] == (first["low"] > 1)
    named = f"Fastest: {fastest[0]['architecture']}: " if first["distinguishable"] else "No clear fastest: "
    # The answer first; right after it, what qualifies it: the trials whose ranks outnumbered this machine's CPUs
    # and kept at least half of them busy (on a machine others load, a trial may have had less than that).
    cpus = len(os.sched_getaffinity(0))

    def busy_share(trial: str) -> float:
        usage = json.loads((session / trial / "summary.json").read_text())["usage"]
        return sum(used["cpuUtilization"] for used in usage.values()) / cpus

    crowded = [row["trial"] for row in rows if {"ParameterServer": 3, "RingAllReduce": 2}[row["architecture"]] > cpus
               and busy_share(row["trial"]) >= 0.5]
    contended = [r for r in document["findingRecords"] if r["kind"] == "contention"]
    assert [r["subjects"] for r in contended] == ([crowded] if crowded else [])
    answer = document["findings"][0]
    assert answer.startswith(named) and answer == first["text"]
    assert document["combinations"][0]["throughput"]["count"] == 2

    # From MLflow, by experiment name, written elsewhere and attached again.
    upload_records(client, session, sweep.info.run_id)
    by_mlflow = report(workdir, "rep", "-o", str(workdir / "from-mlflow"))
    assert by_mlflow.returncode == 0, by_mlflow.stderr
    assert f"Attached to sweep run {sweep.info.run_id}" in by_mlflow.stdout
    assert by_mlflow.stderr == f"rep: taking its newest sweep run, {sweep.info.run_id}\n"
    again = json.loads((workdir / "from-mlflow" / "report.json").read_text())
    assert [t["summary"] for t in again["trials"]] == [t["summary"] for t in document["trials"]]
    assert again["findings"] == document["findings"]
    assert self_contained((workdir / "from-mlflow" / "report.html").read_text())

    # By sweep run id; an unknown source is one line naming what was tried.
    by_id = report(workdir, sweep.info.run_id, "--no-attach")
    assert by_id.returncode == 0 and "taking" not in by_id.stderr  # the run named itself: nothing was picked
    unknown = report(workdir, "nothing-here")
    assert unknown.returncode == 1 and unknown.stdout == ""
    assert unknown.stderr.strip().splitlines() == [
        "ringleader report: nothing-here: not a run directory; in MLflow at sqlite:///" + str(workdir / "mlflow.db")
        + ": no run "
        "nothing-here; no experiment named 'nothing-here'; no experiment named 'default/nothing-here'"]

    # A tag is anyone's to set: the report stays under ringleader-report/ whatever the experiment tag says.
    for hostile in ("../../escaped", str(workdir.parent / "absolute"), ".."):
        client.set_tag(sweep.info.run_id, "ringleader.experiment", hostile)
        assert report(workdir, sweep.info.run_id, "--no-attach").returncode == 0
    written = [p for p in (workdir / "ringleader-report").iterdir() if p.name != "rep"]  # "rep": by run id, above
    [absolute, escaped, dots] = sorted(written, key=lambda p: p.name[-8:])
    assert (absolute.name.endswith("_absolute"), escaped.name, dots.name) == (True, "escaped", "experiment")
    assert all((directory / "report.html").is_file() for directory in (absolute, escaped, dots))
    assert not (workdir.parent.parent / "escaped").exists() and not (workdir.parent / "absolute").exists()
