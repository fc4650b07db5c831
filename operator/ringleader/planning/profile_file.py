"""ringleader's profile file: a ModelProfile as JSON, what `ringleader profile` writes and `ringleader predict
--profile` reads (docs/plan.md, "The profile").

It extends the whatif profile file (docs/whatif.md: batchSeconds, backwardSeconds, gradients) with a kind and
version, forwardSeconds, updateSeconds, batchSize, device, source and provenance, so `ringleader whatif` reads the
new file as it reads the old (models.profile.from_document), and this reads an old one: with no forward or update
recorded, forward is taken as half of backward (the usual ratio: backward computes two products per layer to
forward's one) and update as 0, and its source says so.
"""

from __future__ import annotations

import json
import math
import pathlib
from typing import Any, Mapping

from ringleader.models import profile as profile_
from ringleader.planning import located_json
from ringleader.planning.model_profile import ModelProfile, ProfileError, is_number, seconds, shown

KIND = "ModelProfile"
VERSION = 1
FORWARD_PER_BACKWARD = 0.5
"""FORWARD_PER_BACKWARD: forward's share of backward, where an old whatif profile file records no forward."""
READY_SLACK = 1e-6
"""READY_SLACK: how far past backward's end (relative) a ready time may be before it is refused (rounding)."""
PHASES_SLACK = 0.10
"""PHASES_SLACK: how much (relative) forward + backward + update may exceed the iteration, as medians of separate
phases may, before the file is refused."""
MAX_TEXT = 500


def from_text(path: pathlib.Path, text: str) -> ModelProfile:
    """The profile file's ModelProfile; ProfileError naming the line to blame."""
    try:
        located = located_json.loads(text)
    except json.JSONDecodeError as error:
        raise ProfileError(path, f"not valid JSON: {error.msg}; a profile file is one JSON object "
                                 "(docs/plan.md)", error.lineno) from None
    except (ValueError, RecursionError) as error:
        raise ProfileError(path, f"not a JSON profile: {shown(str(error))}") from None
    return from_located(path, located)


def from_located(path: pathlib.Path, located: located_json.Located) -> ModelProfile:
    document = located.document
    if not isinstance(document, dict):
        raise ProfileError(path, f"is JSON {type(document).__name__}, not a profile: a profile file is one object "
                                 "with batchSeconds, backwardSeconds and gradients (docs/plan.md)")
    top = located.line(document)
    legacy = "kind" not in document
    if not legacy:
        _check_kind(path, document, top)
    batch = seconds(path, document.get("batchSeconds"), "batchSeconds", top, positive=True)
    backward = seconds(path, document.get("backwardSeconds"), "backwardSeconds", top)
    gradients = _gradients(path, document.get("gradients"), backward, located)
    profile = profile_.Profile(gradients, backward)
    if legacy:
        forward, update = min(FORWARD_PER_BACKWARD * backward, max(0.0, batch - backward)), 0.0
        source = (f"{path}: a whatif profile file (no forward or update recorded: forward taken as half of "
                  "backward, update as 0)")
    else:
        forward = seconds(path, document.get("forwardSeconds"), "forwardSeconds", top)
        update = seconds(path, document.get("updateSeconds"), "updateSeconds", top)
        origin = _text(path, document.get("source", "no source recorded"), "source", top)
        source = f"{path} ({KIND} file): {origin}"
    if forward + backward + update > batch * (1 + PHASES_SLACK):
        raise ProfileError(path, f"forward, backward and update ({forward:g} + {backward:g} + {update:g} s) add up to "
                                 f"more than the iteration (`batchSeconds` {batch:g} s), which holds them; correct "
                                 "the times", top)
    return ModelProfile(profile, batch, forward, update, _batch_size(path, document.get("batchSize"), top),
                        _text(path, document.get("device", "unknown"), "device", top), source,
                        _provenance(path, document.get("provenance", {}), top))


def _check_kind(path: pathlib.Path, document: Mapping[str, Any], line: int | None) -> None:
    kind, version = document.get("kind"), document.get("version")
    if kind != KIND:
        raise ProfileError(path, f"is a {shown(kind)} document, not a model profile (`kind: {KIND}`): is it the "
                                 "right file? (a network's file goes to `--network`)", line)
    if is_number(version) and version == int(version) and version > VERSION:
        raise ProfileError(path, f"is a {KIND} of version {int(version)}, newer than this ringleader reads "
                                 f"({VERSION}); upgrade ringleader", line)
    if version != VERSION or isinstance(version, bool):
        raise ProfileError(path, f"`version` is {shown(version)}: a {KIND} file says `\"version\": {VERSION}`", line)


