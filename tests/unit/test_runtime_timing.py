"""The iteration timer records every phase, traces a window as valid Chrome JSON, and times gradients per layer."""

import json
import time

import pytest
import torch

from ringleader.contract import keys
from ringleader.runtime import straggler, timing

CPU = torch.device("cpu")
SLACK = 0.05  # seconds a loaded test machine may add to a sleep


def run_iteration(timer: timing.IterationTimer, step: int, model=None) -> dict:
    timer.begin(step)
    with timer.phase(keys.TIME_DATA):
        time.sleep(0.002)
    with timer.phase(keys.TIME_FORWARD):
        loss = model(torch.ones(2, 4)).sum() if model is not None else None
        time.sleep(0.003)
    with timer.phase(keys.TIME_BACKWARD):
        if loss is not None:
            loss.backward()
    with timer.phase(keys.TIME_COMM):
        time.sleep(0.001)
    timer.add(keys.BYTES_SENT, 100)
    timer.add(keys.BYTES_SENT, 50)
    timer.set(keys.STALENESS, 2)
    return dict(timer.finish())


def test_each_phase_lands_in_its_metric_and_unused_ones_are_zero():
    metrics = run_iteration(timing.IterationTimer(0, CPU), 0)
    # Sleeps last at least what was asked; a busy machine may stretch them, never shorten them.
    assert 0.002 <= metrics[keys.TIME_DATA] < 0.002 + SLACK
    assert 0.003 <= metrics[keys.TIME_FORWARD] < 0.003 + SLACK
    assert metrics[keys.TIME_WAIT] == 0.0 and metrics[keys.TIME_UPDATE] == 0.0
    assert metrics[keys.BYTES_SENT] == 150 and metrics[keys.STALENESS] == 2
    assert set(timing.ITERATION_KEYS) <= set(metrics)


def test_iteration_time_runs_end_to_end_from_the_previous_iteration():
    timer = timing.IterationTimer(0, CPU)
    first = run_iteration(timer, 0)
    phases = sum(first[name] for name in (keys.TIME_DATA, keys.TIME_FORWARD, keys.TIME_COMM))
    assert first[keys.TIME_ITERATION] >= phases
    time.sleep(0.01)  # work between iterations (logging) belongs to the next iteration's time
    second = run_iteration(timer, 1)
    assert second[keys.TIME_ITERATION] >= 0.01 + 0.006


def test_a_phase_used_twice_in_an_iteration_adds_up():
    timer = timing.IterationTimer(0, CPU)
    timer.begin(0)
    for _ in range(2):
        with timer.phase(keys.TIME_WAIT):
            time.sleep(0.002)
    assert timer.finish()[keys.TIME_WAIT] >= 0.004


def test_only_the_traced_steps_are_in_the_chrome_trace():
    timer = timing.IterationTimer(3, CPU, trace_steps=range(1, 3), label="rank 3 (worker-1)")
    for step in range(4):
        run_iteration(timer, step)
        timer.span("allreduce bucket 0", time.perf_counter() - 0.001, time.perf_counter(), timing.TRACK_COMM)
    trace = json.loads(json.dumps(timer.trace()))  # must survive JSON
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["args"]["step"] for e in complete} == {1, 2}
    assert {e["name"] for e in complete} >= {"data", "forward", "backward", "comm", "iteration 1", "allreduce bucket 0"}
    assert all(e["pid"] == 3 and e["dur"] >= 0 for e in complete)
    forward = next(e for e in complete if e["name"] == "forward")
    assert 3000 <= forward["dur"] < 3000 + 1e6 * SLACK  # microseconds
    assert abs(forward["ts"] / 1e6 - time.time()) < 60  # wall-clock microseconds
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert names >= {"rank 3 (worker-1)", timing.TRACK_MAIN, timing.TRACK_COMM, timing.TRACK_ITERATION}


def test_phases_of_one_iteration_are_ordered_in_the_trace():
    timer = timing.IterationTimer(0, CPU, trace_steps=range(1))
    run_iteration(timer, 0)
    events = {e["name"]: e for e in timer.trace()["traceEvents"] if e["ph"] == "X"}
    assert events["data"]["ts"] + events["data"]["dur"] <= events["forward"]["ts"] + 1
    assert events["forward"]["ts"] + events["forward"]["dur"] <= events["comm"]["ts"] + 1


