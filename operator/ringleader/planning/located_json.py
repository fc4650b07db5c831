"""JSON parsed with the line each object starts on, so that a refusal of a profile file's value names its line.

Python's own scanner (the pure-Python one: the C scanner offers no hook) with a wrapper around its object parser;
a few times slower than json.loads, so for the small files (planning/model_profile.TEXT_CAP_BYTES) only.
"""

from __future__ import annotations

import bisect
import json
import json.decoder
import json.scanner
from typing import Any


class Located:
    """A parsed document and the line each of its objects starts on."""

    def __init__(self, document: Any, lines: dict[int, int]):
        self.document = document
        self._lines = lines  # id(object) -> line; the objects live as long as the document

    def line(self, node: Any) -> int | None:
        """The line `node` (an object of the document) starts on; None for anything else."""
        return self._lines.get(id(node))


class _Decoder(json.JSONDecoder):
    def __init__(self, text: str):
        super().__init__()
        newlines = [index for index, character in enumerate(text) if character == "\n"]
        self.lines: dict[int, int] = {}

        def parse_object(s_and_end, *args, **kwargs):
            _, end = s_and_end  # just past the object's "{"
            parsed, after = json.decoder.JSONObject(s_and_end, *args, **kwargs)
            self.lines[id(parsed)] = bisect.bisect_left(newlines, end - 1) + 1
            return parsed, after

        self.parse_object = parse_object
        self.scan_once = json.scanner.py_make_scanner(self)  # type: ignore[attr-defined]  # typeshed omits it


def loads(text: str) -> Located:
    """The document of `text` and its objects' lines; json.JSONDecodeError (with its line) for what is not JSON,
    ValueError or RecursionError as json.loads raises them."""
    decoder = _Decoder(text)
    return Located(decoder.decode(text), decoder.lines)
