"""What a pod's rank says about records MLflow has not taken, and the block it hands them over in: read back whole,
or refused with a reason, never half-read."""

import base64
import hashlib
import io
import json
import random
import tarfile

import pytest

from ringleader.contract import unpublished

HEADER = {"trial": "q-0", "rank": 1, "role": "worker", "runToken": "uid.q-0"}
FILES = {"trial.json": b'{"name": "q-0"}', "rank/iterations.jsonl": b'{"step": 0}\n{"step": 1}\n',
         "rank/trace.json": b"[]"}


def test_the_waiting_line_reads_back_with_its_timestamp_and_the_last_one_wins():
    first = unpublished.waiting_line(1, 4, 10, "http://mlflow:5000", 12.4, 900)
    assert first == ("records: 4 of 10 iterations of rank 1 published; waiting for MLflow at http://mlflow:5000 "
                     "(12 of at most 900 s)")
    log = f"noise\n2030-01-01T00:00:10.5Z {first}\n{unpublished.waiting_line(1, 6, 10, 'http://m', 27, 900)}\n"
    assert unpublished.last_waiting(log) == unpublished.Waiting(1, 6, 10, "http://m", 27, 900)
    assert unpublished.last_waiting(log.splitlines()[1]).at.second == 10
    assert unpublished.last_waiting("progress: iteration 3/9\n") is None


def test_the_incomplete_reason_carries_its_counts():
    reason = unpublished.incomplete_reason(2, 5, 20, "http://m", 900)
    assert unpublished.incomplete_of(f"ringleader: rank 2 (worker) failed (permanent): {reason}") == \
        unpublished.Incomplete(2, 5, 20)
    assert unpublished.incomplete_of("ringleader: rank 2 (worker) failed: RuntimeError: boom") is None


def test_a_block_reads_back_whole_from_a_log_with_timestamps_and_other_lines():
    text, left_out = unpublished.block(HEADER, FILES)
    assert left_out == []
    stamped = "".join(f"2030-01-01T00:00:0{i % 10}Z {line}\n" for i, line in enumerate(text.splitlines()))
    [found] = unpublished.read_blocks(["training...\n", *stamped.splitlines(keepends=True), "bye\n"])
    assert (found.header, found.files, found.name) == (HEADER, FILES, "trial q-0 rank 1")


def test_a_block_too_large_for_a_log_leaves_the_traces_out_first(monkeypatch):
    noise = random.Random(0).randbytes(1 << 20)  # 1 MiB that does not compress
    monkeypatch.setattr(unpublished, "MAX_BLOCK_BYTES", 512 * 1024)
    text, left_out = unpublished.block(HEADER, {**FILES, "rank/trace.json": noise})
    assert left_out == ["rank/trace.json"]
    [found] = unpublished.read_blocks(text.splitlines())
    assert ("rank/trace.json" not in found.files
            and found.files["rank/iterations.jsonl"] == FILES["rank/iterations.jsonl"])
    with pytest.raises(unpublished.BlockError, match="more than a pod's log can hold"):
        unpublished.block(HEADER, {**FILES, "rank/iterations.jsonl": noise})


def test_a_block_cut_short_or_altered_is_refused_before_anything_is_read():
    lines = unpublished.block(HEADER, FILES)[0].splitlines()
    with pytest.raises(unpublished.BlockError, match="has no end line"):
        list(unpublished.read_blocks(lines[:-1]))
    with pytest.raises(unpublished.BlockError, match="before its begin line"):
        list(unpublished.read_blocks(lines[1:]))
    altered = [*lines[:-1], f"{unpublished.MARK} end {'0' * 64}"]
    with pytest.raises(unpublished.BlockError, match="does not match its checksum"):
        list(unpublished.read_blocks(altered))


def forged(name: str, data: bytes = b"x", kind: bytes = tarfile.REGTYPE) -> list[str]:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo(name)
        info.size, info.type = (len(data) if kind == tarfile.REGTYPE else 0), kind
        archive.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    payload = buffer.getvalue()
    return [f"{unpublished.MARK} begin {json.dumps(HEADER)}",
            f"{unpublished.MARK} part 1/1 {base64.b64encode(payload).decode()}",
            f"{unpublished.MARK} end {hashlib.sha256(payload).hexdigest()}"]


@pytest.mark.parametrize("name, kind", [("../../etc/passwd", tarfile.REGTYPE), ("/etc/passwd", tarfile.REGTYPE),
                                        ("rank/a/b/c", tarfile.REGTYPE), ("rank/link", tarfile.SYMTYPE)])
def test_a_forged_block_naming_anything_but_a_records_file_is_refused(name, kind):
    with pytest.raises(unpublished.BlockError, match="which is not a records file"):
        list(unpublished.read_blocks(forged(name, kind=kind)))
