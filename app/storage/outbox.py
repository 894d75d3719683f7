"""The outbox: the events of a transaction, written by it just before it commits.

A use case says what happened with :func:`emit` as it goes; the events wait in the
session, and :func:`app.storage.unit_of_work.run` calls :func:`flush` after the ladder
versions' bump, just before the commit, so an event exists exactly when its change does (a
rolled-back change leaves none). :func:`flush` numbers each ladder's events under the lock
of the ladder's row of ``ladder_event_counters``, which it takes as the transaction's last
statement and holds to the commit: a second transaction with events
of the ladder waits for the first to commit before it takes its numbers. So a ladder's
events are numbered in the order their transactions commit, and a reader that has read
every event up to a number has read every event that will ever have a smaller one: a feed
paged by that number never skips one, however transactions interleave (on PostgreSQL a
sequence's values are drawn in the order transactions ask, not the order they commit; a
reader paging by one could pass a value whose transaction has not committed yet). The
lock is held from that statement to the commit only. Every transaction takes the versions'
rows, then these (ladders in order), then at its commit the rank buckets' rows: one order
for all, so no deadlock. SQLite runs one writer at a time anyway.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from sqlalchemy import Executable, String, bindparam, insert, text
from sqlalchemy.orm import Session

from app.domain import jsontext
from app.storage import versions
from app.storage.models import Event

_PENDING = "outbox.pending"


@dataclass(frozen=True, slots=True)
class Pending:
    """An event waiting in its session for the commit."""

    ladder_id: str
    type: str
    created_at: datetime
    #: The event's ``data``: a JSON document, as text.
    data: str
    match_seq: int | None = None
    player_id: str | None = None


def emit(
    session: Session,
    *,
    ladder_id: str,
    type: str,
    data: str,
    now: datetime,
    match_seq: int | None = None,
    player_id: str | None = None,
) -> None:
    """Write an event of ``ladder_id`` with the transaction of ``session`` (``data``: its
    JSON text). The ladder counts as changed by the transaction (its version moves)."""
    session.info.setdefault(_PENDING, []).append(
        Pending(ladder_id, type, now, data, match_seq, player_id)
    )
    versions.touch(session, ladder_id)


@cache
def _number_statement() -> Executable:
    # INSERT ... SELECT ... WHERE: a ladder deleted in this transaction has no row to number
    # (its foreign key would refuse one), and its events go with it.
    return text(
        "INSERT INTO ladder_event_counters (ladder_id, seq) "
        "SELECT id, :count FROM ladders WHERE id = :ladder_id "
        "ON CONFLICT (ladder_id) DO UPDATE SET seq = ladder_event_counters.seq + :count "
        "RETURNING seq"
    ).bindparams(bindparam("ladder_id", type_=String))


@cache
def _number_and_write_statement() -> Executable:
    # PostgreSQL: the numbers taken and the events written in one statement, the events
    # as one JSON document (its rows read back by json_to_recordset): one round trip.
    return text(
        "WITH numbered AS ("
        "INSERT INTO ladder_event_counters (ladder_id, seq) "
        "SELECT id, :count FROM ladders WHERE id = :ladder_id "
        "ON CONFLICT (ladder_id) DO UPDATE SET seq = ladder_event_counters.seq + :count "
        "RETURNING seq) "
        "INSERT INTO events (ladder_id, seq, id, type, created_at, data, match_seq, player_id) "
        "SELECT :ladder_id, numbered.seq - :count + v.n, v.id, v.type, v.created_at, v.data, "
        "v.match_seq, v.player_id FROM numbered, json_to_recordset(CAST(:events AS JSON)) "
        "AS v(n BIGINT, id TEXT, type TEXT, created_at TIMESTAMPTZ, data TEXT, "
        "match_seq BIGINT, player_id TEXT)"
    ).bindparams(bindparam("ladder_id", type_=String))


def _flush_postgresql(session: Session, by_ladder: dict[str, list[Pending]]) -> None:
    for ladder_id in sorted(by_ladder):
        events = by_ladder[ladder_id]
        rows = [
            {
                "n": n,
                "id": uuid.uuid4().hex,
                "type": event.type,
                "created_at": event.created_at.isoformat(),
                "data": event.data,
                "match_seq": event.match_seq,
                "player_id": event.player_id,
            }
            for n, event in enumerate(events, start=1)
        ]
        session.execute(
            _number_and_write_statement(),
            {"ladder_id": ladder_id, "count": len(events), "events": jsontext.compact(rows)},
        )


def flush(session: Session) -> None:
    """Number and write the events the transaction emitted, ladders in order."""
    pending: list[Pending] = session.info.pop(_PENDING, [])
    if not pending:
        return
    by_ladder: dict[str, list[Pending]] = {}
    for event in pending:
        by_ladder.setdefault(event.ladder_id, []).append(event)
    if session.get_bind().dialect.name == "postgresql":
        _flush_postgresql(session, by_ladder)
        return
    rows = []
    for ladder_id in sorted(by_ladder):
        events = by_ladder[ladder_id]
        last = session.execute(
            _number_statement(), {"ladder_id": ladder_id, "count": len(events)}
        ).scalar()
        if last is None:
            continue
        first = last - len(events) + 1
        rows += [
            {
                "ladder_id": ladder_id,
                "seq": first + n,
                "id": uuid.uuid4().hex,
                "type": event.type,
                "created_at": event.created_at,
                "data": event.data,
                "match_seq": event.match_seq,
                "player_id": event.player_id,
            }
            for n, event in enumerate(events)
        ]
    if rows:
        session.execute(insert(Event), rows)
