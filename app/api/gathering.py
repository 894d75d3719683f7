"""Requests for one kind of row, gathered into one statement (the read path's validators
and player cards)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Sequence
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Gathered(Generic[K, V]):
    """A worker's requests for one kind of row, gathered: every request that needs one
    joins the next statement, which starts when the one under way is answered, and one
    call of ``fetch`` (one statement: on the event loop, or on a pooled connection in one
    trip to the thread pool) answers them all, each with its value or its own exception.
    Under load a worker thus pays one round trip to the database for many reads, not one
    each.

    Never stale: a request joins only a statement that has not started yet, so the state
    it is answered from was read after it arrived, and a write whose response was sent
    before that is in it."""

    def __init__(self, fetch: Callable[[list[K]], Awaitable[Sequence[V | Exception]]]) -> None:
        self._fetch = fetch
        self._waiting: dict[K, asyncio.Future[V]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reading: asyncio.Task[None] | None = None

    async def get(self, key: K) -> V:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (a test client's): start afresh
            self._loop, self._waiting, self._reading = loop, {}, None
        future = self._waiting.get(key)
        if future is None:
            future = self._waiting[key] = loop.create_future()
        if self._reading is None:
            self._reading = loop.create_task(self._read())
        # Shielded: a request that goes away must not cancel the others' answer.
        return await asyncio.shield(future)

    async def _read(self) -> None:
        batch: dict[K, asyncio.Future[V]] = {}
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, {}
                keys = list(batch)
                try:
                    found = await self._fetch(keys)
                except Exception as exc:
                    found = [exc] * len(keys)
                for key, value in zip(keys, found, strict=True):
                    future = batch[key]
                    if future.done():
                        continue
                    if isinstance(value, Exception):
                        future.set_exception(value)
                        future.exception()  # retrieved: its waiter may have gone
                    else:
                        future.set_result(value)
        finally:
            self._reading = None
            for future in batch.values():  # cancelled itself (the loop closing)
                future.cancel()
