"""Ladder versions: what a read's validator (``ETag``) is made of.

A transaction that changes a ladder says so with :func:`touch` (the repositories do: where a
writer takes the ladder to change it, ``lock_ladder`` and ``add_ladder``, and where
recorded matches are written, ``write_recorded``), and
:func:`app.storage.unit_of_work.run` calls :func:`bump` just before it commits: the
ladder's version goes up by one in the same transaction as the change, so no snapshot of
the database, on the primary or on a streaming replica, sees the change without the new
version or the new version without the change. The version is the sum of
:data:`STRIPES` rows; a writer adds to one chosen at random, so concurrent writers of one
ladder rarely wait on the same row lock (on SQLite, where one writer runs at a time, all
use stripe 0). The bump is the transaction's last statement and takes its ladders in
order, so it cannot take part in a deadlock. On PostgreSQL the statement that writes
recorded matches moves their ladders' versions itself (no statement more for a match);
nothing of a recording's but the commit comes after it (the rating buckets' rows, taken
at the commit, are taken in key order by every writer after its version row).

A change made to the database by hand (SQL outside the service) is not seen by the
validators until the ladder's next write: make it move the version too, in the same
transaction (``INSERT INTO ladder_versions (ladder_id, stripe, version) VALUES
('<ladder>', 0, 1) ON CONFLICT (ladder_id, stripe) DO UPDATE SET version =
ladder_versions.version + 1``).

A ladder's validator is its creation time (a ladder deleted and made again under the same
id starts over) and its version: :func:`etag`.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import Executable, String, bindparam, func, select, text
from sqlalchemy.orm import Session

from app.domain.times import utc
from app.storage.models import KeySeen, Ladder, LadderVersion

if TYPE_CHECKING:
    import psycopg

#: Rows a ladder's version is spread over.
STRIPES = 16

_TOUCHED = "ladders_changed"
_BUMPED = "ladders_bumped"


def touch(session: Session, ladder_id: str) -> None:
    """The transaction of ``session`` changes the ladder ``ladder_id``."""
    session.info.setdefault(_TOUCHED, set()).add(ladder_id)


def _stripe(session: Session) -> int:
    """This transaction's stripe (one for all its ladders)."""
    stripe: int | None = session.info.get("version_stripe")
    if stripe is None:
        dialect = session.get_bind().dialect.name
        stripe = random.randrange(STRIPES) if dialect == "postgresql" else 0
        session.info["version_stripe"] = stripe
    return stripe


def bumped(session: Session, ladder_ids: Iterable[str]) -> int:
    """The versions of ``ladder_ids`` move in a statement of the caller's (PostgreSQL's
    write of recorded matches, whose last change they are): :func:`bump` leaves them be.
    Returns the stripe the statement must add to."""
    session.info.setdefault(_BUMPED, set()).update(ladder_ids)
    return _stripe(session)


@cache
def _bump_statement() -> Executable:
    # INSERT ... SELECT ... WHERE: a ladder deleted in this transaction has no row to count
    # (its foreign key would refuse one). The WHERE also keeps SQLite from reading the
    # upsert's ON as a join's.
    return text(
        "INSERT INTO ladder_versions (ladder_id, stripe, version) "
        "SELECT id, :stripe, 1 FROM ladders WHERE id = :ladder_id "
        "ON CONFLICT (ladder_id, stripe) DO UPDATE SET version = ladder_versions.version + 1"
    ).bindparams(bindparam("ladder_id", type_=String))


def bump(session: Session) -> set[str]:
    """Add one to the version of every ladder this transaction changed (its last
    statement, ladders in order). Returns those ladders."""
    touched: set[str] = session.info.pop(_TOUCHED, set())
    bumped: set[str] = session.info.pop(_BUMPED, set())
    if touched - bumped:
        stripe = _stripe(session)
        statement = _bump_statement()
        for ladder_id in sorted(touched - bumped):
            session.execute(statement, {"ladder_id": ladder_id, "stripe": stripe})
    return touched | bumped


def etag(created_at: datetime, version: int) -> str:
    """The strong validator of a ladder's reads: ``"<created>-<version>"`` in hex
    (microseconds since the epoch, and the version)."""
    micros = round(utc(created_at).timestamp() * 1_000_000)
    return f'"{micros:x}-{version:x}"'


def combined_etag(parts: Iterable[tuple[str, datetime, int]]) -> str:
    """One validator for reads that cover several ladders (the ladder list): every
    ladder's id, creation and version, hashed."""
    digest = hashlib.blake2b(digest_size=12)
    for ladder_id, created_at, version in parts:
        digest.update(f"{ladder_id}\x00{etag(created_at, version)}\x00".encode())
    return f'"{digest.hexdigest()}"'


