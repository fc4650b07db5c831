"""A per-experiment work queue: coalesced, serialized reconciles at a requested time; used by `handlers` and
`reconciler`.

Like controller-runtime's queue: many triggers (pod events, spec changes, due times) collapse into
one pending reconcile per experiment; reconciles of one experiment never overlap; the reconcile's
answer (seconds until the next due time) schedules the next one; at most `max_concurrent` reconciles
run at once, the others waiting their turn in the order they fell due (`ApiSettings.reconciles`
says why). Retry semantics follow kopf's exception types: TemporaryError retries after its delay,
doubled per failure in a row up to a cap (a 403 retried every minute forever is noise, not a fix);
PermanentError does not retry; anything else backs off exponentially and gives up after a bounded
number of attempts (until the next trigger).
Every failure, with its count and the next attempt's delay, goes to `on_failure`, and every success
to `on_success`, so the caller can tell the experiment's users where they look.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Awaitable, Callable, Hashable

import kopf

logger = logging.getLogger(__name__)

Work = Callable[[Hashable], Awaitable[float | None]]


@dataclasses.dataclass(frozen=True)
class PassFailure:
    """One failed pass: the error, the failures in a row (this one included), and when the next pass is."""

    error: BaseException
    attempt: int
    retry_in: float | None
    """Seconds until the next attempt; None: none until the next trigger (a permanent error, or given up)."""


OnFailure = Callable[[Hashable, PassFailure], Awaitable[None]]
OnSuccess = Callable[[Hashable], Awaitable[None]]


@dataclasses.dataclass
class _Entry:
    wake: asyncio.Event
    task: asyncio.Task | None = None
    due: float | None = None  # loop time; None: wait for a request
    errors: int = 0


class WorkQueue:
    def __init__(self, work: Work, *, error_backoff: float = 5.0, max_backoff: float = 600.0, max_errors: int = 8,
                 on_failure: OnFailure | None = None, on_success: OnSuccess | None = None,
                 max_concurrent: int = 48) -> None:
        self._work = work
        self._slots = asyncio.Semaphore(max_concurrent)
        self._error_backoff = error_backoff
        self._max_backoff = max_backoff
        self._max_errors = max_errors
        self._on_failure = on_failure
        self._on_success = on_success
        self._entries: dict[Hashable, _Entry] = {}
        self._closed = False

    def request(self, key: Hashable, delay: float = 0.0) -> None:
        """Reconcile `key` in `delay` seconds, or sooner if already requested sooner."""
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(wake=asyncio.Event())
        due = loop.time() + max(0.0, delay)
        if entry.due is None or due < entry.due:
            entry.due = due
            entry.wake.set()
        if entry.task is None or entry.task.done():
            entry.task = loop.create_task(self._serve(key, entry), name=f"reconcile {key}")

    def pending(self, key: Hashable) -> float | None:
        """Seconds until `key`'s next reconcile, or None (for tests and diagnostics)."""
        entry = self._entries.get(key)
        if entry is None or entry.due is None:
            return None
        return max(0.0, entry.due - asyncio.get_running_loop().time())

    def forget(self, key: Hashable) -> None:
        """Stop serving `key` (its object is gone); a reconcile in progress finishes first."""
        entry = self._entries.pop(key, None)
        if entry is not None and entry.task is not None:
            entry.due = None
            entry.wake.set()

    async def close(self) -> None:
        self._closed = True
        tasks = [e.task for e in self._entries.values() if e.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._entries.clear()

    def _schedule(self, entry: _Entry, delay: float) -> None:
        due = asyncio.get_running_loop().time() + max(0.0, delay)
        if entry.due is None or due < entry.due:
            entry.due = due

    async def _serve(self, key: Hashable, entry: _Entry) -> None:
        loop = asyncio.get_running_loop()
        while self._entries.get(key) is entry:
            if entry.due is None:
                entry.wake.clear()
                await entry.wake.wait()
                continue
            delay = entry.due - loop.time()
            if delay > 0:
                entry.wake.clear()
                try:
                    await asyncio.wait_for(entry.wake.wait(), timeout=delay)
                except asyncio.TimeoutError:
                    pass
                continue
            async with self._slots:  # FIFO: waiters get slots in the order they asked
                if self._entries.get(key) is not entry:  # forgotten while waiting
                    return
                next_in = await self._attempt(key, entry)
            if next_in is not None:
                self._schedule(entry, next_in)

    async def _attempt(self, key: Hashable, entry: _Entry) -> float | None:
        entry.due = None  # requests from now on ask for a pass after this one
        try:
            next_in = await self._work(key)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 -- classified in _retry_in: bounded, never retried forever
            entry.errors += 1
            failure = PassFailure(error, entry.errors, self._retry_in(key, entry, error))
            await self._tell(self._on_failure, key, failure)
            return failure.retry_in
        entry.errors = 0
        await self._tell(self._on_success, key)
        return next_in

    def _retry_in(self, key: Hashable, entry: _Entry, error: Exception) -> float | None:
        if isinstance(error, kopf.PermanentError):
            logger.error("reconcile of %s failed permanently: %s", key, error)
            return None
        if isinstance(error, kopf.TemporaryError):
            delay = min((error.delay or self._error_backoff) * 2 ** (entry.errors - 1), self._max_backoff)
            logger.info("reconcile of %s failed (attempt %d); retrying in %.0fs: %s", key, entry.errors, delay, error)
            return delay
        if entry.errors > self._max_errors:
            logger.error("reconcile of %s failed %d times in a row; waiting for its next change", key, entry.errors,
                         exc_info=error)
            entry.errors = 0
            return None
        delay = min(self._error_backoff * 2 ** (entry.errors - 1), self._max_backoff)
        logger.error("reconcile of %s failed (attempt %d); retrying in %.0fs", key, entry.errors, delay, exc_info=error)
        return delay

    @staticmethod
    async def _tell(hook, *args) -> None:
        if hook is None:
            return
        try:
            await hook(*args)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 -- telling users must never stop the queue; the log keeps it
            logger.exception("could not report the outcome of a reconcile of %s", args[0])
