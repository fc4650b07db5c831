"""A model's profile from each format `planning.profiles.read` takes: ringleader's profile file (and the whatif file it
extends), a trial's records, a torch.profiler trace (hand-made for numbers checked by hand, and real ones recorded
here from a tiny model) and a CSV of layers; each number checked by hand."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math

import pytest

from ringleader.models import profile as profile_
from ringleader.api import spec as spec_
from ringleader.api import trial as trial_
from ringleader.planning import profiles
from ringleader.planning.model_profile import ModelProfile

from conftest import ROOT

EXAMPLE_CSV = ROOT / "examples" / "planning" / "layers.csv"
MS, US = 1e-3, 1e-6


def round_trip(read: ModelProfile, tmp_path) -> ModelProfile:
    """What ringleader's profile file of `read` reads back as."""
    path = tmp_path / "round-trip.json"
    profiles.write(read, path)
    return profiles.read(path)


# -- the CSV of layers ------------------------------------------------------------------------


def test_the_example_csv_reads_as_its_comment_and_docs_work_it_through(tmp_path):
    read = profiles.read(EXAMPLE_CSV)
    # Rows conv1, relu1, conv2, pool, fc; backward runs fc (0.4) first, then pool (0.1), conv2 (2.4), relu1 (0.1),
    # conv1 (1.6): fc ready at 0.4 ms, conv2 at 0.4 + 0.1 + 2.4 = 2.9 ms, conv1 at 4.6 ms, the whole backward.
    assert [(g.name, g.size_bytes, g.shape) for g in read.profile.gradients] == [
        ("conv1", 6912, (64, 3, 3, 3)), ("conv2", 294912, (128, 64, 3, 3)), ("fc", 327680, (10, 8192))]
    assert [g.ready_seconds for g in read.profile.gradients] == pytest.approx([4.6 * MS, 2.9 * MS, 0.4 * MS])
    assert read.backward_seconds == pytest.approx(4.6 * MS)
    assert read.forward_seconds == pytest.approx(2.4 * MS)  # 0.8 + 0.1 + 1.2 + 0.1 + 0.2
    assert read.update_seconds == pytest.approx(1.5 * MS)
    assert read.iteration_seconds == pytest.approx(8.8 * MS)  # data 0.3 + 2.4 + 4.6 + update 1.5
    assert (read.batch_size, read.device) == (64, "NVIDIA V100 (illustrative)")
    assert read.source == f"{EXAMPLE_CSV}: a CSV of 5 layers"
    assert read.profile.total_bytes == 629504
    assert round_trip(read, tmp_path) == read


def test_a_csv_in_seconds_and_microseconds_with_its_own_iteration_and_notes(tmp_path):
    path = tmp_path / "layers.csv"
    path.write_text("# measured: by hand on a whiteboard\n# iteration_us: 5000\n"
                    "Layer,Forward_us,backward_s,gradient_bytes\nembed,100,0.001,400\nhead,200,0.002,40\n")
    read = profiles.read(path)
    assert [(g.name, g.ready_seconds) for g in read.profile.gradients] == [
        ("embed", pytest.approx(0.003)), ("head", pytest.approx(0.002))]
    assert read.forward_seconds == pytest.approx(300 * US)
    assert read.iteration_seconds == pytest.approx(5000 * US)
    assert (read.update_seconds, read.batch_size, read.device) == (0.0, None, "unknown")
    assert read.provenance == {"measured": "by hand on a whiteboard"}
    assert "no data_ms: data taken as 0; no update_ms: update taken as 0" in read.source


# -- ringleader's profile file ----------------------------------------------------------------


def a_profile() -> ModelProfile:
    gradients = (profile_.Gradient("w", 4000.0, 0.003, (10, 100)), profile_.Gradient("b", 40.0, 0.001))
    return ModelProfile(profile_.Profile(gradients, 0.004), 0.010, 0.002, 0.001, 32, "cpu (test, 1 thread)",
                        "made by hand", {"host": "here", "torch": "2.9"})


