"""A model's profile, recorded or imported: `read` takes any of the formats below, told apart by content, never by
name; `write` saves ringleader's own (docs/plan.md, "The profile").

- ringleader's profile file (planning/profile_file.py), which `ringleader profile` writes, and the whatif profile
  file it extends;
- a trial directory of `ringleader run`, or one of its rank directories (planning/profile_records.py);
- a torch.profiler Chrome trace, `.json` or gzip'd (planning/profile_trace.py);
- a CSV of layers (planning/profile_csv.py).

Whatever the file holds, `read` returns a ModelProfile or raises ProfileError: one line naming the file, the line to
blame where there is one, and the fix; never another exception. A file is read whole only within its cap
(model_profile.TRACE_CAP_BYTES for a trace, TEXT_CAP_BYTES for the rest), refused past it from its size alone.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import pathlib
import re
import zlib
from typing import Any

from ringleader.planning import profile_csv, profile_file, profile_records, profile_trace
from ringleader.planning.model_profile import (TEXT_CAP_BYTES, TRACE_CAP_BYTES, MIB, ModelProfile, ProfileError,
                                               read_bytes, shown, text)

__all__ = ["ModelProfile", "ProfileError", "document", "read", "write"]

GZIP_MAGIC = b"\x1f\x8b"
YAML_KIND = re.compile(r"^kind:\s*(\S+)", re.MULTILINE)
FORMATS = ("a profile file (JSON), a torch.profiler trace (.json or .json.gz), a CSV of layers, or a trial directory "
           "of `ringleader run`; docs/plan.md")


def read(path: str | os.PathLike) -> ModelProfile:
    """The profile in `path`, whichever format it is in; ProfileError, one line, when it is none or is damaged."""
    path = pathlib.Path(path)
    try:
        return _read(path)
    except OSError as error:  # a directory or file the system will not open (permissions, a name too long)
        raise ProfileError(error.filename or path, f"cannot be read: {error.strerror or error}; check the path and "
                                                   "its permissions") from None


def _read(path: pathlib.Path) -> ModelProfile:
    if path.is_dir():
        return profile_file.check(path, profile_records.from_directory(path))
    data = read_bytes(path, TRACE_CAP_BYTES, "torch.profiler trace")
    if data.startswith(GZIP_MAGIC):
        unpacked = _parse(path, text(path, _gunzip(path, data)), "unpacks to ")
        if not profile_trace.looks_like_trace(unpacked):
            raise ProfileError(path, "unpacks to JSON that is no torch.profiler trace (no traceEvents); a gzip'd "
                                     "profile is a trace")
        return profile_file.check(path, profile_trace.from_document(path, unpacked))
    content = text(path, data)
    if not content.strip():
        raise ProfileError(path, f"is empty; give {FORMATS}")
    if content.lstrip()[:1] in ("{", "["):
        document = _parse(path, content)
        if profile_trace.looks_like_trace(document):
            return profile_file.check(path, profile_trace.from_document(path, document))
        _within_text_cap(path, data, "it is no torch.profiler trace (no traceEvents)")
        return profile_file.from_text(path, content)
    _within_text_cap(path, data, "it is not JSON")
    if profile_csv.looks_like_csv(content):
        return profile_file.check(path, profile_csv.from_text(path, content))
    kind = YAML_KIND.search(content)
    if kind:
        raise ProfileError(path, f"is a YAML document of kind {shown(kind.group(1))}, not a profile (a network's file "
                                 f"goes to `--network`, an experiment to `ringleader profile`); give {FORMATS}")
    raise ProfileError(path,
                       f"is not a profile: neither JSON nor a CSV whose header starts with `layer`; give {FORMATS}")


def _parse(path: pathlib.Path, content: str, what: str = "") -> Any:
    """The JSON document of `content`; ProfileError naming the line where it stops being JSON."""
    try:
        return json.loads(content)
    except json.JSONDecodeError as error:
        raise ProfileError(path, f"{what}not valid JSON: {error.msg} (a file cut short?); give {FORMATS}",
                           error.lineno) from None
    except (ValueError, RecursionError) as error:
        raise ProfileError(path, f"{what}not JSON a profile can hold ({shown(str(error))}); is it the right "
                                 "file?") from None


def _within_text_cap(path: pathlib.Path, data: bytes, because: str) -> None:
    if len(data) > TEXT_CAP_BYTES:
        raise ProfileError(path, f"{len(data) / MIB:.1f} MiB is larger than a profile file or CSV may be "
                                 f"({TEXT_CAP_BYTES // MIB} MiB), and {because}; is it the right file?")


def _gunzip(path: pathlib.Path, data: bytes) -> bytes:
    """A gzip'd file's content, at most TRACE_CAP_BYTES of it (a small file can unpack to gigabytes)."""
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as unpacking:
            content = unpacking.read(TRACE_CAP_BYTES + 1)
    except (OSError, EOFError, zlib.error) as error:
        raise ProfileError(path, f"a gzip file that does not unpack ({shown(str(error))}): cut short? copy it "
                                 "again") from None
    if len(content) > TRACE_CAP_BYTES:
        raise ProfileError(path, f"unpacks to more than {TRACE_CAP_BYTES // MIB} MiB, more than a trace may hold; "
                                 "record fewer steps (torch.profiler.schedule(active=...))")
    return content


def document(profile: ModelProfile) -> dict[str, Any]:
    """ringleader's profile file's document of `profile`: JSON-able; `read` of it gives an equal ModelProfile, and
    `ringleader whatif` reads it as a whatif profile file."""
    return profile_file.document(profile)


def write(profile: ModelProfile, path: str | os.PathLike) -> None:
    """Save `profile` as ringleader's profile file, whole or not at all (written beside it, then moved there)."""
    path = pathlib.Path(path)
    content = profile_file.dumps(profile)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(content, encoding="utf-8")
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
