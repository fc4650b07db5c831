"""A rank's records: one JSON line per iteration, a journal that makes them durable at once, warm-up flagged, whole
files, settings."""

import json
import time

import pytest

from ringleader.contract import journal, records
from ringleader.runtime import settings


def test_each_iteration_is_one_json_line_readable_while_the_rank_runs(tmp_path):
    recorder = records.RankRecorder(tmp_path, "trial-0", 2, "worker", warmup_iterations=1)
    recorder.log_iteration(0, {"time/iteration": 0.5, "loss": 2.0})
    recorder.log_iteration(1, {"time/iteration": 0.25, "loss": float("nan")})
    path = tmp_path / "trial-0" / "rank-2" / "iterations.jsonl"
    # Written by the writer thread as soon as logged: another process (the launcher, the publisher) sees
    # both lines before close().
    deadline = time.monotonic() + 5
    while len(path.read_text().splitlines()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert recorder.iterations == lines
    assert all(abs(line.pop("timestamp") - time.time()) < 60 for line in lines)
    assert lines == [
        {"step": 0, "role": "worker", "warmup": True, "time/iteration": 0.5, "loss": 2.0},
        {"step": 1, "role": "worker", "warmup": False, "time/iteration": 0.25, "loss": None},
    ]
    recorder.close()


def test_a_server_may_flag_warmup_itself(tmp_path):
    recorder = records.RankRecorder(tmp_path, "t", 0, "ps", warmup_iterations=5)
    recorder.log_iteration(9, {"warmup": True, "server/aggregation": 0.1})
    recorder.log_iteration(10, {"server/aggregation": 0.2})
    assert [(r["step"], r["role"], r["warmup"]) for r in recorder.iterations] == [(9, "ps", True), (10, "ps", False)]


def test_close_writes_every_pending_record(tmp_path):
    recorder = records.RankRecorder(tmp_path, "t", 0)
    for step in range(500):
        recorder.log_iteration(step, {"time/iteration": 0.001})
    recorder.close()
    written = records.read_iterations(tmp_path / "t" / "rank-0" / "iterations.jsonl")
    assert [r["step"] for r in written] == list(range(500))
    recorder.close()  # twice is harmless


def test_a_clean_close_leaves_the_whole_jsonl_file_and_no_journal(tmp_path):
    recorder = records.RankRecorder(tmp_path, "t", 0)
    recorder.log_iteration(0, {"time/iteration": 0.1})
    assert (recorder.directory / records.JOURNAL_FILE).exists()
    recorder.close()
    assert not (recorder.directory / records.JOURNAL_FILE).exists()
    assert records.restore(recorder.directory) == 0
    assert [r["step"] for r in records.read_iterations(recorder.directory / records.ITERATIONS_FILE)] == [0]


def test_the_journal_holds_every_record_as_the_jsonl_file_would(tmp_path):
    recorder = records.RankRecorder(tmp_path, "t", 3, "ps", warmup_iterations=1)
    recorder.log_iteration(0, {"time/iteration": 0.5, "loss": float("nan"), "bytes/sent": 12})
    recorder.log_iteration(1, {"warmup": True, "server/aggregation": 0.25})
    recorder.log_iteration(2, {"server/aggregation": 0.5, "note": "not a number"})  # the journal's general path
    recorder.log_iteration(3, {"time/iteration": float("inf"), "loss": 1.0, "bytes/sent": 1})
    durable = journal.read(recorder.directory / records.JOURNAL_FILE)
    assert durable == recorder.iterations
    assert [(r["step"], r["role"], r["warmup"]) for r in durable] == [(0, "ps", True), (1, "ps", True),
                                                                      (2, "ps", False), (3, "ps", False)]
    assert durable[0]["loss"] is None and durable[3]["time/iteration"] is None and durable[2]["note"] == "not a number"
    recorder.close()


def test_the_journal_grows_past_its_first_chunk(tmp_path):
    writer = journal.Writer(tmp_path / "j", constants={"role": "worker"})
    count = 3 * journal.CHUNK_BYTES // 100
    for step in range(count):
        writer.append(step, 1.5, False, {"time/iteration": 0.001, "loss": 2.0})
    writer.close()
    read = journal.read(tmp_path / "j")
    assert len(read) == count and read[-1] == {"step": count - 1, "role": "worker", "time/iteration": 0.001,
                                               "loss": 2.0, "warmup": False, "timestamp": 1.5}


def test_restore_appends_exactly_the_lines_a_dead_rank_did_not_write(tmp_path):
    # What a rank that died leaves: every record in its journal, the JSONL file behind (one line torn).
    directory = records.rank_dir(tmp_path, "t", 0)
    directory.mkdir(parents=True)
    writer = journal.Writer(directory / records.JOURNAL_FILE, constants={"role": "worker"})
    for step in range(5):
        writer.append(step, 1.0, False, {"time/iteration": 0.01})
    path = directory / records.ITERATIONS_FILE
    path.write_text('{"step": 0, "role": "worker"}\n{"step": 1, "ro')
    assert records.restore(directory) == 4
    assert [r["step"] for r in records.read_iterations(path)] == [0, 1, 2, 3, 4]
    assert records.restore(directory) == 0  # idempotent
    assert [r["step"] for r in records.read_iterations(path)] == [0, 1, 2, 3, 4]


def test_a_torn_last_line_is_skipped(tmp_path):
    path = tmp_path / "iterations.jsonl"
    path.write_text('{"step": 0}\n{"step": 1}\n{"step": 2, "ti')
    assert records.read_iterations(path) == [{"step": 0}, {"step": 1}]
    assert records.read_iterations(tmp_path / "missing.jsonl") == []


def test_summary_trace_and_layers_are_whole_json_files(tmp_path):
    recorder = records.RankRecorder(tmp_path, "t", 0)
    recorder.log_summary({"time/iteration": 0.1, "loss": float("inf")})
    recorder.write_trace({"traceEvents": []})
    recorder.write_layers({"iterations": []})
    directory = tmp_path / "t" / "rank-0"
    assert json.loads((directory / "summary.json").read_text()) == {"time/iteration": 0.1, "loss": None}
    assert json.loads((directory / "trace.json").read_text()) == {"traceEvents": []}
    assert json.loads((directory / "layers.json").read_text()) == {"iterations": []}
    assert sorted(p.name for p in directory.iterdir()) == ["iterations.journal", "iterations.jsonl", "layers.json",
                                                          "summary.json", "trace.json"]


def test_settings_have_safe_defaults_and_reject_nonsense():
    assert settings.RankSettings.from_environ({}) == settings.RankSettings()
    custom = settings.RankSettings.from_environ({settings.TIMEOUT_SECONDS: "7.5", settings.BUCKET_BYTES: "1024"})
    assert custom.timeout_seconds == 7.5 and custom.bucket_bytes == 1024
    assert settings.RankSettings.from_environ(custom.to_environ()) == custom
    with pytest.raises(ValueError, match="RINGLEADER_BUCKET_BYTES='lots' must be a number"):
        settings.RankSettings.from_environ({settings.BUCKET_BYTES: "lots"})
    with pytest.raises(ValueError, match="must be greater than 0"):
        settings.RankSettings.from_environ({settings.TIMEOUT_SECONDS: "0"})
