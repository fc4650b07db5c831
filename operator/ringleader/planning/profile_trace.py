"""A torch.profiler (Kineto) Chrome trace of training steps as a ModelProfile: a profile from a machine ringleader
never ran on, or from a trial's `spec.profiling` window (rank-<r>/profile.json).

Each `ProfilerStep#N` span is an iteration (the profiler's `step()` marks them). Within it, forward, backward and
update are ringleader's own ranges where the trace has them (`ringleader/time/forward`, `.../backward`,
`.../update`); otherwise backward runs from the first to the last `autograd::engine::evaluate_function: ...`
event, update is the `Optimizer.step#...` spans, and forward is estimated as the step's start to backward's, less
`Optimizer.zero_grad#...` and DataLoader spans. Each gradient is an AccumulateGrad event: ready when it ends, in
seconds from backward's start, its size from the shape and type the profiler recorded with `record_shapes=True`
(refused without). The iteration is the step, less ringleader's `ringleader/synchronize` (communication and waiting)
with the update inside it kept. Medians over the steps that ran backward with the most common set of gradients.

A trace has no parameter names: gradients are named `gradient-<i>` in parameter order, taken as the reverse of the
order backward produced them (backward runs the layers from the last).
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import datetime
import math
import pathlib
import re
import statistics
from typing import Any, Sequence

from ringleader.models import profile as profile_
from ringleader.planning.model_profile import ModelProfile, ProfileError, is_number, shown

STEP = re.compile(r"ProfilerStep#(\d+)")
EVALUATE = "autograd::engine::evaluate_function: "
ACCUMULATE = EVALUATE + "torch::autograd::AccumulateGrad"
ACCUMULATE_OP = "torch::autograd::AccumulateGrad"
FORWARD, BACKWARD, UPDATE = "ringleader/time/forward", "ringleader/time/backward", "ringleader/time/update"
SYNCHRONIZE = "ringleader/synchronize"
OPTIMIZER_STEP, ZERO_GRAD, DATA = "Optimizer.step#", "Optimizer.zero_grad#", "enumerate(DataLoader)#"
ELEMENT_BYTES = {
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "long int": 8, "long": 8, "int": 4, "short int": 2,
    "short": 2, "signed char": 1, "unsigned char": 1, "bool": 1, "c10::complex<float>": 8,
    "c10::complex<double>": 16, "c10::complex<c10::Half>": 4, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1,
}
"""ELEMENT_BYTES: the size of each element type as the profiler names it in "Input type"."""
SHAPES = "record with torch.profiler.profile(..., record_shapes=True)"
MICROSECONDS = 1e-6  # a Chrome trace's ts and dur


@dataclasses.dataclass(frozen=True)
class _Span:
    name: str
    start: float
    end: float
    args: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class _Step:
    """One ProfilerStep, in seconds: its gradients (ready time, bytes, shape) in the order backward produced them."""

    number: int
    gradients: tuple[tuple[float, float | None, tuple[int, ...] | None], ...]
    backward: float
    forward: float
    update: float
    iteration: float

    @property
    def signature(self) -> tuple[tuple[float | None, tuple[int, ...] | None], ...]:
        return tuple((size, shape) for _, size, shape in self.gradients)


def looks_like_trace(document: Any) -> bool:
    """A Chrome trace: an object with traceEvents, or a bare list of events."""
    return (isinstance(document, dict) and "traceEvents" in document) or (
        isinstance(document, list) and bool(document) and isinstance(document[0], dict) and "ph" in document[0])


def from_document(path: pathlib.Path, document: Any) -> ModelProfile:
    events = document.get("traceEvents") if isinstance(document, dict) else document
    if not isinstance(events, list):
        raise ProfileError(path, "`traceEvents` is not a list of events: is it a trace torch.profiler exported?")
    spans = _spans(events)
    steps = sorted((s for s in spans if STEP.fullmatch(s[1].name)), key=lambda s: s[1].start)
    if not steps:
        raise ProfileError(path, "no ProfilerStep#N span: profile training steps with torch.profiler.profile("
                                 "schedule=...) and call its step() after each iteration")
    pid = steps[0][0]
    mine = sorted((span for owner, span in spans if owner == pid), key=lambda s: s.start)
    starts = [span.start for span in mine]
    measured = [step for step in (_step(path, span, mine, starts) for owner, span in steps if owner == pid) if step]
    if not measured:
        raise ProfileError(path, f"none of its {len(steps)} ProfilerSteps ran backward (no autograd event in them): "
                                 "profile training steps, with loss.backward() inside them")
    common, _ = collections.Counter(step.signature for step in measured).most_common(1)[0]
    kept = [step for step in measured if step.signature == common]
    if not common:
        raise ProfileError(path, "its steps ran backward but accumulated no gradient (no AccumulateGrad event): "
                                 "profile steps that train parameters")
    if any(size is None for size, _ in common):
        raise ProfileError(path, f"recorded without shapes, so the gradients' sizes are unknown: {SHAPES}")
    backward = statistics.median(step.backward for step in kept)
    ready_order = [profile_.Gradient("", float(size or 0.0),
                                     min(backward, statistics.median(step.gradients[k][0] for step in kept)), shape)
                   for k, (size, shape) in enumerate(common)]
    gradients = tuple(dataclasses.replace(g, name=f"gradient-{index}") for index, g in enumerate(reversed(ready_order)))
    forward, update = (statistics.median(getattr(step, phase) for step in kept) for phase in ("forward", "update"))
    iteration = max(statistics.median(step.iteration for step in kept), forward + backward + update)
    if not iteration > 0:
        raise ProfileError(path, "its ProfilerSteps last 0 s: is it a trace of training steps?")
    return ModelProfile(profile_.Profile(gradients, backward), iteration, forward, update, None,
                        _device(document, events), _source(path, mine, kept, len(steps), pid, spans),
                        _provenance(document, kept, steps[0][1].start))


def _spans(events: Sequence[Any]) -> list[tuple[Any, _Span]]:
    """The complete events ("ph": "X") with a name, a time and a duration, with their process, in seconds."""
    found = []
    for event in events:
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        name, ts, dur = event.get("name"), event.get("ts"), event.get("dur")
        if isinstance(name, str) and is_number(ts) and is_number(dur) and dur >= 0:
            args = event.get("args")
            start = float(ts) * MICROSECONDS
            found.append((event.get("pid"), _Span(name, start, start + float(dur) * MICROSECONDS,
                                                  args if isinstance(args, dict) else {})))
    return found


def _step(path: pathlib.Path, step: _Span, spans: list[_Span], starts: list[float]) -> _Step | None:
    """The step's phases and gradients; None for a step that ran no backward (evaluation, say)."""
    inside = [s for s in spans[bisect.bisect_left(starts, step.start):bisect.bisect_right(starts, step.end)]
              if s is not step and s.end <= step.end + 1e-9]
    named = collections.defaultdict(list)
    for span in inside:
        named[span.name].append(span)
    evaluated = [s for s in inside if s.name.startswith(EVALUATE)]
    if named[BACKWARD]:
        began, ended = named[BACKWARD][0].start, named[BACKWARD][-1].end
    elif evaluated:
        began, ended = min(s.start for s in evaluated), max(s.end for s in evaluated)
    else:
        return None
    backward = ended - began
    gradients = tuple((min(backward, max(0.0, accumulated.end - began)), *_size(path, accumulated, named))
                      for accumulated in named[ACCUMULATE] if began <= accumulated.start <= ended)
    if named[FORWARD]:
        forward = sum(s.end - s.start for s in named[FORWARD])
    else:
        before = [s for s in inside if s.end <= began and (s.name.startswith(ZERO_GRAD) or s.name.startswith(DATA))]
        forward = max(0.0, began - step.start - sum(s.end - s.start for s in _outermost(before)))
    optimizer = [s for s in inside if s.name.startswith(OPTIMIZER_STEP)]
    update = sum(s.end - s.start for s in (named[UPDATE] or _outermost(optimizer)))
    synchronizing = sum(s.end - s.start for s in named[SYNCHRONIZE])
    updated_inside = sum(u.end - u.start for u in named[UPDATE] for s in named[SYNCHRONIZE]
                         if s.start <= u.start <= s.end)
    iteration = max(0.0, step.end - step.start - synchronizing + updated_inside)
    return _Step(int(STEP.fullmatch(step.name).group(1)), gradients, backward, forward,  # type: ignore[union-attr]
                 update, iteration)


