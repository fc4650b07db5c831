"""What a rank in a pod says about records MLflow has not taken, and how it hands them over: format/parse pairs.

A rank that finished training while MLflow was away keeps its pod and retries (tracking/live.py), printing the
waiting line; the operator reads it from the pod's log (controller/progress_logs.py) and says RecordsPending.
Past `tracking.recordsWaitSeconds` the rank prints its records as a block in its log (the pod's disk goes
with the pod, its log stays while the pod object does) and fails with the incomplete reason, which the operator
reads from the termination message (RecordsIncomplete). `ringleader publish --from-log` reads the block back
and publishes what MLflow lacks, once (the block carries the publish cursor). Standard library only.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import hashlib
import io
import json
import pathlib
import re
import tarfile
from typing import Any, Iterable, Iterator

# A line read with the kubelet's timestamps (`kubectl logs --timestamps`) starts with its RFC 3339 time.
_STAMP = r"(?:(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) )?"
_WAITING = re.compile(_STAMP + r"records: (\d+) of (\d+) iterations of rank (\d+) published; waiting for MLflow at "
                      r"(\S+) \((\d+) of at most (\d+) s\)", re.MULTILINE)
INCOMPLETE = "records incomplete: "
_INCOMPLETE = re.compile(re.escape(INCOMPLETE) + r"(\d+) of (\d+) iterations of rank (\d+) published")
MARK = "ringleader-records:"
"""Starts every line of a handover block; `ringleader publish --from-log` ignores the log's other lines."""
_BLOCK_LINE = re.compile(r"^(?:\S+ )?" + re.escape(MARK) + r" (begin|part|end) (.*)$")
PART_CHARACTERS = 3000
"""Base64 characters per line of a block: short enough for any log pipeline, few enough lines to stay readable."""
MAX_BLOCK_BYTES = 4 << 20
"""The most a block carries, compressed: the kubelet rotates a container's log at 10 MiB by default, and the base64
of 4 MiB (5.3 MiB) fits with the rest of the log. Traces are left out first when a rank's records weigh more."""
MAX_EXTRACTED_BYTES = 256 << 20
"""The most a block may unpack to: records compress about tenfold, so this bounds a forged block, not a real one."""
LEFT_OUT_FIRST = ("trace.json", "profile.json")


def waiting_line(rank: int, published: int, recorded: int, uri: str, waited: float, wait_seconds: float) -> str:
    """What a rank prints each round while MLflow has not taken its records (`uri` shown without credentials)."""
    return (f"records: {published} of {recorded} iterations of rank {rank} published; waiting for MLflow at {uri} "
            f"({waited:.0f} of at most {wait_seconds:.0f} s)")


@dataclasses.dataclass(frozen=True)
class Waiting:
    """The last waiting line of a rank's log."""

    rank: int
    published: int
    recorded: int
    uri: str
    waited_seconds: int
    wait_seconds: int
    at: datetime.datetime | None = None
    """at is when the line was written, from the kubelet's timestamp; None in a log read without them."""

    def describe(self) -> str:
        return (f"rank {self.rank} has {self.published} of {self.recorded} iterations published, after "
                f"{self.waited_seconds} of at most {self.wait_seconds} s")


def last_waiting(log_text: str) -> Waiting | None:
    """The last waiting line in a log excerpt, or None."""
    found = None
    for stamp, published, recorded, rank, uri, waited, wait in _WAITING.findall(log_text or ""):
        try:
            at = datetime.datetime.fromisoformat(stamp) if stamp else None
        except ValueError:
            at = None
        found = Waiting(int(rank), int(published), int(recorded), uri, int(waited), int(wait), at)
    return found


def incomplete_reason(rank: int, published: int, recorded: int, uri: str, wait_seconds: float) -> str:
    """The failure reason of a rank whose records MLflow did not take within the wait."""
    return (f"{INCOMPLETE}{published} of {recorded} iterations of rank {rank} published: MLflow at {uri} did not "
            f"take the rest within {wait_seconds:g} s (tracking.recordsWaitSeconds); they are in this pod's log, "
            "for `ringleader publish --from-log`")


@dataclasses.dataclass(frozen=True)
class Incomplete:
    rank: int
    published: int
    recorded: int


def incomplete_of(text: str | None) -> Incomplete | None:
    """The counts an incomplete reason (a failure line, a termination message) carries, or None."""
    match = _INCOMPLETE.search(text or "")
    return Incomplete(int(match[3]), int(match[1]), int(match[2])) if match else None


# -- the handover block ---------------------------------------------------------------------------------------