def test_the_profile_file_reads_back_the_same_profile_and_whatif_reads_it(tmp_path):
    path = tmp_path / "profile.json"
    written = a_profile()
    profiles.write(written, path)
    read = profiles.read(path)
    assert read == written
    assert read.source == f"{path} (ModelProfile file): made by hand"
    assert profiles.read(path) == profiles.read(path)  # and again: the chain of sources is not compared
    document = json.loads(path.read_text())
    assert document == profiles.document(written)
    assert (document["kind"], document["version"]) == ("ModelProfile", 1)
    whatif_profile, batch = profile_.from_document(document)  # `ringleader whatif profile.json`
    assert (whatif_profile, batch) == (written.profile, 0.010)
    assert not list(tmp_path.glob(".*tmp"))  # written beside it, then moved there


def test_an_old_whatif_profile_file_is_read_with_forward_half_of_backward_and_no_update(tmp_path):
    path = tmp_path / "old.json"
    old = profile_.Profile((profile_.Gradient("fc", 1e6, 0.0), profile_.Gradient("conv", 2e6, 0.012)), 0.020)
    path.write_text(json.dumps(profile_.document(old, 0.048)))
    read = profiles.read(path)
    assert read.profile == old
    assert (read.iteration_seconds, read.forward_seconds, read.update_seconds) == (0.048, 0.010, 0.0)
    assert (read.batch_size, read.device, read.provenance) == (None, "unknown", {})
    assert "whatif profile file (no forward or update recorded: forward taken as half of backward" in read.source


# -- a trial's records ------------------------------------------------------------------------


def small_trial(spec: dict) -> trial_.Trial:
    return trial_.Trial(experiment="t", name="t-0", index=0, spec=spec_.ExperimentSpec.model_validate(spec))


def record(step: int, warmup: bool = False, **times: float) -> dict:
    return {"step": step, "role": "worker", "warmup": warmup, **{f"time/{k}": v for k, v in times.items()}}


LAYERS = {"rank": 0, "parameters": [{"name": "a", "bytes": 400, "shape": [10, 10]}, {"name": "b", "bytes": 40}],
          "iterations": [
              {"step": 2, "backwardStart": 0.010, "backwardEnd": 0.020, "ready": {"a": 0.019, "b": 0.015}},
              {"step": 3, "backwardStart": 0.010, "backwardEnd": 0.022, "ready": {"a": 0.021, "b": 0.016}},
              {"step": 4, "backwardStart": 0.010, "backwardEnd": 0.018, "ready": {"a": 0.017, "b": 0.014}}]}
RECORDS = [record(0, True, iteration=1.0, backward=0.5), record(1, True, iteration=1.0, backward=0.5),
           record(2, iteration=0.030, comm=0.005, wait=0.001, forward=0.004, backward=0.012, update=0.002),
           record(3, iteration=0.040, comm=0.010, wait=0.0, forward=0.005, backward=0.016, update=0.003),
           record(4, iteration=0.020, comm=0.002, wait=0.0, forward=0.003, backward=0.008, update=0.001)]


def write_trial(directory, trial: trial_.Trial, ranks: dict[int, tuple[dict | None, list[dict]]]):
    directory.mkdir(parents=True)
    (directory / "trial.json").write_text(trial.model_dump_json(by_alias=True))
    (directory / "logs").mkdir()
    for rank, (layers, records) in ranks.items():
        rank_dir = directory / f"rank-{rank}"
        rank_dir.mkdir()
        if layers is not None:
            (rank_dir / "layers.json").write_text(json.dumps(layers))
        (rank_dir / "iterations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        (directory / "logs" / f"rank-{rank}.stdout").write_text(f"config: {{}}\nrank {rank} (worker-0) on cpu, "
                                                                "2 thread(s)\nprogress: ...\n")
    return directory