def _outermost(spans: list[_Span]) -> list[_Span]:
    """The spans not inside another of them (a nested range is counted once)."""
    ordered = sorted(spans, key=lambda s: (s.start, -s.end))
    kept: list[_Span] = []
    for span in ordered:
        if not kept or span.start >= kept[-1].end:
            kept.append(span)
    return kept


def _size(path: pathlib.Path, accumulated: _Span,
          named: dict[str, list[_Span]]) -> tuple[float | None, tuple[int, ...] | None]:
    """(bytes, shape) of the gradient an AccumulateGrad event accumulated: from the op inside it that recorded its
    input's dims and type, or the event's own; (None, None) where neither did."""
    candidates = [s for s in named[ACCUMULATE_OP] if accumulated.start <= s.start <= accumulated.end] + [accumulated]
    for candidate in candidates:
        dims, types = candidate.args.get("Input Dims"), candidate.args.get("Input type")
        if isinstance(dims, list) and dims and isinstance(dims[0], list) and isinstance(types, list) and types:
            if not all(is_number(d) and d >= 0 and d == int(d) for d in dims[0]):
                raise ProfileError(path, f"an AccumulateGrad event's Input Dims are {shown(dims[0])}, not a shape: "
                                         "is it a trace torch.profiler exported?")
            element = ELEMENT_BYTES.get(types[0]) if isinstance(types[0], str) else None
            if element is None:
                raise ProfileError(path, f"a gradient of element type {shown(types[0])}, whose size ringleader does "
                                         f"not know (it knows {', '.join(list(ELEMENT_BYTES)[:4])}, ...); convert "
                                         "the trace to a CSV of layers (docs/plan.md)")
            shape = tuple(int(d) for d in dims[0])
            return float(math.prod(shape) * element), shape
    return None, None


