"""A ladder's events as the outbox wrote them (``events``), read a page at a time."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from app.domain.times import utc
from app.storage.models import Event, LadderEventCounter


class EventRow(NamedTuple):
    ladder_id: str
    seq: int
    id: str
    type: str
    created_at: datetime
    data: str


def page(*, session: Session, ladder_id: str, after_seq: int, limit: int) -> list[EventRow]:
    """The ladder's first ``limit`` events numbered after ``after_seq``, in order."""
    query = (
        select(Event.ladder_id, Event.seq, Event.id, Event.type, Event.created_at, Event.data)
        .where(Event.ladder_id == ladder_id, Event.seq > after_seq)
        .order_by(Event.seq)
        .limit(limit)
    )
    return [EventRow(*row) for row in session.execute(query)]


class NoticeRow(NamedTuple):
    ladder_id: str
    seq: int
    data: str


def erasure_notices_before(*, session: Session, cutoff: datetime) -> list[NoticeRow]:
    """The ``player.erased`` events written before ``cutoff`` that still name the id."""
    query = select(Event.ladder_id, Event.seq, Event.data).where(
        Event.player_id.is_not(None), Event.type == "player.erased", Event.created_at < cutoff
    )
    return [NoticeRow(*row) for row in session.execute(query)]


def expire_notices(*, session: Session, rows: list[tuple[str, int, str]]) -> None:
    """Give the events (ladder, seq) their new ``data``, and no ``player_id``."""
    if rows:
        session.execute(
            update(Event),
            [
                {"ladder_id": ladder_id, "seq": seq, "data": data, "player_id": None}
                for ladder_id, seq, data in rows
            ],
        )


def delete_before(*, session: Session, cutoff: datetime, limit: int) -> dict[str, int]:
    """Delete up to ``limit`` of each ladder's oldest events written before ``cutoff``,
    read along the primary key (a ladder's events are numbered in commit order, so its
    oldest come first); how many, by ladder."""
    deleted: dict[str, int] = {}
    for (ladder_id,) in session.execute(select(LadderEventCounter.ladder_id)).all():
        oldest = session.execute(
            select(Event.seq, Event.created_at)
            .where(Event.ladder_id == ladder_id)
            .order_by(Event.seq)
            .limit(limit)
        ).all()
        old = [seq for seq, created_at in oldest if utc(created_at) < cutoff]
        if old:
            session.execute(
                delete(Event).where(Event.ladder_id == ladder_id, Event.seq <= max(old))
            )
            deleted[ladder_id] = len(old)
    return deleted
