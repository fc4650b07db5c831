"""A per-experiment work queue: coalesced, serialized reconciles at a requested time; used by `handlers` and `reconciler`.

Like controller-runtime's queue: many triggers (pod events, spec changes, due times) collapse into
one pending reconcile per experiment; reconciles of one experiment never overlap; the reconcile's
answer (seconds until the next due time) schedules the next one. Retry semantics follow kopf's
exception types: TemporaryError retries after its delay, PermanentError does not retry, anything
else backs off exponentially and gives up after a bounded number of attempts (until the next trigger).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Awaitable, Callable, Hashable

import kopf

logger = logging.getLogger(__name__)

Work = Callable[[Hashable], Awaitable[float | None]]
GiveUp = Callable[[Hashable, BaseException], None]


@dataclasses.dataclass
class _Entry:
    wake: asyncio.Event
    task: asyncio.Task | None = None
    due: float | None = None  # loop time; None: wait for a request
    errors: int = 0


class WorkQueue:
    def __init__(self, work: Work, *, error_backoff: float = 5.0, max_errors: int = 8,
                 on_give_up: GiveUp | None = None) -> None:
        self._work = work
        self._error_backoff = error_backoff
        self._max_errors = max_errors
        self._on_give_up = on_give_up
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
            entry.due = None
            next_in = await self._attempt(key, entry)
            if next_in is not None:
                self._schedule(entry, next_in)

    async def _attempt(self, key: Hashable, entry: _Entry) -> float | None:
        try:
            next_in = await self._work(key)
        except kopf.TemporaryError as error:
            logger.info("reconcile of %s will be retried in %ss: %s", key, error.delay, error)
            return error.delay or self._error_backoff
        except kopf.PermanentError as error:
            logger.error("reconcile of %s failed permanently: %s", key, error)
            return None
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 -- bounded below, never retried forever
            entry.errors += 1
            if entry.errors > self._max_errors:
                logger.exception("reconcile of %s failed %d times in a row; waiting for its next change",
                                 key, entry.errors)
                entry.errors = 0
                if self._on_give_up is not None:
                    self._on_give_up(key, error)
                return None
            delay = self._error_backoff * 2 ** (entry.errors - 1)
            logger.exception("reconcile of %s failed (attempt %d); retrying in %.0fs", key, entry.errors, delay)
            return delay
        entry.errors = 0
        return next_in
