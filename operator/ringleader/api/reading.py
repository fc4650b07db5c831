"""Files a command is given, read within bounds, and the one decoder of their bytes into text.

`read` takes a regular file, a FIFO or standard input ('-'), at most MAX_BYTES, and waits for a FIFO at most
FIFO_WAIT_SECONDS: a device, a socket, a directory or a FIFO nobody writes to ends in one ReadError, never a hang.
`decode` is how every reader of a user's file (experiments here, a network's benchmarks and a model's profile in
planning/) tells text from what is not: one set of checks, one wording.
"""

from __future__ import annotations

import codecs
import os
import select
import stat
import sys
import time
from typing import BinaryIO

MAX_BYTES = 3 * 1024 * 1024
"""The API server's limit on a request body: a larger experiment could never be created."""
FIFO_WAIT_SECONDS = 30.0
"""How long a FIFO (process substitution, `<(envsubst < x.yaml)`) may take to deliver all of it: a generator
writes an experiment in well under a second; nothing writing to it fails within this bound, never hangs."""

STDIN = "-"
_FILE_TYPES = {stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
               stat.S_IFBLK: "a block device"}
_BYTE_ORDER_MARKS = {  # UTF-32's first: UTF-32 LE's mark starts with UTF-16 LE's
    codecs.BOM_UTF32_LE: "UTF-32", codecs.BOM_UTF32_BE: "UTF-32",
    codecs.BOM_UTF16_LE: "UTF-16", codecs.BOM_UTF16_BE: "UTF-16",
}


class ReadError(ValueError):
    """A file that cannot be taken: `problem` is one clause after its name ("is a directory: ..."), `line` the line
    to blame (1-based) where one is, for a refusal that says FILE:LINE."""

    def __init__(self, problem: str, line: int | None = None):
        self.problem, self.line = problem, line
        super().__init__(problem)


def display_name(path: str) -> str:
    return "<stdin>" if path == STDIN else path


def read(path: str) -> bytes:
    """The bytes of the file at `path` ('-': standard input), at most MAX_BYTES, or ReadError."""
    try:
        if path == STDIN:
            data = sys.stdin.buffer.read(MAX_BYTES + 1)
        else:
            with _open_readable(path) as stream:
                data = _read_fifo(stream) if stat.S_ISFIFO(os.fstat(stream.fileno()).st_mode) \
                    else stream.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ReadError("file not found") from None
    except OSError as error:
        raise ReadError(f"cannot be read: {error.strerror or error}") from None
    if len(data) > MAX_BYTES:
        raise ReadError(f"is larger than {MAX_BYTES // 2**20} MiB, the API server's limit for a resource: "
                        "an experiment file is a few kilobytes; is this the right file?")
    return data


def _open_readable(path: str) -> BinaryIO:
    """`path` opened for reading if it is a regular file or a FIFO; ReadError for anything else.

    A device may never end or act when opened, a FIFO with no writer blocks whoever opens it: the type is
    checked before opening, and again on what was opened (the path may have changed in between), which is
    opened without waiting for a writer. A FIFO stays non-blocking, for `_read_fifo`'s bounded wait."""
    _check_readable(os.stat(path).st_mode)
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        mode = os.fstat(descriptor).st_mode
        _check_readable(mode)
        if not stat.S_ISFIFO(mode):
            os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def _read_fifo(stream: BinaryIO) -> bytes:
    """What a FIFO's writers send until the last one closes it, read as it arrives: at most MAX_BYTES + 1 bytes
    (the caller refuses more) within FIFO_WAIT_SECONDS. A FIFO opened before any writer shows no end of file
    until a writer came and went, so one nobody writes to ends in ReadError at the bound, never a hang."""
    deadline = time.monotonic() + FIFO_WAIT_SECONDS
    poller = select.poll()
    poller.register(stream.fileno(), select.POLLIN)
    data = bytearray()
    while len(data) <= MAX_BYTES:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ReadError(f"a FIFO that did not reach its end within {FIFO_WAIT_SECONDS:g} s "
                            f"({len(data)} bytes read): is anything writing to it?")
        if not poller.poll(left * 1000):
            continue
        try:
            chunk = os.read(stream.fileno(), 65536)
        except BlockingIOError:
            continue
        if not chunk:
            break
        data += chunk
    return bytes(data)


def _check_readable(mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise ReadError("is a directory: name an experiment file in it")
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        kind = _FILE_TYPES.get(stat.S_IFMT(mode))
        raise ReadError(f"is not a regular file or a FIFO{f' ({kind})' if kind else ''}: name an experiment file, "
                        f"or {STDIN} to read standard input")


def decode(data: bytes, expected: str, say_line: bool = False) -> str:
    """`data` as UTF-8 text, a byte-order mark dropped; ReadError when it is UTF-16 or UTF-32 (by its mark), binary
    (a NUL byte: not `expected`, "YAML text"), or not UTF-8 (the first byte that is not, and its line: in `line`,
    and in the problem itself with `say_line`, for a refusal that names the file alone)."""
    for mark, encoding in _BYTE_ORDER_MARKS.items():
        if data.startswith(mark):
            raise ReadError(f"is {encoding} text: save it as UTF-8")
    nul = data.find(b"\0")
    if nul >= 0:
        raise ReadError(f"is binary (a NUL byte at offset {nul}), not {expected}")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        where = f" on line {line}" if say_line else ""
        raise ReadError(f"is not UTF-8 text: byte 0x{data[error.start]:02x}{where} is not UTF-8; save the file as "
                        "UTF-8", line) from None
