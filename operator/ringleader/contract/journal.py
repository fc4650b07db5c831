"""A rank's records as packed binary in a memory-mapped file: durable the moment they are appended; used by records.py.

Why: a record must survive the abrupt death of its process (SIGKILL, os._exit, the OOM killer) without
costing the training loop a system call or a JSON encoding per iteration. Stores into a MAP_SHARED file
mapping land in the kernel's page cache, which outlives the process; appending is a struct.pack_into.

Layout: the 8-byte magic b"RLJOUR01", then entries, each a little-endian uint32 payload length then the
payload; a zero length ends the journal (the file is grown in zero-filled chunks). The length is stored
after the payload, so an entry cut short by a death mid-append reads as the end. Payloads:
  b"S" uint16 id, then UTF-8 JSON {"keys": [...], "constants": {...}}: a schema, written once per new
       set of keys; constants (a rank's role) are added to each of its records when read;
  b"R" uint16 schema id, int64 step, float64 timestamp, uint8 warmup, then one float64 per key: a record
       whose metrics are all numbers or booleans;
  b"J" then UTF-8 JSON: any other record (a slow path for values that are not numbers).
"""

from __future__ import annotations

import json
import math
import mmap
import os
import pathlib
import struct

from ringleader.contract import keys

MAGIC = b"RLJOUR01"
CHUNK_BYTES = 1 << 20  # 1 MiB: ~8000 records before the first growth; allocated on disk at once (_allocate)
_LENGTH = struct.Struct("<I")
_ID = struct.Struct("<H")


class Writer:
    """Appends records; not thread-safe (the training thread is its one caller)."""

    def __init__(self, path: pathlib.Path, constants: dict | None = None):
        self.path = path
        self.constants = constants or {}
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            _allocate(self._fd, CHUNK_BYTES)
            self._map = mmap.mmap(self._fd, CHUNK_BYTES)
        except BaseException:
            os.close(self._fd)
            raise
        self._map[: len(MAGIC)] = MAGIC
        self._offset = len(MAGIC)
        self._schemas: dict[tuple[str, ...], tuple[int, struct.Struct]] = {}

    def append(self, step: int, timestamp: float, warmup: bool, metrics: dict) -> None:
        names = tuple(metrics)
        schema = self._schemas.get(names)
        if schema is None:
            if not all(isinstance(v, (int, float)) for v in metrics.values()):
                self._general(step, timestamp, warmup, metrics)
                return
            schema = self._schemas[names] = (len(self._schemas), _record_struct(len(names)))
            self._entry(b"S" + _ID.pack(schema[0]) + json.dumps({"keys": names, "constants": self.constants}).encode())
        number, packer = schema
        end = self._offset + _LENGTH.size + packer.size
        if end + _LENGTH.size > len(self._map):
            self._grow(end + _LENGTH.size)
        try:
            packer.pack_into(self._map, self._offset + _LENGTH.size, b"R", number, step, timestamp, warmup,
                             *metrics.values())
        except struct.error:  # a value of another type under known keys: take the general path
            self._general(step, timestamp, warmup, metrics)
            return
        _LENGTH.pack_into(self._map, self._offset, packer.size)  # last: the entry exists from here on
        self._offset = end

    def _general(self, step: int, timestamp: float, warmup: bool, metrics: dict) -> None:
        record = {keys.STEP: step, **self.constants, **metrics, keys.WARMUP: warmup, keys.TIMESTAMP: timestamp}
        self._entry(b"J" + json.dumps(record, default=str).encode())

    def _entry(self, payload: bytes) -> None:
        end = self._offset + _LENGTH.size + len(payload)
        if end + _LENGTH.size > len(self._map):
            self._grow(end + _LENGTH.size)
        self._map[self._offset + _LENGTH.size:end] = payload
        _LENGTH.pack_into(self._map, self._offset, len(payload))
        self._offset = end

    def _grow(self, needed: int) -> None:
        size = len(self._map)
        while size < needed:
            size *= 2
        _allocate(self._fd, size)
        self._map.resize(size)

    def close(self, remove: bool = False) -> None:
        if not self._map.closed:
            self._map.close()
            os.close(self._fd)
        if remove:
            self.path.unlink(missing_ok=True)


def _allocate(fd: int, size: int) -> None:
    """Give the file `size` bytes of real disk blocks, zero-filled. A sparse file would do until the disk is full;
    then a store into an unbacked page kills the process with SIGBUS. Allocated up front, a full disk is an
    OSError (ENOSPC) here, when the journal starts or grows, which the rank reports as its failure."""
    os.posix_fallocate(fd, 0, size)


def read(path: str | os.PathLike) -> list[dict]:
    """Every record of a journal, as dicts like the JSONL file's (non-finite numbers as None)."""
    data = pathlib.Path(path).read_bytes()
    if not data.startswith(MAGIC):
        return []
    schemas: dict[int, tuple[list[str], dict, struct.Struct]] = {}
    found, offset = [], len(MAGIC)
    while offset + _LENGTH.size <= len(data):
        (length,) = _LENGTH.unpack_from(data, offset)
        payload = data[offset + _LENGTH.size: offset + _LENGTH.size + length]
        if length == 0 or len(payload) < length:
            break
        offset += _LENGTH.size + length
        kind = payload[:1]
        if kind == b"S":
            schema = json.loads(payload[3:])
            names = schema["keys"]
            schemas[_ID.unpack_from(payload, 1)[0]] = (names, schema["constants"], _record_struct(len(names)))
        elif kind == b"R":
            names, constants, packer = schemas[_ID.unpack_from(payload, 1)[0]]
            _, _, step, timestamp, warmup, *values = packer.unpack(payload)
            metrics = {key: value if math.isfinite(value) else None for key, value in zip(names, values)}
            found.append({keys.STEP: step, **constants, **metrics, keys.WARMUP: bool(warmup),
                          keys.TIMESTAMP: timestamp})
        elif kind == b"J":
            found.append(json.loads(payload[1:]))
    return found


def _record_struct(metrics: int) -> struct.Struct:
    return struct.Struct(f"<cHqd?{metrics}d")
