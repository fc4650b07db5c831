"""An asyncio event loop on a virtual clock, for tests of code that waits: time passes only when nothing is ready.

Whenever the loop would block, it jumps its clock to the next timer instead of sleeping, so
`await asyncio.sleep(60)` takes no real time and a due time is met exactly, however loaded the
machine. Only for coroutines that wait on timers and each other, not on sockets or threads.
"""

from __future__ import annotations

import asyncio
import selectors
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")


class _JumpingSelector:
    """Polls the real selector without blocking; a would-be wait advances the loop's clock instead."""

    def __init__(self, real: selectors.BaseSelector, loop: VirtualClockLoop) -> None:
        self._real = real
        self._loop = loop

    def select(self, timeout: float | None = None) -> list:
        events = self._real.select(0)
        if not events and timeout != 0:
            if timeout is None:
                raise RuntimeError("the loop would wait forever: nothing is scheduled and nothing can wake it")
            self._loop.now += timeout
        return events

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


class VirtualClockLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self._selector = _JumpingSelector(self._selector, self)

    def time(self) -> float:
        return self.now


def run(coroutine: Coroutine[Any, Any, T], virtual_timeout: float = 3600.0) -> T:
    """Run `coroutine` to its end on a fresh virtual-clock loop; TimeoutError after `virtual_timeout` virtual s."""
    loop = VirtualClockLoop()
    try:
        return loop.run_until_complete(asyncio.wait_for(coroutine, timeout=virtual_timeout))
    finally:
        loop.close()