class State(NamedTuple):
    """What one statement reads for a read's validator: the ladder's creation time and
    version (None: no such ladder), and the presented key's row (None: none found)."""

    created_at: datetime | None
    version: int
    key: KeySeen | None

    @property
    def key_hash(self) -> str | None:
        return None if self.key is None else self.key.key_hash


_STATE_COLUMNS = (
    "l.created_at, (SELECT COALESCE(SUM(v.version), 0) FROM ladder_versions v "
    "WHERE v.ladder_id = l.id), k.scope, k.key_hash, k.revoked_at, k.last_used_at, k.ladders"
)
#: The statement in each driver's parameter style (a plain DB-API cursor runs it). On
#: PostgreSQL one statement reads any number of (ladder, key) pairs, from two arrays, in
#: their order; SQLite, in process, runs one statement a pair.
STATE_SQL = {
    "postgresql": f"SELECT {_STATE_COLUMNS} "
    "FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS q(ladder_id, key_hash, n) "
    "LEFT JOIN ladders l ON l.id = q.ladder_id "
    "LEFT JOIN api_keys k ON k.key_hash = q.key_hash ORDER BY q.n",
    "sqlite": f"SELECT {_STATE_COLUMNS} FROM (SELECT 1) AS one "
    "LEFT JOIN ladders l ON l.id = ? LEFT JOIN api_keys k ON k.key_hash = ?",
}


def moment(value: Any) -> datetime | None:
    """A stored time as an aware UTC datetime, from either driver."""
    # SQLite gives the text SQLAlchemy stored; it is UTC.
    if value is None or isinstance(value, datetime):
        return utc(value) if value is not None else None
    return utc(datetime.fromisoformat(str(value)))


def _state(row: Any) -> State:
    key = None
    if row[3] is not None:
        key = KeySeen(row[2], row[3], moment(row[4]), moment(row[5]), row[6])
    return State(moment(row[0]), int(row[1] or 0), key)


def read_states(
    dbapi_connection: Any, dialect: str, pairs: Sequence[tuple[str, str | None]]
) -> list[State]:
    """The validators of ladders and the rows of keys, for each (ladder id, key digest or
    None) of ``pairs`` in order, on a DB-API connection (a pooled one, or a session's
    own), no ORM. On PostgreSQL one statement (one snapshot) reads them all."""
    cursor = dbapi_connection.cursor()
    try:
        if dialect == "postgresql":
            cursor.execute(STATE_SQL[dialect], _arrays(pairs))
            return [_state(row) for row in cursor.fetchall()]
        states = []
        for pair in pairs:
            cursor.execute(STATE_SQL[dialect], pair)
            states.append(_state(cursor.fetchone()))
        return states
    finally:
        cursor.close()


async def read_states_async(
    connection: psycopg.AsyncConnection[Any], pairs: Sequence[tuple[str, str | None]]
) -> list[State]:
    """:func:`read_states` on PostgreSQL, on the event loop (``LoopConnection``)."""
    cursor = await connection.execute(STATE_SQL["postgresql"], _arrays(pairs))
    return [_state(row) for row in await cursor.fetchall()]


def _arrays(pairs: Sequence[tuple[str, str | None]]) -> tuple[list[str], list[str | None]]:
    """PostgreSQL's parameters of :data:`STATE_SQL`: the ladder ids, and the key digests."""
    return [ladder_id for ladder_id, _ in pairs], [key for _, key in pairs]


def read_state(dbapi_connection: Any, dialect: str, ladder_id: str, key_hash: str | None) -> State:
    """:func:`read_states` of one ladder and key."""
    return read_states(dbapi_connection, dialect, [(ladder_id, key_hash)])[0]


def session_state(session: Session, ladder_id: str) -> State:
    """:func:`read_state` in the transaction of ``session``."""
    connection = session.connection()
    dbapi = connection.connection.dbapi_connection
    return read_state(dbapi, connection.dialect.name, ladder_id, None)


def ladder_states(session: Session) -> list[tuple[str, datetime, int]]:
    """Every ladder's id, creation time and version, by id."""
    ladders = Ladder.__table__
    stripes = LadderVersion.__table__
    rows = session.execute(
        select(ladders.c.id, ladders.c.created_at, func.coalesce(func.sum(stripes.c.version), 0))
        .select_from(ladders.outerjoin(stripes, stripes.c.ladder_id == ladders.c.id))
        .group_by(ladders.c.id, ladders.c.created_at)
        .order_by(ladders.c.id)
    )
    return [(row[0], row[1], int(row[2])) for row in rows]
