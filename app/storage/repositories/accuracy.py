"""Each ladder's running tally of how its predictions scored (``ladder_accuracy``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import NamedTuple

from sqlalchemy import (
    delete,
    func,
    insert,
    select,
    text,
)
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import Executable

from app.storage.models import (
    LADDER_ACCURACY,
    Match,
)

_TALLY = LADDER_ACCURACY.c


@cache
def _add_tally_statement() -> Executable:
    """Add to a stripe's tally, inserting the row when it is missing (the same text on both
    databases: ``ON CONFLICT ... DO UPDATE``, SQLite 3.24 and PostgreSQL 9.5)."""
    names = [column.name for column in LADDER_ACCURACY.columns]
    sums = [name for name in names if name not in ("ladder_id", "stripe")]
    return text(
        f"INSERT INTO {LADDER_ACCURACY.name} ({', '.join(names)}) "
        f"VALUES ({', '.join(f':{name}' for name in names)}) "
        "ON CONFLICT (ladder_id, stripe) DO UPDATE SET "
        + ", ".join(f"{name} = {LADDER_ACCURACY.name}.{name} + excluded.{name}" for name in sums)
    )


def add_tallies(*, session: Session, stripe: int, tallies: Mapping[str, Sequence[int]]) -> None:
    """Add each ladder's tally (values in the order of the table's sum columns) to its
    ``stripe`` row, ladder by ladder in id order (the one order every writer takes them in)."""
    if not tallies:
        return
    sums = [column.name for column in LADDER_ACCURACY.columns][2:]
    rows = [
        {
            "ladder_id": ladder_id,
            "stripe": stripe,
            **dict(zip(sums, tallies[ladder_id], strict=True)),
        }
        for ladder_id in sorted(tallies)
    ]
    session.execute(_add_tally_statement(), rows)


def replace_tally(*, session: Session, ladder_id: str, values: Sequence[int]) -> None:
    """Make ``values`` the ladder's whole tally: its stripes deleted, one row inserted."""
    session.execute(delete(LADDER_ACCURACY).where(_TALLY.ladder_id == ladder_id))
    sums = [column.name for column in LADDER_ACCURACY.columns][2:]
    session.execute(
        insert(LADDER_ACCURACY).values(
            ladder_id=ladder_id, stripe=0, **dict(zip(sums, values, strict=True))
        )
    )


def tallies(
    *, session: Session, ladder_ids: Sequence[str] | None = None, limit: int | None = None
) -> dict[str, list[int]]:
    """Each ladder's tally, its stripes added up (values in the order of the table's sum
    columns): of ``ladder_ids``, or of every ladder that has one, at most ``limit`` of
    them, those with the most matches first."""
    sums = list(LADDER_ACCURACY.columns)[2:]
    query = select(_TALLY.ladder_id, *(func.sum(column) for column in sums)).group_by(
        _TALLY.ladder_id
    )
    if ladder_ids is not None:
        query = query.where(_TALLY.ladder_id.in_(list(ladder_ids)))
    if limit is not None:
        query = query.order_by(func.sum(_TALLY.matches).desc(), _TALLY.ladder_id).limit(limit)
    return {row[0]: [int(value or 0) for value in row[1:]] for row in session.execute(query)}


class Prediction(NamedTuple):
    """A counted match's stored prediction and what it is scored against."""

    played_at: datetime
    win_probabilities: list[float] | None
    ranks: list[float] | None
    scores: list[float] | None
    #: The match's stored quality (the console's draws by predicted quality).
    quality: float | None


def recent_predictions(*, session: Session, ladder_id: str, window: int) -> list[Prediction]:
    """The ladder's ``window`` newest matches that count (by seq, newest first), with their
    stored win probabilities and the ranks or scores of their requests (read out of the
    JSON, not the whole request with its meta): one range scan of ``ix_matches_ladder_seq``."""
    query = (
        select(
            Match.played_at,
            Match.win_probabilities,
            Match.request["ranks"],
            Match.request["scores"],
            Match.quality,
        )
        .where(Match.ladder_id == ladder_id, Match.voided_at.is_(None))
        .order_by(Match.seq.desc())
        .limit(window)
    )
    return [Prediction(*row) for row in session.execute(query)]