def test_layer_gradients_are_timed_within_backward_last_layer_first():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    timer = timing.IterationTimer(0, CPU, trace_steps=range(1, 2))
    timer.watch_layers(model)
    for step in range(3):
        model.zero_grad(set_to_none=True)
        run_iteration(timer, step, model)
    layers = json.loads(json.dumps(timer.layers()))
    assert [p["name"] for p in layers["parameters"]] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert layers["parameters"][0]["bytes"] == 4 * 8 * 4
    (iteration,) = layers["iterations"]
    assert iteration["step"] == 1
    ready = iteration["ready"]
    assert set(ready) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    assert all(iteration["backwardStart"] <= t <= iteration["backwardEnd"] for t in ready.values())
    assert ready["2.weight"] <= ready["0.weight"]


def test_sized_communication_spans_become_the_iterations_collectives():
    model = torch.nn.Sequential(torch.nn.Linear(4, 2))
    timer = timing.IterationTimer(0, CPU, trace_steps=range(1))
    timer.watch_layers(model)
    timer.begin(0)
    loss = model(torch.ones(2, 4)).sum()
    with timer.phase(keys.TIME_BACKWARD):
        loss.backward()
    launched = time.perf_counter()
    timer.span("allreduce bucket 0", launched, launched + 0.004, timing.TRACK_COMM, {"bytes": 40})
    timer.span("push", launched, launched + 0.001)  # no size: not a collective the link can be fitted to
    timer.finish()
    (iteration,) = json.loads(json.dumps(timer.layers()))["iterations"]
    (collective,) = iteration["collectives"]
    assert collective["bytes"] == 40
    assert collective["end"] - collective["start"] == pytest.approx(0.004)
    assert iteration["backwardEnd"] <= collective["start"]  # seconds from the iteration's start, as ready times


def test_the_timer_is_cheap_enough_to_leave_on():
    timer = timing.IterationTimer(0, CPU)
    started = time.perf_counter()
    for step in range(2000):
        timer.begin(step)
        for name in (keys.TIME_DATA, keys.TIME_FORWARD, keys.TIME_BACKWARD, keys.TIME_UPDATE):
            with timer.phase(name):
                pass
        timer.finish()
    per_iteration = (time.perf_counter() - started) / 2000
    assert per_iteration < 200e-6, f"{per_iteration * 1e6:.0f} µs per iteration"


def test_a_straggler_sleeps_in_proportion_to_its_compute():
    slow = straggler.Straggler(300, CPU)
    slow.start()
    time.sleep(0.01)
    started = time.perf_counter()
    slow.stretch()
    # 300% means twice the measured compute again: at least 2 x 10 ms.
    assert 0.02 <= time.perf_counter() - started < 0.02 + 3 * SLACK
    assert slow.slept >= 0.02


def test_a_straggler_delays_each_gradient_and_a_normal_worker_does_nothing():
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 64))
    normal = straggler.Straggler(100, CPU)
    normal.attach(model)
    assert not normal.active
    slow = straggler.Straggler(200, CPU)
    slow.attach(model)
    slow.start()
    model(torch.ones(8, 64)).sum().backward()
    slow.stretch()
    assert slow.slept > 0 and normal.slept == 0


class FakeCudaEvent:
    """Stands in for torch.cuda.Event on a machine without a GPU: 'device' time is host time."""

    synchronized = 0

    def __init__(self, enable_timing=False):
        self.at = None

    def record(self):
        self.at = time.perf_counter()

    def synchronize(self):
        FakeCudaEvent.synchronized += 1

    def elapsed_time(self, other):
        return (other.at - self.at) * 1000.0  # milliseconds, as CUDA reports


def test_on_a_gpu_phases_come_from_events_read_after_one_sync_per_iteration(monkeypatch):
    monkeypatch.setattr(torch.cuda, "Event", FakeCudaEvent)
    FakeCudaEvent.synchronized = 0
    timer = timing.IterationTimer(0, torch.device("cuda", 0), trace_steps=range(1, 2))
    results = [run_iteration(timer, step) for step in range(3)]
    assert FakeCudaEvent.synchronized == 3
    for metrics in results:
        assert 0.002 <= metrics[keys.TIME_DATA] < 0.002 + SLACK
        assert 0.003 <= metrics[keys.TIME_FORWARD] < 0.003 + SLACK
    # Events are pooled: no new ones after the first iteration.
    assert len(timer._event_pool) == 2 * 4 + 2
    names = {e["name"] for e in timer.trace()["traceEvents"] if e["ph"] == "X"}
    assert {"data", "forward", "backward", "comm", "iteration 1"} <= names
