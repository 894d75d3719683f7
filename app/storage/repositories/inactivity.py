"""What the inactivity pass stores and reads: the ladders due to be aged again, the pass
under way per ladder (``aging_passes``), and the ratings it brings forward, a step of
player ids at a time."""

from __future__ import annotations

import json
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import delete, insert, or_, select, update
from sqlalchemy.orm import Session

from app.storage.models import AgingPass, Ladder, PlayerRating
from app.storage.repositories.ratings import RatingState, state_columns
from app.storage.versions import moment


class DueLadder(NamedTuple):
    id: str
    algorithm: str
    params: str


class PassRow(NamedTuple):
    as_of: datetime
    after_id: str
    owner: str
    lease_until: datetime


def due_ladders(*, session: Session, due: datetime, now: datetime) -> list[DueLadder]:
    """The ladders aged before ``due`` (or never) with no pass under way, and those whose
    pass's lease ran out before ``now`` (its worker stopped): the caller keeps those
    whose configuration ages ratings."""
    query = (
        select(Ladder.id, Ladder.algorithm, Ladder.params)
        .outerjoin(AgingPass, AgingPass.ladder_id == Ladder.id)
        .where(
            or_(
                (AgingPass.ladder_id.is_(None))
                & (Ladder.aged_at.is_(None) | (Ladder.aged_at <= due)),
                AgingPass.lease_until < now,
            )
        )
        .order_by(Ladder.id)
    )
    return [
        DueLadder(ladder_id, algorithm, json.dumps(params, sort_keys=True))
        for ladder_id, algorithm, params in session.execute(query)
    ]


def pass_of(*, session: Session, ladder_id: str, lock: bool = True) -> PassRow | None:
    """The ladder's pass under way, row-locked unless not ``lock`` (None: none)."""
    query = select(
        AgingPass.as_of, AgingPass.after_id, AgingPass.owner, AgingPass.lease_until
    ).where(AgingPass.ladder_id == ladder_id)
    row = session.execute(query.with_for_update() if lock else query).first()
    if row is None:
        return None
    as_of, after_id, owner, lease_until = row
    return PassRow(moment(as_of), after_id, owner, moment(lease_until))  # type: ignore[arg-type]


def start_pass(
    *, session: Session, ladder_id: str, as_of: datetime, owner: str, lease_until: datetime
) -> None:
    """A new pass to ``as_of`` (its row; a concurrent one's insert conflicts) and the
    ladder's ``aged_at`` moved to it: every rating written from now on stands at it."""
    session.execute(
        insert(AgingPass).values(
            ladder_id=ladder_id, as_of=as_of, after_id="", owner=owner, lease_until=lease_until
        )
    )
    session.execute(update(Ladder).where(Ladder.id == ladder_id).values(aged_at=as_of))


def move_pass(
    *, session: Session, ladder_id: str, after_id: str, owner: str, lease_until: datetime
) -> None:
    session.execute(
        update(AgingPass)
        .where(AgingPass.ladder_id == ladder_id)
        .values(after_id=after_id, owner=owner, lease_until=lease_until)
    )


def end_pass(*, session: Session, ladder_id: str) -> None:
    session.execute(delete(AgingPass).where(AgingPass.ladder_id == ladder_id))


class AgedRow(NamedTuple):
    state: RatingState
    conservative: float


def lock_step(*, session: Session, ladder_id: str, after_id: str, size: int) -> list[AgedRow]:
    """The next ``size`` ratings of the ladder by player id after ``after_id``, row-locked
    in id order (as recording locks its players)."""
    query = (
        select(*state_columns(), PlayerRating.conservative)
        .where(PlayerRating.ladder_id == ladder_id, PlayerRating.player_id > after_id)
        .order_by(PlayerRating.player_id)
        .limit(size)
        .with_for_update()
    )
    return [
        AgedRow(RatingState(*row[:4], moment(row[4]), row[5]), float(row[6]))
        for row in session.execute(query)
    ]