def test_a_trial_directory_gives_its_lowest_worker_ranks_medians(tmp_path):
    session = tmp_path / "run"
    trial = small_trial({"architecture": "ParameterServer", "workers": {"replicas": 2}, "model": {"batchSize": 24}})
    directory = write_trial(session / "t-0", trial, {0: (None, []), 1: (LAYERS, RECORDS), 2: (LAYERS, RECORDS)})
    (session / "session.json").write_text(json.dumps({
        "trackingUri": "http://user:secret@mlflow.example", "provenance": {
            "host": "box", "ringleader": "0.1.0", "fileSha256": "abc", "command": "ringleader run --tracking-uri x"}}))
    (directory / "outcome.json").write_text(json.dumps({"status": "FINISHED", "startTime": 1.7e9}))
    read = profiles.read(directory)
    # Medians over the traced iterations: a ready 9 ms after backward's start, b 5 ms, backward 10 ms; stretched to
    # the median time/backward after warm-up, 12 ms: a at 10.8 ms, b at 6 ms.
    assert [(g.name, g.size_bytes, g.shape) for g in read.profile.gradients] == [("a", 400, (10, 10)), ("b", 40, None)]
    assert [g.ready_seconds for g in read.profile.gradients] == pytest.approx([0.0108, 0.006])
    assert read.backward_seconds == pytest.approx(0.012)
    # Outside communication and waiting: 24, 30 and 18 ms; their median.
    assert read.iteration_seconds == pytest.approx(0.024)
    assert (read.forward_seconds, read.update_seconds) == (0.004, 0.002)
    assert (read.batch_size, read.device) == (24, "cpu (2 threads)")
    assert read.provenance == {"host": "box", "ringleader": "0.1.0", "fileSha256": "abc", "trial": "t-0",
                               "experiment": "t", "rank": 1, "date": "2023-11-14T22:13:20+00:00"}
    assert "secret" not in json.dumps(profiles.document(read))
    assert read.source.startswith(f"{directory}: trial t-0 (ParameterServer, 2 workers), rank 1, the lowest worker "
                                  "rank with a layers.json (3 iterations after warm-up, 3 traced)")
    assert "a one-worker trial (`ringleader profile`) measures it alone" in read.source
    # One of its rank directories: that rank.
    assert profiles.read(directory / "rank-2").provenance["rank"] == 2
    assert profiles.read(directory / "rank-2") == dataclasses.replace(read, provenance={**read.provenance, "rank": 2})
    assert round_trip(read, tmp_path) == read


def test_a_rank_directory_outside_its_trial_reads_without_a_batch_size(tmp_path):
    rank_dir = tmp_path / "copied"
    rank_dir.mkdir()
    (rank_dir / "layers.json").write_text(json.dumps(LAYERS))
    (rank_dir / "iterations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    read = profiles.read(rank_dir)
    assert (read.batch_size, read.device, read.iteration_seconds) == (None, "unknown", pytest.approx(0.024))
    assert read.source == f"{rank_dir}: records of rank 0 (3 iterations after warm-up, 3 traced)"


# -- a torch.profiler trace, by hand ------------------------------------------------------------


def span(name: str, ts: float, dur: float, **args) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 7, "tid": 7, "ts": ts, "dur": dur, "args": args}


ACCUMULATE = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"


def hand_step(number: int, at: float, length: float, backward: float, ready: tuple[float, float],
              update: float) -> list[dict]:
    """A step of `length` us from `at`: zero_grad 20 us, backward from 300 us for `backward` us, two gradients
    ready `ready` us after backward's start (a float [2, 3], then a half [3]), the optimizer step at 600 us."""
    return [span(f"ProfilerStep#{number}", at, length), span("Optimizer.zero_grad#SGD.zero_grad", at + 10, 20),
            span("aten::addmm", at + 40, 100),
            span("autograd::engine::evaluate_function: AddmmBackward0", at + 300, 50),
            span(ACCUMULATE, at + 300 + ready[0] - 10, 10),
            span("torch::autograd::AccumulateGrad", at + 300 + ready[0] - 8, 5, **{"Input Dims": [[2, 3]],
                                                                                   "Input type": ["float"]}),
            span(ACCUMULATE, at + 300 + ready[1] - 20, 20),
            span("torch::autograd::AccumulateGrad", at + 300 + ready[1] - 15, 5, **{"Input Dims": [[3]],
                                                                                    "Input type": ["c10::Half"]}),
            span("autograd::engine::evaluate_function: TBackward0", at + 300 + backward - 10, 10),
            span("Optimizer.step#SGD.step", at + 600, update)]


def hand_trace() -> dict:
    events = (hand_step(1, 1000, 1000, 230, (110, 220), 100) + hand_step(2, 3000, 1200, 270, (130, 260), 140)
              + hand_step(3, 5000, 800, 190, (90, 180), 60)
              + [span("ProfilerStep#4", 7000, 500), span("aten::mm", 7100, 100)])  # an evaluation: no backward
    return {"schemaVersion": 1, "traceEvents": [{"ph": "M", "name": "process_name", "pid": 7}, *events]}


