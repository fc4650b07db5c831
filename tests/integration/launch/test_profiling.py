"""spec.profiling: a real `ringleader run` records a window of iterations per rank with PyTorch's profiler; the
trace (Chrome trace JSON, as Perfetto reads it) holds ringleader's phases around the operators they ran, one
ProfilerStep per profiled iteration, and reaches MLflow beside ringleader's own trace."""

from __future__ import annotations

import json

import mlflow.tracking
import pytest

import launching

pytestmark = pytest.mark.integration


def test_a_profiled_window_becomes_a_trace_with_the_phases_and_is_left_out_of_the_timings(workdir):
    path = launching.experiment_file(workdir, "profiled", {
        "architecture": "PeerToPeer",
        "model": {"iterations": 12, "warmupIterations": 2},
        "profiling": {"iterations": 3, "startIteration": 4},
    })

    finished = launching.run(workdir, str(path))

    assert finished.returncode == 0, finished.output
    [session] = [d for d in (workdir / "ringleader-runs").iterdir() if d.is_dir()]
    for rank in (0, 1):
        directory = session / "profiled-0" / f"rank-{rank}"
        trace = json.loads((directory / "profile.json").read_text())
        names = [event.get("name", "") for event in trace["traceEvents"]]
        assert sorted({n for n in names if n.startswith("ProfilerStep#")}) == [
            "ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"]
        phases = {n.removeprefix("ringleader/") for n in names if n.startswith("ringleader/")}
        assert {"time/data", "time/forward", "time/backward", "synchronize"} <= phases
        # operators ran inside the phases: aten ops nest in the forward range's time span
        forward = [e for e in trace["traceEvents"] if e.get("name") == "ringleader/time/forward"]
        assert len(forward) == 3 and any(
            e.get("name", "").startswith("aten::") and f["ts"] <= e["ts"] <= f["ts"] + f["dur"]
            for f in forward for e in trace["traceEvents"])
        records = [json.loads(line) for line in (directory / "iterations.jsonl").read_text().splitlines()]
        assert [r["step"] for r in records if r["warmup"]] == [0, 1, 4, 5, 6]  # profiled: slower, left out

    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("default/profiled")
    [trial] = [r for r in client.search_runs([experiment.experiment_id])
               if r.data.tags.get("ringleader.kind") == "trial"]
    traces = {a.path for a in client.list_artifacts(trial.info.run_id, "traces")}
    assert {"traces/rank-0.profile.json", "traces/rank-1.profile.json", "traces/rank-0.trace.json"} <= traces
