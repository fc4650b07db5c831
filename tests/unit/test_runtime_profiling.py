"""spec.profiling's window: PyTorch's profiler records exactly the window's steps, labelled, and writes its trace
even when training ends inside the window."""

import json
import types

import torch

from ringleader.api import spec as spec_
from ringleader.runtime import profiling, timing


def train(window: profiling.Window, timer: timing.IterationTimer, steps: int) -> None:
    model = torch.nn.Linear(4, 2)
    try:
        for step in range(steps):
            timer.begin(step)
            window.begin(step, timer)
            with timer.phase("time/forward"):
                model(torch.ones(3, 4)).sum().backward()
            timer.finish()
            window.end(step, timer, last=step + 1 == steps)
    finally:
        window.close(timer)


def profiled_steps(path) -> list[str]:
    names = {event.get("name", "") for event in json.loads(path.read_text())["traceEvents"]}
    return sorted(n for n in names if n.startswith("ProfilerStep#"))


def test_the_window_starts_after_warm_up_by_default_and_labels_only_its_steps(tmp_path):
    timer = timing.IterationTimer(0, torch.device("cpu"))
    window = profiling.Window(spec_.Profiling(iterations=2), warmup_iterations=3, device=torch.device("cpu"),
                              directory=tmp_path)
    assert [window.covers(step) for step in range(6)] == [False, False, False, True, True, False]

    train(window, timer, steps=8)

    trace = tmp_path / "profile.json"
    assert profiled_steps(trace) == ["ProfilerStep#3", "ProfilerStep#4"]
    forward = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("name") == "ringleader/time/forward"]
    assert len(forward) == 2 and not timer.labels


def test_training_that_ends_inside_the_window_still_writes_what_was_recorded(tmp_path):
    timer = timing.IterationTimer(0, torch.device("cpu"))
    window = profiling.Window(spec_.Profiling(iterations=5, startIteration=1), warmup_iterations=0,
                              device=torch.device("cpu"), directory=tmp_path)

    train(window, timer, steps=3)  # stopped at a target, say

    assert profiled_steps(tmp_path / "profile.json") == ["ProfilerStep#1", "ProfilerStep#2"]


def test_no_profiling_no_window():
    spec = spec_.ExperimentSpec()
    assert profiling.Window.of(spec, torch.device("cpu"), types.SimpleNamespace()) is None
