"""The progress line a worker prints and the operator reads back from its log: one format, one parser.

Reading the tail of each worker's log (pods/log get, nothing more) keeps the runtime free of any
Kubernetes API access. The operator asks for the kubelet's timestamps (`timestamps=true`: each line then
starts with the RFC 3339 time it was written), so two progress lines give the trial's pace; a line without
one still gives its iteration and that iteration's own time.
"""

from __future__ import annotations

import dataclasses
import datetime
import re

_LINE = re.compile(r"^(?:(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)) )?"
                   r"progress: iteration (\d+)/(\d+)(?: loss \S+ iteration ([\d.]+) ms)?", re.MULTILINE)


def progress_line(iteration: int, iterations: int, loss: float, iteration_seconds: float) -> str:
    return f"progress: iteration {iteration}/{iterations} loss {loss:.4f} iteration {1000 * iteration_seconds:.1f} ms"


@dataclasses.dataclass(frozen=True)
class Line:
    """One progress line read back."""

    iteration: int
    """iteration done (from 1)."""
    iterations: int
    """iterations the worker runs in all."""
    iteration_seconds: float | None
    """iteration_seconds that iteration took (the worker's time/iteration); None in a line cut short."""
    at: datetime.datetime | None = None
    """at is when the line was written, from the kubelet's timestamp; None in a log read without them."""


def lines(log_text: str) -> list[Line]:
    """The progress lines of a log excerpt, in order; other lines are skipped (a time that is no date, as
    2030-13-45, is left out: a log read without timestamps shows what the user's code printed)."""
    found = []
    for stamp, iteration, iterations, milliseconds in _LINE.findall(log_text or ""):
        try:
            at = datetime.datetime.fromisoformat(stamp) if stamp else None  # nanoseconds read as microseconds
        except ValueError:
            at = None
        seconds = float(milliseconds) / 1000 if milliseconds else None
        found.append(Line(int(iteration), int(iterations), seconds, at))
    return found
