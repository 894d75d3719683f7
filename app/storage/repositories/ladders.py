"""Ladders as stored: their rows, their locks (a re-rating holds its ladder alone), and
listing them."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from sqlalchemy import (
    String,
    bindparam,
    func,
    select,
    text,
)
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import Executable

from app.config import get_settings
from app.errors import ServiceUnavailable
from app.storage import versions
from app.storage.models import (
    Ladder,
    Match,
    RatingBucket,
    Season,
)
from app.storage.repositories.sql import dialect_of


def get_ladder(*, session: Session, ladder_id: str) -> Ladder | None:
    return session.get(Ladder, ladder_id)


@cache
def _read_ladder_statement() -> Executable:
    table = Ladder.__table__
    return select(*table.c).where(table.c.id == bindparam("ladder_id", type_=String))


def read_ladder(*, session: Session, ladder_id: str) -> Ladder | None:
    """The ladder for a read: its row by one plain query, as a ``Ladder`` that belongs to no
    session. Loading it into the session (identity map, change tracking) cost a read more
    CPU time than the query itself. Only for looking at: a change to it is never saved."""
    row = session.execute(_read_ladder_statement(), {"ladder_id": ladder_id}).first()
    return None if row is None else Ladder(**row._mapping)


def lock_ladder(*, session: Session, ladder_id: str, share: bool) -> Ladder | None:
    """The ladder, read again and row-locked: ``share`` (recording matches) lets many
    transactions hold it at once; otherwise (changing parameters) one alone. A writer
    takes it: the ladder's version moves when the transaction commits."""
    versions.touch(session, ladder_id)
    return session.scalar(
        select(Ladder)
        .where(Ladder.id == ladder_id)
        .with_for_update(read=share)
        .execution_options(populate_existing=True)
    )


def hold_ladder_row(*, session: Session, ladder_id: str, patient: bool) -> Ladder | None:
    """The ladder, row-locked for this transaction alone (``lock_ladder``, not shared). A
    request (not ``patient``) waits for it at most the statement timeout on PostgreSQL,
    and so does every lock it waits for later in its transaction (``lock_timeout``):
    past it, ``ServiceUnavailable`` with ``Retry-After``, nothing changed. A job waits its
    turn however long the re-ratings before it take."""
    if dialect_of(session) == "postgresql" and not patient:
        bound = get_settings().statement_timeout_ms
        session.execute(text(f"SET LOCAL lock_timeout = {int(bound)}"))
    try:
        return lock_ladder(session=session, ladder_id=ladder_id, share=False)
    except OperationalError as exc:
        if getattr(exc.orig, "sqlstate", None) != LOCK_NOT_AVAILABLE:
            raise
    raise ServiceUnavailable(
        f"ladder: {ladder_id[:64]!r} is held by a re-rating, an erasure or a job; retry later "
        "(or send the request with Prefer: respond-async to queue it as a job)",
        headers={"Retry-After": str(LADDER_BUSY_RETRY_S)},
    )


#: PostgreSQL's SQLSTATE of a lock not granted within ``lock_timeout``.
LOCK_NOT_AVAILABLE = "55P03"


#: ``Retry-After`` of a request that found its ladder held past its bound.
LADDER_BUSY_RETRY_S = 5


def add_ladder(*, session: Session, ladder: Ladder) -> None:
    """Insert ``ladder`` inside a savepoint: a concurrent insert of the same id raises
    ``IntegrityError`` and leaves the outer transaction usable."""
    with session.begin_nested():
        session.add(ladder)
        session.flush()
        # Its first season, from its creation: every match and history row of the ladder
        # belongs to it until the next one opens.
        session.add(
            Season(
                ladder_id=ladder.id,
                ordinal=1,
                id=ladder.season,
                keep=1.0,
                started_at=ladder.created_at,
                ended_at=None,
                first_seq=0,
                first_history_id=0,
            )
        )
    versions.touch(session, ladder.id)


def list_ladders(*, session: Session, after: str | None, limit: int) -> list[Ladder]:
    query = select(Ladder).order_by(Ladder.id).limit(limit)
    if after is not None:
        query = query.where(Ladder.id > after)
    return list(session.scalars(query))


def count_players(*, session: Session, ladder_ids: Sequence[str]) -> dict[str, int]:
    """Players per ladder: the sum of its rating buckets (a few thousand rows at most),
    which count every rating exactly, rather than a count of a million rating rows."""
    rows = session.execute(
        select(RatingBucket.ladder_id, func.coalesce(func.sum(RatingBucket.players), 0))
        .where(RatingBucket.ladder_id.in_(ladder_ids))
        .group_by(RatingBucket.ladder_id)
    )
    return {ladder_id: int(count) for ladder_id, count in rows}


def count_matches(*, session: Session, ladder_ids: Sequence[str]) -> dict[str, int]:
    """Matches that count, per ladder: all of its matches (an index-only scan of
    ``ix_matches_ladder_seq``, no match row read) less the voided ones (the partial index
    ``ix_matches_voided``). Filtering on ``voided_at`` instead read every match row."""
    in_ladders = Match.ladder_id.in_(ladder_ids)
    query = select(Match.ladder_id, func.count()).group_by(Match.ladder_id)
    counts = {ladder_id: int(n) for ladder_id, n in session.execute(query.where(in_ladders))}
    voided = query.where(in_ladders, Match.voided_at.is_not(None))
    for ladder_id, n in session.execute(voided):
        counts[ladder_id] -= int(n)
    return counts


def last_match_seq(*, session: Session) -> int:
    """The highest match seq in the database (0: no match yet): every recording, by any
    process and in any ladder, takes the next numbers. One step down the primary key's
    index, whatever the number of matches."""
    return int(session.scalar(select(func.max(Match.seq))) or 0)
