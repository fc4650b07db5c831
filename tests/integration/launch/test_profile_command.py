"""`ringleader profile` for real: one worker of a small sweep run by the local launcher, its profile written, read back
with the model's own parameters, and read by `ringleader whatif`; and the torch.profiler trace a trial's
spec.profiling window writes, read as a profile."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
import subprocess
import sys

import pytest

import launching
from ringleader import api
from ringleader.planning import profiles

pytestmark = pytest.mark.integration


def ringleader(cwd: pathlib.Path, *arguments: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ringleader.cli", *arguments], cwd=cwd,
                          env=launching.launcher_environ(), capture_output=True, text=True, timeout=timeout)


def model_parameters(path: pathlib.Path, trial: int = 0) -> list[tuple[str, int, tuple[int, ...]]]:
    """(name, bytes, shape) of each trainable parameter of the experiment's trial's model, as its ranks build it."""
    from ringleader.runtime import models

    spec = api.expand(api.load(path)).trials[trial].spec
    model = models.build(spec.model, spec.data.synthetic)
    return [(name, p.numel() * p.element_size(), tuple(p.shape)) for name, p in model.named_parameters()
            if p.requires_grad]


def test_profile_records_one_worker_of_a_sweep_and_whatif_reads_the_file(tmp_path):
    path = launching.experiment_file(tmp_path, "plan", {
        "workers": {"replicas": 2}, "model": {"iterations": 20, "warmupIterations": 2},
        "tracking": {"uri": "http://mlflow.private.example:5000"},
        "sweep": {"matrix": {"architecture": ["ParameterServer", "RingAllReduce"]}}})

    done = ringleader(tmp_path, "profile", str(path), "-o", "profile.json", "--iterations", "10",
                      "--records-dir", "records")

    assert done.returncode == 0, done.stderr
    assert "a sweep of 2 trials: profiling trial plan-0 (architecture=ParameterServer)" in done.stderr
    assert "2 warm-up and 10 measured iterations" in done.stderr
    summary, written = done.stdout.splitlines()
    assert written == "Profile: profile.json"
    profile = profiles.read(tmp_path / "profile.json")
    assert summary == profile.summary()
    assert [(g.name, g.size_bytes, g.shape) for g in profile.profile.gradients] == model_parameters(path)
    assert all(0 <= g.ready_seconds <= profile.backward_seconds for g in profile.profile.gradients)
    assert all(value > 0 for value in (profile.forward_seconds, profile.backward_seconds, profile.update_seconds))
    assert profile.forward_seconds + profile.backward_seconds + profile.update_seconds <= profile.iteration_seconds
    assert profile.batch_size == 16 and profile.device.startswith("cpu (") and profile.device.endswith("1 thread)")
    assert profile.source.startswith(f"{tmp_path / 'profile.json'} (ModelProfile file): recorded by `ringleader "
                                     f"profile {path}`: trial plan-0's model mlp as one worker on cpu (")
    assert profile.provenance["experimentSha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (profile.provenance["trial"], profile.provenance["iterations"]) == ("plan-0", 10)
    assert "private" not in (tmp_path / "profile.json").read_text()  # the spec's tracking URI is not kept
    # The records it was read from, kept by --records-dir: a trial directory of one worker, read as any trial's.
    trial_dir = tmp_path / "records" / "plan-profile-0"
    assert len((trial_dir / "rank-0" / "iterations.jsonl").read_text().splitlines()) == 12
    from_records = profiles.read(trial_dir)
    assert dataclasses.replace(from_records, device=profile.device, provenance=profile.provenance) == profile

    whatif = ringleader(tmp_path, "whatif", "profile.json", "--workers", "4", "--bandwidths", "10")
    assert whatif.returncode == 0, whatif.stderr
    assert f"profile.json: {len(profile.profile.gradients)} gradients" in whatif.stdout


def test_the_trace_of_a_trials_profiling_window_reads_as_a_profile(workdir):
    path = launching.experiment_file(workdir, "traced", {
        "architecture": "RingAllReduce", "workers": {"replicas": 1},
        "model": {"iterations": 8, "warmupIterations": 2}, "profiling": {"iterations": 3}})
    finished = launching.run(workdir, str(path), timeout=120)
    assert finished.returncode == 0, finished.output
    [session] = [d for d in (workdir / "ringleader-runs").iterdir() if d.is_dir()]

    traced = profiles.read(session / "traced-0" / "rank-0" / "profile.json")

    parameters = model_parameters(path)
    assert [(g.size_bytes, g.shape) for g in traced.profile.gradients] == [(size, shape) for _, size, shape in
                                                                            parameters]
    assert traced.provenance["steps"] == [2, 3, 4]
    assert "forward estimated" not in traced.source  # ringleader's own ranges were in the trace
    assert all(value > 0 for value in (traced.forward_seconds, traced.backward_seconds, traced.update_seconds))
    assert traced.device == "cpu" and traced.batch_size is None
    recorded = profiles.read(session / "traced-0")
    assert [g.size_bytes for g in recorded.profile.gradients] == [g.size_bytes for g in traced.profile.gradients]
    assert json.loads(json.dumps(profiles.document(traced)))["kind"] == "ModelProfile"
