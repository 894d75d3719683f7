"""Read-your-writes on a streaming replica: a write's token is where the primary's
write-ahead log stood once it had committed, and a replica has replayed a write once its
replay position is at or past that token.

A token is PostgreSQL's own notation of a log position (``16/B374D848``): opaque to
clients, comparable here. Tokens are given only where reads go to a replica (``RATINGS_
READ_DATABASE_URL`` on PostgreSQL); elsewhere every read sees every committed write.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from app.config import get_settings
from app.storage.engine import on_postgres

_log = logging.getLogger(__name__)

#: A log position as PostgreSQL writes it: two hexadecimal halves of 32 bits.
_POSITION = re.compile(r"([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})")


def parse(token: str) -> int | None:
    """The log position of ``token``, or None when it is not one."""
    found = _POSITION.fullmatch(token.strip())
    if found is None:
        return None
    return (int(found[1], 16) << 32) | int(found[2], 16)


def render(position: int) -> str:
    """The token of a log position."""
    return f"{position >> 32:X}/{position & 0xFFFFFFFF:X}"


def wanted() -> bool:
    """Whether writes are given tokens: reads go to a replica of a PostgreSQL primary."""
    settings = get_settings()
    return bool(settings.read_database_url) and on_postgres(settings.database_url)


@dataclass
class Written:
    """The furthest log position a request's writes committed at (0: none yet)."""

    position: int = 0


_written: ContextVar[Written | None] = ContextVar("written", default=None)


@contextmanager
def collecting() -> Iterator[Written]:
    """Collect the positions of the writes committed in this context (and in the worker
    threads it hands work to, which copy it) until the block ends."""
    written = Written()
    reset = _written.set(written)
    try:
        yield written
    finally:
        _written.reset(reset)


def note(position: int) -> None:
    """A write of this context committed at ``position``."""
    written = _written.get()
    if written is not None and position > written.position:
        written.position = position


_INSERT_POSITION = text("SELECT CAST(pg_current_wal_insert_lsn() AS TEXT)")


def note_commit(session: Session) -> None:
    """Note where the log stands, right after ``session`` committed a write: at or past
    its commit record. Asked on a connection of its own transaction, which the caller
    closes; any connection of the primary tells the same. A failure leaves the write
    without a token (it committed): logged, never raised."""
    if _written.get() is None:
        return
    try:
        position = parse(str(session.execute(_INSERT_POSITION).scalar_one()))
    except DBAPIError as exc:
        _log.warning("consistency: no token for a committed write: %s", type(exc.orig).__name__)
        return
    if position is not None:
        note(position)


async def replay_position(connection: Any) -> int | None:
    """How far a replica has replayed the primary's log, on a psycopg ``AsyncConnection``
    to it; None when the database is no replica (it has every write)."""
    cursor = await connection.execute("SELECT CAST(pg_last_wal_replay_lsn() AS TEXT)")
    row = await cursor.fetchone()
    return None if row is None or row[0] is None else parse(str(row[0]))
