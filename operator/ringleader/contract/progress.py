"""The progress line a worker prints and the operator reads back from its log: one format, one parser.

Reading the tail of each worker's log (pods/log get, nothing more) keeps the runtime free of any
Kubernetes API access.
"""

from __future__ import annotations

import re

_LINE = re.compile(r"^progress: iteration (\d+)/(\d+)", re.MULTILINE)


def progress_line(iteration: int, iterations: int, loss: float, iteration_seconds: float) -> str:
    return f"progress: iteration {iteration}/{iterations} loss {loss:.4f} iteration {1000 * iteration_seconds:.1f} ms"


def last_iteration(log_text: str) -> int | None:
    """The iteration of the last progress line in a log excerpt, or None if it has none."""
    matches = _LINE.findall(log_text or "")
    return int(matches[-1][0]) if matches else None
