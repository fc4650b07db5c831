"""`ringleader whatif` on a fresh real trial: from its run directory, its trial directory and its MLflow runs."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import mlflow.tracking
import pytest

import launching
from ringleader.models import profile as profile_
from ringleader.models import whatif as whatif_

pytestmark = pytest.mark.integration


def whatif(cwd: pathlib.Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ringleader.cli", "whatif", *arguments], cwd=cwd,
                          env=launching.launcher_environ(), capture_output=True, text=True, timeout=120)


def table(out: str) -> list[tuple[float, float, int, float, float]]:
    return [(float(g), float(c), int(b), float(o), float(sf)) for g, c, b, o, sf in
            re.findall(r"^\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)(?:\s+\w+)?$", out, re.M)]


def test_whatif_on_a_fresh_trial_from_its_directory_and_from_mlflow(workdir):
    path = launching.experiment_file(workdir, "wi", {"architecture": "RingAllReduce", "workers": {"replicas": 2}})
    finished = launching.run(workdir, str(path), timeout=100)
    assert finished.returncode == 0, finished.output
    [session] = [d for d in (workdir / "ringleader-runs").iterdir() if d.is_dir()]
    trial_dir = session / "wi-0"
    layers = json.loads((trial_dir / "rank-0" / "layers.json").read_text())

    arguments = ["--workers", "2", "8", "--bandwidths", "1", "100", "--compressions", "1", "4", "--target-sf", "0.9"]
    by_directory = whatif(workdir, "ringleader-runs", *arguments, "-o", "whatif.png")
    assert by_directory.returncode == 0, by_directory.stderr
    out = by_directory.stdout
    # The run's one trial, picked as a ring trial with the fewest workers, and its lowest worker rank: both said.
    [(gradients, megabytes)] = re.findall(r"trial wi-0 \(a RingAllReduce trial, the one with the fewest workers\), "
                                          r"rank 0 \(the lowest worker rank\): (\d+) gradients, ([\d.]+) MB", out)
    assert int(gradients) == len(layers["parameters"])
    assert float(megabytes) == pytest.approx(sum(p["bytes"] for p in layers["parameters"]) / 1e6, abs=1e-3)
    rows = table(out)
    assert len(rows) == 2 * 2 * 2
    for _gbit, _compression, buckets, _overhead, sf in rows:
        assert buckets >= 1 and 0 < sf <= 1
    by_point = {(r[0], r[1]): r[4] for r in rows[:4]}  # N = 2
    assert by_point[1, 1] <= by_point[1, 4] <= by_point[100, 4] and by_point[1, 1] <= by_point[100, 1]
    needed = re.findall(r"N=(\d+) ([\d.]+) Gbit/s: (.+)$", out, re.M)
    assert len(needed) == 4
    assert (workdir / "whatif.png").read_bytes()[:4] == b"\x89PNG"

    # The trial directory and the rank directory give the same numbers.
    assert table(whatif(workdir, str(trial_dir), *arguments).stdout) == rows
    assert table(whatif(workdir, str(trial_dir / "rank-0"), *arguments).stdout) == rows

    # From MLflow: the sweep run and the trial run read the same layers and records as the directory.
    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    experiment_id = client.get_experiment_by_name("default/wi").experiment_id
    [sweep] = client.search_runs([experiment_id], "tags.`ringleader.kind` = 'sweep'")
    [trial] = client.search_runs([experiment_id], "tags.`ringleader.kind` = 'trial'")
    for source in (sweep.info.run_id, trial.info.run_id):
        from_mlflow = whatif(workdir, source, *arguments)
        assert from_mlflow.returncode == 0, from_mlflow.stderr
        assert table(from_mlflow.stdout) == rows

    # A profile file written from the same rank (the documented format) holds its profile and t_batch only: the
    # paper's model of them (fusion buckets, no floor, no wait), whatever the trial measured around them.
    profile, batch = whatif_.read_rank(trial_dir / "rank-0")
    profile_file = workdir / "profile.json"
    profile_file.write_text(json.dumps(profile_.document(profile, batch)))
    from_file = whatif(workdir, str(profile_file), *arguments).stdout
    assert "fusion: cycle time 5 ms" in from_file
    assert [sf for *_, sf in table(from_file)] == pytest.approx(
        [whatif_.simulate(profile, n, g * 1e9, c, batch_seconds=batch).scaling_factor
         for n in (2, 8) for g in (1, 100) for c in (1, 4)], abs=5e-4)
    assert "the runtime's buckets" in out  # the trial's own are the ring's

    missing = whatif(workdir, str(session), "--trial", "wi-9")
    assert missing.returncode == 1 and "has no trial 'wi-9'; its trials: wi-0" in missing.stderr