class BlockError(ValueError):
    """A handover block that cannot be read back whole; the message says which and why."""


@dataclasses.dataclass(frozen=True)
class Block:
    """One rank's records handed over: where they belong (`header`) and the files (archive name -> bytes)."""

    header: dict[str, Any]
    files: dict[str, bytes]

    @property
    def name(self) -> str:
        return f"trial {self.header.get('trial')} rank {self.header.get('rank')}"


def _archive(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def block(header: dict[str, Any], files: dict[str, bytes]) -> tuple[str, list[str]]:
    """The block's text (its lines, each ending in a newline) and the names left out to stay within
    MAX_BLOCK_BYTES (traces first); BlockError when even the records alone do not fit."""
    left_out = []
    payload = _archive(files)
    for name in sorted(files, key=lambda n: (pathlib.PurePosixPath(n).name not in LEFT_OUT_FIRST, n)):
        if len(payload) <= MAX_BLOCK_BYTES:
            break
        if pathlib.PurePosixPath(name).name in LEFT_OUT_FIRST:
            files = {k: v for k, v in files.items() if k != name}
            left_out.append(name)
            payload = _archive(files)
    if len(payload) > MAX_BLOCK_BYTES:
        raise BlockError(f"the records take {len(payload)} bytes compressed, more than a pod's log can hold "
                         f"({MAX_BLOCK_BYTES})")
    encoded = base64.b64encode(payload).decode()
    parts = [encoded[i:i + PART_CHARACTERS] for i in range(0, len(encoded), PART_CHARACTERS)] or [""]
    lines = [f"{MARK} begin {json.dumps(header, sort_keys=True)}"]
    lines += [f"{MARK} part {i + 1}/{len(parts)} {part}" for i, part in enumerate(parts)]
    lines.append(f"{MARK} end {hashlib.sha256(payload).hexdigest()}")
    return "".join(line + "\n" for line in lines), left_out


def read_blocks(lines: Iterable[str]) -> Iterator[Block]:
    """The handover blocks in a log, in order; BlockError for one that is cut short or altered."""
    header: dict[str, Any] | None = None
    parts: list[str] = []
    for line in lines:
        match = _BLOCK_LINE.match(line.rstrip("\r\n"))
        if match is None:
            continue
        kind, rest = match.groups()
        if kind == "begin":
            if header is not None:
                raise BlockError(f"the block of trial {header.get('trial')} rank {header.get('rank')} has no end "
                                 "line: the log was cut short (rotated?)")
            try:
                header = json.loads(rest)
            except json.JSONDecodeError as error:
                raise BlockError(f"a block's begin line is not JSON: {error}") from None
            if not isinstance(header, dict):
                raise BlockError("a block's begin line is not a JSON object")
            parts = []
        elif header is None:
            raise BlockError(f"a block's {kind} line comes before its begin line: the log was cut short (rotated?)")
        elif kind == "part":
            number, _, data = rest.partition(" ")
            parts.append(data)
            if number != f"{len(parts)}/{number.partition('/')[2]}":
                raise BlockError(f"the block of trial {header.get('trial')} rank {header.get('rank')} has part "
                                 f"{number} where part {len(parts)} belongs: lines are missing")
        else:
            yield _unpack(header, parts, rest.strip())
            header = None
    if header is not None:
        raise BlockError(f"the block of trial {header.get('trial')} rank {header.get('rank')} has no end line: "
                         "the log was cut short")


def _unpack(header: dict[str, Any], parts: list[str], digest: str) -> Block:
    where = f"trial {header.get('trial')} rank {header.get('rank')}"
    try:
        payload = base64.b64decode("".join(parts), validate=True)
    except ValueError:
        raise BlockError(f"the block of {where} is not base64: the log was altered") from None
    if hashlib.sha256(payload).hexdigest() != digest:
        raise BlockError(f"the block of {where} does not match its checksum: lines are missing or altered")
    files: dict[str, bytes] = {}
    total = 0
    with tarfile.open(fileobj=io.BytesIO(payload), mode="r:gz") as archive:
        for member in archive:
            path = pathlib.PurePosixPath(member.name)
            if not member.isfile() or path.is_absolute() or ".." in path.parts or len(path.parts) > 2:
                raise BlockError(f"the block of {where} holds {member.name!r}, which is not a records file")
            total += member.size
            if total > MAX_EXTRACTED_BYTES:
                raise BlockError(f"the block of {where} unpacks to more than {MAX_EXTRACTED_BYTES} bytes")
            extracted = archive.extractfile(member)
            files[member.name] = extracted.read() if extracted else b""
    return Block(header, files)
