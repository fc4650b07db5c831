"""spec.profiling: PyTorch's profiler over a window of a rank's iterations, its trace beside ringleader's own.

The trace is the Chrome trace JSON torch.profiler exports, which Perfetto (ui.perfetto.dev, or its trace
processor), chrome://tracing and Holistic Trace Analysis read: the operators on the CPU and, on a GPU,
the kernels, memory copies and NCCL collectives they launched. While the window is open the timer
labels each phase with `record_function` (`ringleader/time/forward`, ...), so the trace shows
ringleader's phases around the operators they ran, and `ProfilerStep#<step>` marks each iteration.
The profiler slows what it records, so the worker records the window's iterations as warm-up.
"""

from __future__ import annotations

import pathlib

import torch

from ringleader.api.spec import ExperimentSpec, Profiling
from ringleader.contract import records


class Window:
    """PyTorch's profiler, idle until the window's first step, recording its steps, writing the trace after."""

    def __init__(self, profiling: Profiling, warmup_iterations: int, device: torch.device,
                 directory: pathlib.Path):
        self.first = profiling.start_iteration if profiling.start_iteration is not None else warmup_iterations
        self.last = self.first + profiling.iterations - 1
        self.path = directory / records.PROFILE_FILE
        activities = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        # The profiler counts steps from 0 as the loop does; one step of its own warm-up before the window when
        # there is room (its first recorded step pays the profiler's start-up otherwise).
        ahead = min(1, self.first)
        # record_shapes: each operator's input shapes and types in the trace, so that its AccumulateGrad events
        # give each gradient's size and the trace is a model's profile too (planning/profile_trace.py).
        self.profiler = torch.profiler.profile(
            activities=activities, record_shapes=True,
            on_trace_ready=lambda done: done.export_chrome_trace(str(self.path)),
            schedule=torch.profiler.schedule(wait=self.first - ahead, warmup=ahead, active=profiling.iterations,
                                             repeat=1))
        self.profiler.start()
        self.open = True

    @classmethod
    def of(cls, spec: ExperimentSpec, device: torch.device, directory: pathlib.Path) -> Window | None:
        if spec.profiling is None:
            return None
        return cls(spec.profiling, spec.model.warmup_iterations, device, directory)

    def covers(self, step: int) -> bool:
        return self.first <= step <= self.last

    def begin(self, step: int, timer) -> None:
        """Before iteration `step`: the timer labels its phases while the window records."""
        timer.labels = self.open and self.covers(step)

    def end(self, step: int, timer, last: bool = False) -> None:
        """After iteration `step` (the `last` of training, say when a target stopped it): the profiler's next
        step (ProfilerStep#<step + 1> in the trace), or its end after the window's last step."""
        if step >= self.last or last:
            self.close(timer)
        elif self.open:
            self.profiler.step()

    def close(self, timer) -> None:
        """Stop the profiler; the trace is written when the window was reached (training may end inside it)."""
        if self.open:
            self.open = timer.labels = False
            self.profiler.stop()
