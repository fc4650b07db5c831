"""Per-iteration timing of one rank (interfaces.Timer): phase times, a Chrome trace window, per-layer gradient times.

The worker loop calls `begin(step)`, times its phases with `phase(TIME_*)`, lets the synchronizer
add its own (`phase`, `add`, `set`, `span`), and ends with `finish()`, which returns the
iteration's metrics. On CPU every phase is two perf_counter reads. On GPU a phase records two
CUDA events and `finish()` synchronizes once per iteration (the only device sync the timer makes),
so phases measure device time without stalling the pipeline in between.

Clocks: trace timestamps are wall-clock microseconds (time.time at start plus perf_counter
deltas), so traces of ranks on different machines line up as well as their clocks do.
Per-layer times come from post-accumulate-grad hooks; they are host times at which autograd
ran the hook (on GPU: when the gradient was enqueued, not computed). Communication spans that say
their size (`args={"bytes": n}`, the ring's bucket allreduces) are also kept in layers.json as the
iteration's "collectives", drawn by the report's overlap figure (the link is probed at start: runtime/linkprobe.py).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import torch

from ringleader.contract import keys

# Every iteration record carries these keys, zero when a phase did not happen, so all rows align.
ITERATION_KEYS = (
    keys.TIME_DATA, keys.TIME_FORWARD, keys.TIME_BACKWARD, keys.TIME_COMM,
    keys.TIME_WAIT, keys.TIME_UPDATE, keys.TIME_CODEC, keys.TIME_EVAL, keys.TIME_OTHER, keys.TIME_ITERATION,
    keys.BYTES_SENT, keys.BYTES_RECEIVED, keys.BYTES_UNCOMPRESSED,
    keys.BYTES_INSIDE_POD, keys.BYTES_INSIDE_NODE, keys.BYTES_ACROSS_NODES,
)
_NO_LABEL = contextlib.nullcontext()
TRACK_ITERATION = "iterations"
TRACK_MAIN = "main thread"
TRACK_COMM = "communication"


class _Phase:
    """A reusable context manager for one phase name: no allocation per use on CPU."""

    __slots__ = ("timer", "name", "started", "start_event", "label")

    def __init__(self, timer: IterationTimer, name: str):
        self.timer, self.name = timer, name
        self.started = 0.0
        self.start_event: Any = None  # a torch.cuda.Event on a GPU
        self.label: Any = None  # the profiler's record_function context while open

    def __enter__(self) -> None:
        timer = self.timer
        if timer.labels:  # inside a spec.profiling window: the phase is a range in PyTorch's profiler trace
            self.label = timer.annotate(self.name)
            self.label.__enter__()
        if timer.cuda:
            self.start_event = timer._event()
            self.start_event.record()
        self.started = time.perf_counter()

    def __exit__(self, *_) -> None:
        timer = self.timer
        ended = time.perf_counter()
        if self.label is not None:
            self.label.__exit__(None, None, None)
            self.label = None
        timer.host_spans[self.name] = (self.started, ended)
        if timer.cuda:
            end_event = timer._event()
            end_event.record()
            timer.pending.append((self.name, self.start_event, end_event))
        else:
            timer.metrics[self.name] = timer.metrics.get(self.name, 0.0) + ended - self.started
            if timer.tracing:
                timer.span(self.name.removeprefix("time/"), self.started, ended, TRACK_MAIN)


class IterationTimer:
    """Times one rank's iterations; `trace_steps` are the steps kept in the trace and the layer timings."""

    def __init__(self, rank: int, device: torch.device, trace_steps: range = range(0), label: str = ""):
        self.rank = rank
        self.cuda = device.type == "cuda"
        self.trace_steps = trace_steps
        self.label = label or f"rank {rank}"
        self.epoch_wall, self.epoch_perf = time.time(), time.perf_counter()
        self.step = -1
        self.tracing = False
        self.labels = False  # phases are also record_function ranges (runtime/profiling.py sets it)
        self.metrics: dict[str, float] = {}
        self.host_spans: dict[str, tuple[float, float]] = {}  # phase -> (start, end) host times, this iteration
        self.pending: list = []  # GPU: (phase, start event, end event) resolved in finish()
        self.events: list[dict] = []  # Chrome trace events of the traced steps
        self.layer_iterations: list[dict] = []
        self.parameter_names: list[tuple[str, int, list[int]]] = []  # (name, bytes, shape)
        self._phases: dict[str, _Phase] = {}
        # Fixed tids for the tracks every rank has, so traces of all ranks stack the same way.
        self._tracks: dict[str, int] = {TRACK_ITERATION: 1, TRACK_MAIN: 2, TRACK_COMM: 3}
        self._event_pool: list = []
        self._events_used = 0
        self._started = self._begun = 0.0
        self._last_finish: float | None = None
        self._begin_event: Any = None  # a torch.cuda.Event on a GPU
        self._ready: dict[str, float] = {}
        self._collectives: list[dict] = []  # sized communication spans of this traced iteration
        self._watched: list[tuple[str, torch.nn.Parameter]] = []
        self._hooks: list = []  # handles of the layer hooks, registered only while tracing

    # -- interfaces.Timer ---------------------------------------------------------------------

    def phase(self, name: str) -> _Phase:
        phase = self._phases.get(name)
        if phase is None:
            phase = self._phases[name] = _Phase(self, name)
        return phase

    def add(self, name: str, value: float) -> None:
        self.metrics[name] = self.metrics.get(name, 0.0) + value

    def annotate(self, name: str):
        """A range named ringleader/<name> in PyTorch's profiler trace while a spec.profiling window records;
        nothing otherwise."""
        return torch.profiler.record_function(f"ringleader/{name}") if self.labels else _NO_LABEL

    def set(self, name: str, value: float) -> None:
        self.metrics[name] = value

    # -- the iteration ------------------------------------------------------------------------

    def begin(self, step: int) -> None:
        """Start iteration `step`. Its time runs from the previous finish(), so the loop's own work in between
        (recording, printing) is counted, as TIME_OTHER."""
        self.step = step
        self.tracing = step in self.trace_steps
        if self.tracing != bool(self._hooks):
            self._hook_layers(self.tracing)
        self.metrics = dict.fromkeys(ITERATION_KEYS, 0.0)
        self.host_spans.clear()
        self.pending.clear()
        self._ready = {}
        self._collectives = []
        self._events_used = 0
        now = self._begun = time.perf_counter()
        self._started = self._last_finish if self._last_finish is not None else now
        self.metrics[keys.TIME_OTHER] = now - self._started
        if self.tracing and now > self._started:
            self.span("other", self._started, now, TRACK_MAIN)
        if self.cuda:
            self._begin_event = self._event()
            self._begin_event.record()

    def finish(self) -> dict[str, float]:
        """End the iteration and return its metrics (a fresh dict the caller may keep)."""
        if self.cuda:
            end_event = self._event()
            end_event.record()
            end_event.synchronize()  # this is a device sync: once per iteration, so the events can be read
            begun = self._begun  # host time of the begin event: GPU offsets are measured from it
            for name, start_event, stop_event in self.pending:
                seconds = start_event.elapsed_time(stop_event) / 1000.0
                self.metrics[name] = self.metrics.get(name, 0.0) + seconds
                if self.tracing:
                    offset = self._begin_event.elapsed_time(start_event) / 1000.0
                    self.span(name.removeprefix("time/"), begun + offset, begun + offset + seconds, TRACK_MAIN)
        ended = time.perf_counter()
        self.metrics[keys.TIME_ITERATION] = ended - self._started
        if self.tracing:
            self.span(f"iteration {self.step}", self._started, ended, TRACK_ITERATION)
            if self._ready:
                backward = self.host_spans.get(keys.TIME_BACKWARD, (self._started, ended))
                self.layer_iterations.append({
                    "step": self.step,
                    "backwardStart": backward[0] - self._started,
                    "backwardEnd": backward[1] - self._started,
                    "ready": {name: at - self._started for name, at in self._ready.items()},
                    "collectives": self._collectives,
                })
        self._last_finish = ended
        return self.metrics

    def interval(self) -> tuple[float, float]:
        """The last finished iteration's (start, end), perf_counter times."""
        return self._started, self._last_finish if self._last_finish is not None else self._started

    # -- trace and layers ---------------------------------------------------------------------

    def counter(self, name: str, at: float, values: dict[str, float]) -> None:
        """Add a counter event ("C": a value that holds until the next one) at perf_counter time `at`, if this
        step is traced."""
        if self.tracing:
            self.events.append({"name": name, "ph": "C", "ts": self._micros(at), "pid": self.rank,
                                "args": dict(values)})

    def span(self, name: str, start: float, end: float, track: str = TRACK_COMM, args: dict | None = None) -> None:
        """Add a complete event (perf_counter times) to the trace, if this step is traced; thread-safe enough
        (a list append) for completion callbacks of asynchronous collectives."""
        if not self.tracing:
            return
        event = {"name": name, "ph": "X", "ts": self._micros(start), "dur": max(0.0, (end - start) * 1e6),
                 "pid": self.rank, "tid": self._tid(track), "args": {"step": self.step, **(args or {})}}
        self.events.append(event)
        if track == TRACK_COMM and args and "bytes" in args:
            self._collectives.append({"bytes": args["bytes"], "start": start - self._started,
                                      "end": end - self._started})

    def watch_layers(self, model: torch.nn.Module) -> None:
        """Record when each parameter's gradient is ready (post-accumulate-grad hooks), in traced steps."""
        for name, parameter in model.named_parameters():
            if not parameter.requires_grad:
                continue
            self.parameter_names.append((name, parameter.numel() * parameter.element_size(), list(parameter.shape)))
            self._watched.append((name, parameter))

    def _hook_layers(self, on: bool) -> None:
        # A Python hook per parameter costs ~1% of a short iteration: keep them only for the traced steps.
        for handle in self._hooks:
            handle.remove()
        self._hooks = [parameter.register_post_accumulate_grad_hook(self._ready_hook(name))
                       for name, parameter in self._watched] if on else []

    def _ready_hook(self, name: str):
        def hook(_parameter: torch.Tensor) -> None:
            self._ready[name] = time.perf_counter()
        return hook

    def trace(self) -> dict:
        """The Chrome trace (chrome://tracing, Perfetto) of the traced steps."""
        metadata = [{"name": "process_name", "ph": "M", "pid": self.rank, "tid": 0, "args": {"name": self.label}}]
        metadata += [{"name": "thread_name", "ph": "M", "pid": self.rank, "tid": tid, "args": {"name": track}}
                     for track, tid in self._tracks.items()]
        return {"traceEvents": metadata + list(self.events), "displayTimeUnit": "ms",
                "otherData": {"rank": self.rank, "clock": "wall-clock microseconds since the Unix epoch"}}

    def layers(self) -> dict:
        """Per-layer gradient-ready times of the traced steps, and their sized collectives (bytes, start, end),
        in seconds from each iteration's start."""
        return {
            "rank": self.rank,
            "clock": "seconds from the iteration's start, host clock when the gradient hook ran",
            "parameters": [{"name": name, "bytes": size, "shape": shape} for name, size, shape in self.parameter_names],
            "iterations": self.layer_iterations,
        }

    # -- internals ----------------------------------------------------------------------------

    def _micros(self, perf_time: float) -> float:
        return (self.epoch_wall + (perf_time - self.epoch_perf)) * 1e6

    def _tid(self, track: str) -> int:
        tid = self._tracks.get(track)
        if tid is None:
            tid = self._tracks[track] = len(self._tracks) + 1
        return tid

    def _event(self):
        # Events are pooled: a phase needs two per iteration and allocating them each time costs.
        if self._events_used == len(self._event_pool):
            self._event_pool.append(torch.cuda.Event(enable_timing=True))
        event = self._event_pool[self._events_used]
        self._events_used += 1
        return event
