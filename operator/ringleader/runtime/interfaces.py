"""The seams inside a rank: how the training loop, the synchronizers and the recorder talk.

The worker loop (`worker.py`) owns data, forward and backward; a `Synchronizer` (ring.py,
parameter_server.py, peer_to_peer.py) owns everything after backward that makes the next
iteration's parameters; a `Timer` (timing.py) records where the time went; a `Recorder`
(contract/records.py, on local disk, published to MLflow by tracking/) keeps the records. Metric
names live in contract/keys.py.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch

class Timer(Protocol):
    """Times the phases of one iteration; cheap enough to leave on (see bench/overhead)."""

    def phase(self, name: str) -> contextlib.AbstractContextManager[None]:
        """Time a block into `name` (a TIME_* key); on GPU with CUDA events, synchronized once per iteration."""

    def add(self, name: str, value: float) -> None:
        """Add to a metric of the current iteration (seconds measured elsewhere, bytes, counts)."""

    def set(self, name: str, value: float) -> None:
        """Set a metric of the current iteration (staleness, loss)."""

    def span(self, name: str, start: float, end: float, track: str = ..., args: dict | None = None) -> None:
        """Add an event (time.perf_counter start and end) to the Chrome trace on `track`, if this step is traced;
        for work the phases do not show, such as asynchronous transfers (timing.TRACK_COMM)."""


class Synchronizer(Protocol):
    """Turns this iteration's local gradients into the next iteration's parameters."""

    def attach(self, model: torch.nn.Module, optimizer_factory) -> None:
        """Called once before training: register gradient hooks (ring overlap), pull initial weights."""

    def backward(self, loss: torch.Tensor) -> None:
        """Called in place of `loss.backward()`: clear the last iteration's gradients and compute this one's, the
        way synchronize() expects them (the ring keeps them in its buckets, seeded with 1/N, and starts
        allreducing them while backward runs)."""

    def synchronize(self, step: int, timer: Timer) -> None:
        """Called after backward: communicate, wait as the paradigm says, update parameters in place.

        Records TIME_COMM, TIME_WAIT, TIME_UPDATE, BYTES_SENT, BYTES_RECEIVED and STALENESS via `timer`."""

    def should_stop(self, due: bool, reached: bool, timer: Timer) -> bool:
        """Called after every iteration when model.target says Stop: whether this worker ends training now.

        `due`: this iteration was followed by an evaluation; `reached`: this worker evaluated and met the target.
        A synchronizer hears the verdict as its architecture allows, never waiting where its paradigm would not
        (parameter server, peer-to-peer: the next answer carries it); any wait is booked as TIME_WAIT. When it says
        True, close() ends the exchange as it does after the last iteration."""

    def close(self) -> None:
        """Called once after the last iteration: release servers, flush, no process left waiting."""


class Recorder(Protocol):
    """Keeps one rank's records: never loses one, even when the tracking server is away."""

    def log_iteration(self, step: int, metrics: dict[str, float]) -> None: ...

    def log_summary(self, metrics: dict[str, float]) -> None: ...

    def close(self) -> None: ...