def _device(document: Any, events: Sequence[Any]) -> str:
    """cuda (its name) when the trace holds GPU kernels, else cpu."""
    if not any(isinstance(e, dict) and e.get("cat") in ("kernel", "gpu_memcpy") for e in events):
        return "cpu"
    properties = document.get("deviceProperties") if isinstance(document, dict) else None
    first = properties[0] if isinstance(properties, list) and properties else None
    name = first.get("name") if isinstance(first, dict) else None
    return f"cuda ({' '.join(name.split())[:100]})" if isinstance(name, str) and name.strip() else "cuda"


def _source(path: pathlib.Path, spans: list[_Span], kept: list[_Step], steps: int, pid: Any,
            everything: list[tuple[Any, _Span]]) -> str:
    names = {span.name for span in spans}
    said = [f"{path}: a torch.profiler trace, {len(kept)} of its {steps} ProfilerSteps "
            f"(#{kept[0].number} to #{kept[-1].number})"]
    if len({owner for owner, span in everything if STEP.fullmatch(span.name)}) > 1:
        said.append(f"those of process {shown(pid)} (the trace holds several)")
    if FORWARD not in names:
        said.append("forward estimated as the step's start to backward's")
    if UPDATE not in names and not any(name.startswith(OPTIMIZER_STEP) for name in names):
        said.append("no Optimizer.step span: update taken as 0")
    if SYNCHRONIZE in names:
        said.append("ringleader's synchronize left out of the iteration")
    return "; ".join(said)


def _provenance(document: Any, kept: list[_Step], first: float) -> dict[str, Any]:
    """The steps taken and, where the trace says its clock's origin (Kineto's baseTimeNanoseconds, to which its
    timestamps are relative), the date of its first step."""
    found: dict[str, Any] = {"format": "torch.profiler trace", "steps": [step.number for step in kept]}
    base = document.get("baseTimeNanoseconds") if isinstance(document, dict) else None
    if is_number(base) and 0 < base / 1e9 + first < 1e11:
        found["date"] = datetime.datetime.fromtimestamp(base / 1e9 + first, datetime.timezone.utc).isoformat(
            timespec="seconds")
    version = document.get("schemaVersion") if isinstance(document, dict) else None
    if isinstance(version, (int, str)) and not isinstance(version, bool):
        found["schemaVersion"] = version
    return found
