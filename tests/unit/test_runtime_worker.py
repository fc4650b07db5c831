"""The worker loop, in-process with a single-worker ring: phases timed, loss falling, records and progress written."""

import json

import pytest
import torch

from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.contract import environment as contract
from ringleader.contract import keys, progress, records
from ringleader.runtime import ring, worker

CPU = torch.device("cpu")


def train_alone(tmp_path, model: dict, data: dict | None = None, groups: list | None = None,
                interface: str | None = None, network: dict | None = None) -> records.RankRecorder:
    spec = spec_.ExperimentSpec.model_validate({
        "architecture": "RingAllReduce",
        "workers": {"replicas": 1, **({"groups": groups} if groups else {})},
        "model": model,
        "data": {"synthetic": {"samples": 256, "imageSize": 8, "numClasses": 4, **(data or {})}},
        **({"network": network} if network else {}),
    })
    trial = trial_.Trial(experiment="alone", name="alone-0", index=0, spec=spec)
    env = contract.PodEnvironment("worker", 0, 1, "127.0.0.1", 1, "trial.json", str(tmp_path))
    recorder = records.RankRecorder(tmp_path, trial.name, 0, "worker", spec.model.warmup_iterations)
    worker.train(trial, env, ring.RingSynchronizer(trial, env, CPU), recorder, CPU, trace_iterations=3,
                 interface=interface)
    recorder.close()
    return recorder


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_every_iteration_is_recorded_with_its_phases_and_warmup_flag(tmp_path):
    recorder = train_alone(tmp_path, {"name": "mlp", "batchSize": 16, "iterations": 30, "warmupIterations": 3,
                                      "optimizer": {"learningRate": 0.05}})
    lines = records.read_iterations(recorder.directory / records.ITERATIONS_FILE)
    assert [line["step"] for line in lines] == list(range(30))
    assert [line["warmup"] for line in lines] == [True] * 3 + [False] * 27
    for line in lines:
        assert line[keys.TIME_FORWARD] > 0 and line[keys.TIME_BACKWARD] > 0
        assert line[keys.TIME_UPDATE] > 0 and line[keys.TIME_COMM] == 0.0
        phases = sum(line[k] for k in (keys.TIME_DATA, keys.TIME_FORWARD, keys.TIME_BACKWARD,
                                       keys.TIME_UPDATE))
        assert line[keys.TIME_ITERATION] >= phases
    first, last = sum(l["loss"] for l in lines[:5]) / 5, sum(l["loss"] for l in lines[-5:]) / 5
    assert last < 0.5 * first


def test_the_trace_and_layer_timings_cover_the_window_after_warmup(tmp_path):
    recorder = train_alone(tmp_path, {"name": "mlp", "batchSize": 8, "iterations": 10, "warmupIterations": 2})
    trace = json.loads((recorder.directory / records.TRACE_FILE).read_text())
    steps = {e["args"]["step"] for e in trace["traceEvents"] if e["ph"] == "X"}
    assert steps == {2, 3, 4}
    layers = json.loads((recorder.directory / records.LAYERS_FILE).read_text())
    assert [it["step"] for it in layers["iterations"]] == [2, 3, 4]
    assert len(layers["iterations"][0]["ready"]) == len(layers["parameters"]) == 6
    assert len(recorder.summary_extras["parameterDigest"]) == 64


def test_progress_is_printed_about_every_tenth(tmp_path, capsys):
    train_alone(tmp_path, {"name": "mlp", "batchSize": 4, "iterations": 20, "warmupIterations": 1})
    progress = [line.split(" loss")[0] for line in capsys.readouterr().out.splitlines() if line.startswith("progress:")]
    assert progress == [f"progress: iteration {i}/20" for i in range(2, 21, 2)]


def test_progress_is_printed_at_least_every_few_seconds_whatever_the_trials_length(tmp_path, capsys, monkeypatch):
    # A long run's tenth may take minutes; a line every EVERY_SECONDS keeps its status moving. Here every
    # iteration ends past that bound, so each prints one.
    monkeypatch.setattr(progress, "EVERY_SECONDS", 0.0)
    train_alone(tmp_path, {"name": "mlp", "batchSize": 4, "iterations": 20, "warmupIterations": 1})
    printed = [line.split(" loss")[0] for line in capsys.readouterr().out.splitlines() if line.startswith("progress:")]
    assert printed == [f"progress: iteration {i}/20" for i in range(1, 21)]


def test_the_transformer_learns_the_token_chain(tmp_path):
    recorder = train_alone(tmp_path, {"name": "transformer", "batchSize": 8, "iterations": 25, "warmupIterations": 1,
                                      "optimizer": {"name": "Adam", "learningRate": 0.003}},
                           {"numClasses": 16, "sequenceLength": 8})
    losses = [line["loss"] for line in recorder.iterations]
    assert losses[0] == pytest.approx(torch.log(torch.tensor(16.0)).item(), abs=0.5)
    assert sum(losses[-5:]) / 5 < losses[0] - 0.5


@pytest.mark.timing  # it compares two runs' compute times: run with the machine quiet (make test's timed tier)
def test_a_straggler_group_stretches_forward_and_backward(tmp_path):
    model = {"name": "cnn", "batchSize": 8, "iterations": 6, "warmupIterations": 1}
    normal = train_alone(tmp_path / "normal", model)
    slow = train_alone(tmp_path / "slow", model, groups=[{"name": "slow", "replicas": 1, "slowdownPercent": 400}])

    def compute(recorder):
        return sum(l[keys.TIME_FORWARD] + l[keys.TIME_BACKWARD] for l in recorder.iterations[1:])

    # 400% would be 4x; 2x leaves room for a loaded machine slowing the normal run.
    assert compute(slow) > 2 * compute(normal)


def test_measured_iterations_carry_the_interfaces_rates_and_the_trace_shows_them(tmp_path):
    recorder = train_alone(tmp_path, {"name": "mlp", "batchSize": 8, "iterations": 8, "warmupIterations": 2},
                           interface="lo", network={"bandwidth": "1Gbit"})
    lines = records.read_iterations(recorder.directory / records.ITERATIONS_FILE)
    assert not any(keys.LINK_TX in line for line in lines[:2])  # warm-up: not sampled
    for line in lines[2:]:
        assert line[keys.LINK_TX] >= 0 and line[keys.LINK_RX] >= 0
        assert line[keys.LINK_UTILIZATION] == pytest.approx(8 * line[keys.LINK_TX] / 1e9)
    assert "shared" in recorder.summary_extras[keys.LINK_INTERFACE]
    assert recorder.summary_extras[keys.LINK_BITS_PER_SECOND] == 1e9
    trace = json.loads((recorder.directory / records.TRACE_FILE).read_text())
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    assert len(counters) == 3  # one per traced iteration
    assert {e["name"] for e in counters} == {"lo bytes/s"} and all(set(e["args"]) == {"tx", "rx"} for e in counters)


def test_no_interface_no_rates(tmp_path):
    recorder = train_alone(tmp_path, {"name": "mlp", "batchSize": 8, "iterations": 4, "warmupIterations": 1})
    lines = records.read_iterations(recorder.directory / records.ITERATIONS_FILE)
    assert not any(keys.LINK_TX in line for line in lines)