def test_a_hand_made_trace_gives_the_medians_of_its_training_steps(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(hand_trace()))
    read = profiles.read(path)
    # In parameter order, the reverse of backward's: the half [3] (6 bytes, ready 220 us), the float [2, 3] (24, 110).
    assert [(g.name, g.size_bytes, g.shape) for g in read.profile.gradients] == [
        ("gradient-0", 6, (3,)), ("gradient-1", 24, (2, 3))]
    assert [g.ready_seconds for g in read.profile.gradients] == pytest.approx([220 * US, 110 * US])
    assert read.backward_seconds == pytest.approx(230 * US)
    assert read.forward_seconds == pytest.approx(280 * US)  # 300 us to backward, less zero_grad's 20
    assert read.update_seconds == pytest.approx(100 * US)
    assert read.iteration_seconds == pytest.approx(1000 * US)
    assert (read.batch_size, read.device) == (None, "cpu")
    assert read.source == (f"{path}: a torch.profiler trace, 3 of its 4 ProfilerSteps (#1 to #3); forward estimated "
                           "as the step's start to backward's")
    packed = tmp_path / "trace.json.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    assert profiles.read(packed) == read
    assert round_trip(read, tmp_path) == read


def test_ringleaders_own_ranges_are_taken_where_the_trace_has_them(tmp_path):
    events = [span("ProfilerStep#5", 0, 2000), span("ringleader/time/forward", 100, 300),
              span("ringleader/time/backward", 400, 500), span(ACCUMULATE, 600, 50),
              span("torch::autograd::AccumulateGrad", 610, 5, **{"Input Dims": [[4]], "Input type": ["double"]}),
              span("ringleader/synchronize", 900, 1000), span("ringleader/time/update", 1700, 200)]
    path = tmp_path / "ringleader.json"
    path.write_text(json.dumps(events))  # the bare list form of a Chrome trace
    read = profiles.read(path)
    assert [(g.size_bytes, g.ready_seconds) for g in read.profile.gradients] == [(32, pytest.approx(250 * US))]
    assert (read.forward_seconds, read.backward_seconds, read.update_seconds) == pytest.approx(
        (300 * US, 500 * US, 200 * US))
    assert read.iteration_seconds == pytest.approx(1200 * US)  # 2000, less synchronize's 1000 but its update's 200
    assert read.source.endswith("ProfilerSteps (#5 to #5); ringleader's synchronize left out of the iteration")


# -- a real torch.profiler trace ----------------------------------------------------------------


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A tiny model trained under torch.profiler(record_shapes=True) for 5 steps on the CPU, traced twice: with
    ringleader's ranges and without; (model, trace with, trace without)."""
    torch = pytest.importorskip("torch")
    directory = tmp_path_factory.mktemp("traces")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs, labels = torch.randn(8, 16), torch.randint(0, 4, (8,))

    def trace(path, named: bool):
        def phase(name):
            return torch.profiler.record_function(f"ringleader/time/{name}") if named else _nothing()

        schedule = torch.profiler.schedule(wait=0, warmup=1, active=4)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                                    schedule=schedule, on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as p:
            for _ in range(5):
                optimizer.zero_grad()
                with phase("forward"):
                    loss = torch.nn.functional.cross_entropy(model(inputs), labels)
                with phase("backward"):
                    loss.backward()
                with phase("update"):
                    optimizer.step()
                p.step()
        return path

    return model, trace(directory / "named.json", True), trace(directory / "plain.json", False)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *_):
        return False


@pytest.mark.parametrize("which", [1, 2])
def test_a_real_trace_gives_the_models_gradients_in_parameter_order(recorded, which, tmp_path):
    model, path = recorded[0], recorded[which]
    read = profiles.read(path)
    parameters = list(model.parameters())
    assert [g.shape for g in read.profile.gradients] == [tuple(p.shape) for p in parameters]
    assert [g.size_bytes for g in read.profile.gradients] == [p.numel() * p.element_size() for p in parameters]
    assert 0 < read.profile.gradients[0].ready_seconds <= read.backward_seconds  # the first layer's: last ready
    assert read.profile.gradients[-1].ready_seconds < read.profile.gradients[0].ready_seconds
    assert all(value > 0 for value in (read.forward_seconds, read.backward_seconds, read.update_seconds))
    assert read.forward_seconds + read.backward_seconds + read.update_seconds <= read.iteration_seconds
    assert read.device == "cpu" and read.provenance["steps"] == [1, 2, 3, 4]
    assert ("forward estimated" in read.source) == (which == 2)
    assert math.isfinite(read.iteration_seconds)
    assert round_trip(read, tmp_path) == read
