"""Hostile profile files: every one refused by `planning.profiles.read` with ProfileError, one line that names the
file, the line where a line is to blame, and the fix; never another exception. An enormous file is refused from its
size, unread. And a truncation fuzz: an example profile file and the example CSV cut at every ~50th byte either read
or are refused so."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import time
from typing import Callable

import pytest

from ringleader.models import profile as profile_
from ringleader.planning import profiles
from ringleader.planning.model_profile import ModelProfile, ProfileError

from conftest import ROOT

MIB = 1 << 20
GOOD = {"kind": "ModelProfile", "version": 1, "batchSeconds": 0.01, "forwardSeconds": 0.002,
        "backwardSeconds": 0.004, "updateSeconds": 0.001,
        "gradients": [{"name": "w", "bytes": 4000, "readySeconds": 0.003}, {"name": "b", "bytes": 40,
                                                                            "readySeconds": 0.001}]}
HEADER = "layer,forward_ms,backward_ms,gradient_bytes\n"
ACCUMULATE = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"


def profile_text(**changes) -> str:
    """GOOD with `changes` (a value None drops the field), one field per line and one gradient per line."""
    document = {k: v for k, v in {**GOOD, **changes}.items() if v is not None}
    gradients = document.pop("gradients", None)
    lines = [f' "{k}": {json.dumps(v)},' for k, v in document.items()]
    if gradients is None:
        return "{\n" + "\n".join(lines)[:-1] + "\n}\n"
    return "{\n" + "\n".join(lines) + '\n "gradients": [\n' + ",\n".join(
        f"  {json.dumps(g)}" for g in gradients) + "\n ]\n}\n"


def trace(*events: dict) -> str:
    return json.dumps({"traceEvents": list(events)})


def event(name: str, ts: float, dur: float, **args) -> dict:
    return {"ph": "X", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def step_with(*events: dict) -> str:
    return trace(event("ProfilerStep#0", 0, 1000), *events)


@pytest.fixture
def cases(tmp_path) -> Callable[[str, bytes | str], pathlib.Path]:
    def write(name: str, content: bytes | str) -> pathlib.Path:
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
        return path
    return write


# name -> (content, the line to blame or None, words the message says)
FILES: dict[str, tuple[bytes | str, int | None, str]] = {
    "empty.json": ("", None, "is empty"),
    "blank.csv": ("\n  \n\t\n", None, "is empty"),
    "truncated.json": (profile_text()[:120], 7, "not valid JSON"),
    "network.yaml": ("apiVersion: ringleader.dev/v1\nkind: NetworkBenchmark\nlinks: []\n", None, "--network"),
    "network.json": (json.dumps({"kind": "NetworkBenchmark", "links": []}), 1, "--network"),
    "wrong-kind.json": (profile_text(kind="DistributedTrainingExperiment"), 1, "not a model profile"),
    "newer.json": (profile_text(version=2), 1, "upgrade ringleader"),
    "version-text.json": (profile_text(version="1"), 1, '"version": 1'),
    "array.json": ("[1, 2, 3]\n", None, "not a profile"),
    "nan-batch.json": (profile_text(batchSeconds=float("nan")), 1, "`batchSeconds` is nan"),
    "inf-backward.json": (profile_text().replace('"backwardSeconds": 0.004', '"backwardSeconds": 1e999'), 1,
                          "`backwardSeconds` is inf"),
    "negative-update.json": (profile_text(updateSeconds=-0.001), 1, "`updateSeconds` is -0.001"),
    "text-forward.json": (profile_text(forwardSeconds="2ms"), 1, "`forwardSeconds` is '2ms'"),
    "no-gradients.json": (profile_text(gradients=[]), 1, "non-empty list"),
    "gradients-missing.json": (profile_text(gradients=None), 1, "`gradients` must be"),
    "zero-bytes.json": (profile_text(gradients=[{"bytes": 0, "readySeconds": 0.001}]), 1, "add up to 0 bytes"),
    "negative-ready.json": (profile_text(gradients=[GOOD["gradients"][0], {"bytes": 4, "readySeconds": -1}]), 10,
                            "`gradients[1].readySeconds` is -1"),
    "ready-after-backward.json": (profile_text(gradients=[{"bytes": 4, "readySeconds": 0.009}]), 9,
                                  "after backward's end"),
    "bytes-text.json": (profile_text(gradients=[{"bytes": "4 KB", "readySeconds": 0.001}]), 9,
                        "`gradients[0].bytes` is '4 KB'"),
    "gradient-number.json": (profile_text(gradients=[7]), 1, "`gradients[0]` is 7"),
    "phases-exceed.json": (profile_text(forwardSeconds=0.02), 1, "add up to more than the iteration"),
    "bad-shape.json": (profile_text(gradients=[{"bytes": 4, "readySeconds": 0.001, "shape": [2, "x"]}]), 9,
                       "`gradients[0].shape`"),
    "nested.json": ("[" * 100_000 + "]" * 100_000, None, "JSON"),
    "huge-int.json": ('{"batchSeconds": ' + "9" * 10_000 + "}", None, "JSON"),
    "units-missing.csv": ("# batch_size: 8\n" + "layer,forward,backward,gradient_bytes\nfc,1,2,4\n", 2,
                          "column forward has no unit: name it forward_ms"),
    "bytes-unit-missing.csv": ("layer,forward_ms,backward_ms,gradient\nfc,1,2,4\n", 1, "gradient_bytes"),
    "odd-unit.csv": ("layer,forward_ms,backward_sec,gradient_bytes\nfc,1,2,4\n", 1, "_s, _ms or _us"),
    "unknown-column.csv": ("layer,forward_ms,backward_ms,gradient_bytes,colour\nfc,1,2,4,red\n", 1, "'colour'"),
    "negative.csv": (HEADER + "fc,1,-2,4\n", 2, "'-2': it must be a finite number, 0 or more"),
    "nan.csv": (HEADER + "conv,1,2,4\nfc,nan,2,4\n", 3, "'nan'"),
    "inf.csv": (HEADER + "fc,1,inf,4\n", 2, "'inf'"),
    "non-numeric.csv": (HEADER + "fc,one,2,4\n", 2, "'one' is not a number"),
    "short-row.csv": (HEADER + "fc,1,2\n", 2, "3 fields where the header has 4"),
    "metadata-typo.csv": ("# batchsize: 64\n" + HEADER + "fc,1,2,4\n", 1, "did you mean batch_size"),
    "metadata-unitless.csv": ("# update: 1.5\n" + HEADER + "fc,1,2,4\n", 1, "did you mean update_ms"),
    "metadata-after-header.csv": (HEADER + "# batch_size: 8\nfc,1,2,4\n", 2, "above the header"),
    "bad-batch.csv": ("# batch_size: 0\n" + HEADER + "fc,1,2,4\n", 1, "a whole number of 1 or more"),
    "header-only.csv": ("# device: x\n" + HEADER, None, "no layers under the header"),
    "no-gradient.csv": (HEADER + "relu,1,2,0\n", None, "gradient_bytes all 0"),
    "no-backward.csv": (HEADER + "fc,1,0,4\n", None, "backward adds up to 0"),
    "short-iteration.csv": ("# iteration_ms: 1\n" + HEADER + "fc,1,2,4\n", 1, "shorter than data, forward"),
    "unquoted.csv": (HEADER + 'fc,"1,2,4\n', 2, "not a CSV line"),
    "not-a-profile.txt": ("hello, world\n", None, "neither JSON nor a CSV"),
    "trace-no-step.json": (trace(event("aten::mm", 0, 10)), None, "no ProfilerStep#N span"),
    "trace-no-backward.json": (step_with(event("aten::mm", 10, 10)), None, "ran backward"),
    "trace-no-shapes.json": (step_with(event("autograd::engine::evaluate_function: MmBackward0", 100, 50),
                                       event(ACCUMULATE, 160, 10)), None, "record_shapes=True"),
    "trace-no-gradient.json": (step_with(event("autograd::engine::evaluate_function: MmBackward0", 100, 50)), None,
                               "accumulated no gradient"),
    "trace-odd-type.json": (step_with(event(ACCUMULATE, 160, 10,
                                            **{"Input Dims": [[4]], "Input type": ["quaternion"]})),
                            None, "'quaternion'"),
    "trace-odd-dims.json": (step_with(event(ACCUMULATE, 160, 10, **{"Input Dims": [[-4]], "Input type": ["float"]})),
                            None, "not a shape"),
    "trace-events-text.json": (json.dumps({"traceEvents": "none"}), None, "not a list of events"),
    "binary.bin": (bytes(range(256)) * 8, None, "is binary (a NUL byte at offset 0), not a profile"),
    "utf-16.csv": ("layer,forward_ms,backward_ms,gradient_bytes\nfc,1,2,4\n".encode("utf-16"), None, "is UTF-16 text"),
    "latin1.csv": ("layer,forward_ms,backward_ms,gradient_bytes\ncafé,1,2,4\n".encode("latin-1"), 2, "UTF-8"),
    "truncated.json.gz": (gzip.compress(trace(event("ProfilerStep#0", 0, 10)).encode())[:30], None, "does not unpack"),
    "profile.json.gz": (gzip.compress(profile_text().encode()), None, "no torch.profiler trace"),
    "broken.json.gz": (gzip.compress(b'{"traceEvents": [\n'), 2, "unpacks to not valid JSON"),
}


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_hostile_file_is_refused_in_one_line_naming_it_and_the_fix(cases, name):
    content, line, words = FILES[name]
    path = cases(name, content)
    with pytest.raises(ProfileError) as refused:
        profiles.read(path)
    assert_one_line(refused.value, path, line)
    assert words in str(refused.value)


def assert_one_line(error: ProfileError, path: pathlib.Path, line: int | None) -> None:
    message = str(error)
    assert "\n" not in message and len(message) < 600, message
    assert message.startswith(f"{path}:{line}: " if line is not None else f"{path}: "), message
    assert ";" in message or "?" in message or ":" in message.removeprefix(f"{path}:"), message  # a fix, or a why


def test_there_are_at_least_twenty_hostile_files():
    assert len(FILES) >= 20


def test_an_enormous_file_is_refused_from_its_size_unread(tmp_path):
    path = tmp_path / "enormous.json"
    with open(path, "wb") as handle:
        handle.truncate(65 * MIB)  # sparse: no disk, and reading it whole would take a while
    started = time.process_time()
    with pytest.raises(ProfileError) as refused:
        profiles.read(path)
    assert time.process_time() - started < 0.5
    assert_one_line(refused.value, path, None)
    assert "65.0 MiB is larger than a torch.profiler trace may be (64 MiB)" in str(refused.value)


def test_a_profile_file_past_the_text_cap_is_refused_though_a_trace_may_be_that_large(tmp_path):
    path = tmp_path / "large.csv"
    path.write_text(HEADER + "fc,1,2,4\n" * (5 * MIB // 9))
    with pytest.raises(ProfileError) as refused:
        profiles.read(path)
    assert_one_line(refused.value, path, None)
    assert "larger than a profile file or CSV may be (4 MiB)" in str(refused.value)


def test_a_gzip_bomb_is_refused_at_the_cap(tmp_path):
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip.compress(b" " * (65 * MIB), compresslevel=9))
    with pytest.raises(ProfileError) as refused:
        profiles.read(path)
    assert_one_line(refused.value, path, None)
    assert "unpacks to more than 64 MiB" in str(refused.value)


def test_what_is_no_profile_on_the_file_system_is_refused(tmp_path):
    missing = tmp_path / "missing.json"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "empty-dir").mkdir()
    run = tmp_path / "run"
    (run / "t-0").mkdir(parents=True)
    (run / "session.json").write_text("{}")
    (run / "t-0" / "trial.json").write_text("{}")
    for path, words in ((missing, "no such file or directory"), (fifo, "not a regular file"),
                        (tmp_path / "empty-dir", "a directory without a trial"),
                        (run, "is a run directory of `ringleader run`"), (run / "t-0", "damaged, not a trial")):
        with pytest.raises(ProfileError) as refused:
            profiles.read(path)
        assert words in str(refused.value)
        assert_one_line(refused.value, path if path != run / "t-0" else path / "trial.json", None)


def trial_dir(tmp_path, layers: str | None, records: str = "") -> pathlib.Path:
    """A one-worker trial's directory with `layers` as rank 0's layers.json (None: none) and its iterations.jsonl."""
    from ringleader.api import spec as spec_
    from ringleader.api import trial as trial_

    directory = tmp_path / "t-0"
    (directory / "rank-0").mkdir(parents=True)
    trial = trial_.Trial(experiment="t", name="t-0", index=0,
                         spec=spec_.ExperimentSpec.model_validate({"architecture": "RingAllReduce",
                                                                   "workers": {"replicas": 1}}))
    (directory / "trial.json").write_text(trial.model_dump_json(by_alias=True))
    if layers is not None:
        (directory / "rank-0" / "layers.json").write_text(layers)
    (directory / "rank-0" / "iterations.jsonl").write_text(records)
    return directory


LAYERS = json.dumps({"parameters": [{"name": "w", "bytes": 40}], "iterations": [
    {"backwardStart": 0.0, "backwardEnd": 0.01, "ready": {"w": 0.005}}]})
RECORD = json.dumps({"step": 5, "role": "worker", "time/iteration": 0.02, "time/backward": 0.01}) + "\n"


@pytest.mark.parametrize("layers, records, blamed, line, words", [
    (None, RECORD, "t-0", None, "no worker rank of trial t-0 has a layers.json"),
    (LAYERS[:40], RECORD, "t-0/rank-0/layers.json", 1, "not valid JSON"),
    (json.dumps({"parameters": "w", "iterations": []}), RECORD, "t-0/rank-0/layers.json", None, "`parameters`"),
    (json.dumps({"parameters": [], "iterations": []}), RECORD, "t-0/rank-0/layers.json", None, "no traced iteration"),
    (json.dumps({"parameters": [], "iterations": [{"backwardStart": "x"}]}), RECORD, "t-0/rank-0/layers.json", None,
     "not the runtime's"),
    (LAYERS, "", "t-0/rank-0/iterations.jsonl", None, "no worker iteration after warm-up"),
    (LAYERS, RECORD.replace("0.02", "NaN") + "not json\n" + '{"step": 6}\n', "t-0/rank-0/iterations.jsonl", None,
     "no worker iteration after warm-up"),
    (LAYERS, RECORD + "[" * 50_000 + "\n", "t-0/rank-0/iterations.jsonl", None, "nests too deep"),
    (LAYERS.replace('"bytes": 40', '"bytes": 0'), RECORD, "t-0", None, "add up to 0 bytes"),
    (json.dumps({"parameters": [{"name": "w", "bytes": 40}], "iterations": [
        {"backwardStart": 0.0, "backwardEnd": 0.01, "ready": {"v": 0.005}}]}), RECORD, "t-0/rank-0/layers.json", None,
     "not what the runtime writes"),
])
def test_damaged_trial_records_are_refused_naming_the_file(tmp_path, layers, records, blamed, line, words):
    directory = trial_dir(tmp_path, layers, records)
    with pytest.raises(ProfileError) as refused:
        profiles.read(directory)
    assert_one_line(refused.value, tmp_path / blamed, line)
    assert words in str(refused.value)


def example_profile_file(tmp_path) -> pathlib.Path:
    path = tmp_path / "example.json"
    gradients = tuple(profile_.Gradient(f"layer{i}.weight", 4096.0 * (i + 1), 0.0001 * (9 - i), (32, 32 * (i + 1)))
                      for i in range(8))
    profiles.write(ModelProfile(profile_.Profile(gradients, 0.001), 0.004, 0.0005, 0.0002, 16, "cpu (test)",
                                "made by hand", {"host": "here"}), path)
    return path


@pytest.mark.parametrize("example", ["profile file", "csv"])
def test_every_truncation_of_an_example_either_reads_or_is_refused(tmp_path, example):
    whole = (example_profile_file(tmp_path) if example == "profile file" else ROOT / "examples" / "planning" /
             "layers.csv").read_bytes()
    cut = tmp_path / ("cut.json" if example == "profile file" else "cut.csv")
    outcomes = {"read": 0, "refused": 0}
    for length in range(0, len(whole), max(1, len(whole) // 50)):
        cut.write_bytes(whole[:length])
        try:
            profiles.read(cut)
        except ProfileError as error:
            assert "\n" not in str(error) and str(error).startswith(str(cut)), error
            outcomes["refused"] += 1
        else:
            outcomes["read"] += 1
    assert outcomes["refused"] > 0
    if example == "csv":
        assert outcomes["read"] > 0  # a cut after a whole row is a shorter CSV