def _gradients(path: pathlib.Path, entries: Any, backward: float,
               located: located_json.Located) -> tuple[profile_.Gradient, ...]:
    top = located.line(located.document)
    if not isinstance(entries, list) or not entries:
        raise ProfileError(path, "`gradients` must be a non-empty list of {name, bytes, readySeconds}, one per "
                                 "parameter in the model's order", top)
    gradients = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ProfileError(path, f"`gradients[{index}]` is {shown(entry)}: each gradient is an object "
                                     "{name, bytes, readySeconds}", top)
        line = located.line(entry)
        size = entry.get("bytes")
        if not is_number(size) or size < 0:
            raise ProfileError(path, f"`gradients[{index}].bytes` is {shown(size)}: it must be the gradient's size "
                                     "in bytes, 0 or more", line)
        ready = seconds(path, entry.get("readySeconds"), f"gradients[{index}].readySeconds", line)
        if ready > backward * (1 + READY_SLACK) + 1e-9:
            raise ProfileError(path, f"`gradients[{index}].readySeconds` {ready:g} s is after backward's end "
                                     f"(`backwardSeconds` {backward:g} s): a gradient is ready within backward; "
                                     "correct either", line)
        gradients.append(profile_.Gradient(_text(path, entry.get("name", f"gradient-{index}"),
                                                 f"gradients[{index}].name", line),
                                           float(size), ready, _shape(path, entry.get("shape"), index, line)))
    if not sum(g.size_bytes for g in gradients) > 0:
        raise ProfileError(path, "the gradients add up to 0 bytes: nothing to communicate; give each gradient's "
                                 "size in `bytes`", top)
    return tuple(gradients)


def _shape(path: pathlib.Path, shape: Any, index: int, line: int | None) -> tuple[int, ...] | None:
    if shape is None:
        return None
    if not isinstance(shape, list) or not all(is_number(d) and d >= 0 and d == int(d) for d in shape):
        raise ProfileError(path, f"`gradients[{index}].shape` is {shown(shape)}: a list of whole numbers, or left "
                                 "out", line)
    return tuple(int(d) for d in shape)


def _batch_size(path: pathlib.Path, value: Any, line: int | None) -> int | None:
    if value is None:
        return None
    if not is_number(value) or value < 1 or value != int(value):
        raise ProfileError(path, f"`batchSize` is {shown(value)}: samples per worker per iteration, a whole number "
                                 "of 1 or more, or left out", line)
    return int(value)


def _text(path: pathlib.Path, value: Any, field: str, line: int | None) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise ProfileError(path, f"`{field}` is {shown(value)}: it must be text of at most {MAX_TEXT} characters",
                           line)
    return " ".join(value.split())


def _provenance(path: pathlib.Path, value: Any, line: int | None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ProfileError(path, f"`provenance` is {shown(value)}: an object (who, when, where), or left out", line)
    return value


def check(path: pathlib.Path, profile: ModelProfile) -> ModelProfile:
    """`profile` (read from another format) once this file's rules hold for it, so that what `write` saves of it reads
    back; ProfileError naming what breaks them."""
    backward = profile.backward_seconds
    if not profile.iteration_seconds > 0 or not math.isfinite(profile.iteration_seconds):
        raise ProfileError(path, f"its iteration lasts {profile.iteration_seconds:g} s: is it a profile of training?")
    if not sum(g.size_bytes for g in profile.profile.gradients) > 0:
        raise ProfileError(path, "its gradients add up to 0 bytes: nothing to communicate; profile a model with "
                                 "trainable parameters")
    late = [g.name for g in profile.profile.gradients if not 0 <= g.ready_seconds <= backward * (1 + READY_SLACK)]
    phases = profile.forward_seconds + backward + profile.update_seconds
    if late or phases > profile.iteration_seconds * (1 + PHASES_SLACK):
        raise ProfileError(path, f"its times do not hold together (gradient {shown(late[0]) if late else 'times'} "
                                 "outside backward, or phases longer than the iteration): is it a complete record?")
    return profile


def document(profile: ModelProfile) -> dict[str, Any]:
    """The profile file's document: JSON-able, from_text of it gives an equal ModelProfile, and
    models.profile.from_document (`ringleader whatif`) reads it."""
    return {
        "kind": KIND, "version": VERSION, "source": profile.source, "device": profile.device,
        "batchSize": profile.batch_size, "batchSeconds": profile.iteration_seconds,
        "forwardSeconds": profile.forward_seconds, "backwardSeconds": profile.backward_seconds,
        "updateSeconds": profile.update_seconds, "provenance": dict(profile.provenance),
        "gradients": [{"name": g.name,
                       "bytes": int(g.size_bytes) if g.size_bytes == int(g.size_bytes) else g.size_bytes,
                       "readySeconds": g.ready_seconds} | ({"shape": list(g.shape)} if g.shape is not None else {})
                      for g in profile.profile.gradients],
    }


def dumps(profile: ModelProfile) -> str:
    """The file's text: one line per field and per gradient, so a message's line names one gradient."""
    whole = document(profile)
    gradients = whole.pop("gradients")
    lines = [f" {json.dumps(key)}: {json.dumps(value, allow_nan=False)}," for key, value in whole.items()]
    entries = [f"  {json.dumps(entry, allow_nan=False)}" for entry in gradients]
    return "{\n" + "\n".join(lines) + '\n "gradients": [\n' + ",\n".join(entries) + "\n ]\n}\n"
