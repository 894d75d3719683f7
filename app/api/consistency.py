"""Read-your-writes on a streaming replica (``RATINGS_READ_DATABASE_URL``).

Every write's answer carries ``Ratings-Consistency-Token``: where the primary's log stood
once it had committed (:mod:`app.storage.consistency`). A read that sends a token back is
answered from data at least that fresh, whichever worker or instance takes it: from the
replica once it has replayed that far (it waits up to ``RATINGS_CONSISTENCY_WAIT_MS``,
asking the replica every few milliseconds, a worker's waiting reads in one question), or
else from the primary. Reads without a token go to the replica as before, and every read's
answer says where it was read from (``Ratings-Read-From: replica`` or ``primary``).
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated

from fastapi import Header
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.gathering import Gathered
from app.config import Settings
from app.errors import InvalidInput
from app.storage import consistency
from app.storage.engine import LoopConnection, on_postgres

#: The header of a write's token, and of a read that asks to see it.
TOKEN_HEADER = "Ratings-Consistency-Token"

#: The header of a read's answer: ``replica`` or ``primary``.
READ_FROM_HEADER = "Ratings-Read-From"

#: How often a read waiting for the replica asks how far it has replayed, in seconds.
POLL_S = 0.005

#: The token a read sends, as a FastAPI route declares it.
ConsistencyToken = Annotated[
    str | None,
    Header(
        alias=TOKEN_HEADER,
        description="The `Ratings-Consistency-Token` of a write's answer: this read sees "
        "that write or later (from the replica once it has replayed it, else from the "
        "primary). Without a read replica, every read does.",
    ),
]


def replicated(settings: Settings) -> bool:
    """Whether reads go to a streaming replica of a PostgreSQL primary."""
    return (
        settings.read_database_url is not None
        and on_postgres(settings.database_url)
        and on_postgres(settings.read_database_url)
    )


@dataclass
class _Served:
    read_from: str | None = None


_served: ContextVar[_Served | None] = ContextVar("served", default=None)


class ConsistencyHeaders:
    """Pure ASGI middleware, where reads go to a replica: a write's answer gets its token
    (the furthest position the request's writes committed at), a read's answer the
    database it was read from."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        served = _Served()
        reset = _served.set(served)
        try:
            with consistency.collecting() as written:

                async def stamped(message: Message) -> None:
                    if message["type"] == "http.response.start":
                        extra = []
                        if written.position:
                            token = consistency.render(written.position)
                            extra.append((TOKEN_HEADER.lower().encode(), token.encode()))
                        if served.read_from is not None:
                            where = served.read_from.encode()
                            extra.append((READ_FROM_HEADER.lower().encode(), where))
                        if extra:
                            message = {**message, "headers": [*message.get("headers", []), *extra]}
                    await send(message)

                await self.app(scope, receive, stamped)
        finally:
            _served.reset(reset)


class Replay:
    """How far a worker's replica has replayed the primary's log, asked of it when a read
    needs to know (the reads waiting at once share one question)."""

    def __init__(self, connection: LoopConnection, wait_s: float) -> None:
        self.connection = connection
        self.wait_s = wait_s
        #: The furthest replay position seen (never goes back on one replica).
        self.position = 0
        self._asked = Gathered[None, int | None](self._ask)

    async def _ask(self, keys: list[None]) -> list[int | Exception | None]:
        position = await self.connection.run(consistency.replay_position)
        return [position] * len(keys)

    async def reached(self, position: int) -> bool:
        """Whether the replica has replayed up to ``position``, waiting for it a bounded
        moment; False when it has not by then or cannot say (it is down)."""
        if position <= self.position:
            return True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_s
        while True:
            try:
                replayed = await self._asked.get(None)
            except Exception:
                return False
            if replayed is None:  # no replica at all: it has every write
                return True
            self.position = max(self.position, replayed)
            if position <= self.position:
                return True
            left = deadline - loop.time()
            if left <= 0:
                return False
            await asyncio.sleep(min(POLL_S, left))


async def reads_primary(replay: Replay | None, *, asked: bool, token: str | None) -> bool:
    """Whether a read goes to the primary: asked for (``Ratings-Read-From: primary``), or
    sent with a token the replica has not replayed to within the wait; said in the answer.
    ``replay``: None where reads have no replica (the token is still checked)."""
    position = None if token is None else consistency.parse(token)
    if token is not None and position is None:
        raise InvalidInput(f"{TOKEN_HEADER}: not a token of this service: {token[:64]!r}")
    if replay is None:
        return asked
    primary = asked or (position is not None and not await replay.reached(position))
    served = _served.get()
    if served is not None:
        served.read_from = "primary" if primary else "replica"
    return primary
