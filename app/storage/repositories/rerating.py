"""What a re-rating (a void, a rebuild) reads and rewrites: the matches after a point,
the ladder's history and ratings, and their rows rewritten in place."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple, cast

from sqlalchemy import (
    BigInteger,
    String,
    Table,
    any_,
    bindparam,
    delete,
    func,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from app.storage.engine import (
    lift_reply_bound,
)
from app.storage.models import (
    Match,
    Participant,
    PlayerRating,
    RatingBlock,
    RatingBucket,
    RatingHistory,
)
from app.storage.repositories.matches import HistoryKind, history_kind
from app.storage.repositories.ratings import RatingState, state_columns
from app.storage.repositories.sql import SQLITE_IN_CHUNK, bulk_update, chunked, dialect_of


def lift_statement_timeout(*, session: Session) -> None:
    """No statement timeout for the rest of this transaction (PostgreSQL): re-rating a large
    ladder legitimately runs statements longer than a request's; the client's wait for each
    reply is then unbounded too (``engine.lift_reply_bound``)."""
    if dialect_of(session) == "postgresql":
        session.execute(text("SET LOCAL statement_timeout = 0"))
        lift_reply_bound(session.connection())


def lock_match(*, session: Session, ladder_id: str, match_id: str) -> Match | None:
    """The match, row-locked: two voids of one match run one after the other."""
    return session.scalar(
        select(Match)
        .where(Match.ladder_id == ladder_id, Match.match_id == match_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )


class MatchRow(NamedTuple):
    """What re-rating a recorded match needs."""

    seq: int
    match_id: str
    played_at: datetime
    recorded_at: datetime
    #: The canonical request: teams, ranks or scores, weights and meta.
    request: dict[str, Any]
    #: The stored win probabilities (None: none stored).
    win_probabilities: list[float] | None = None


def matches_after(*, session: Session, ladder_id: str, after_seq: int) -> list[MatchRow]:
    """The ladder's matches that count (not voided) with seq above ``after_seq``, in order."""
    query = (
        select(
            Match.seq,
            Match.match_id,
            Match.played_at,
            Match.recorded_at,
            Match.request,
            Match.win_probabilities,
        )
        .where(Match.ladder_id == ladder_id, Match.seq > after_seq, Match.voided_at.is_(None))
        .order_by(Match.seq)
    )
    return [MatchRow(*row) for row in session.execute(query)]


def matches_page(*, session: Session, ladder_id: str, after_seq: int, limit: int) -> list[MatchRow]:
    """The first ``limit`` of :func:`matches_after` (the next page reads after the last seq):
    a ladder's matches read a page at a time, each page let go once used."""
    query = (
        select(Match.seq, Match.match_id, Match.played_at, Match.recorded_at, Match.request)
        .where(Match.ladder_id == ladder_id, Match.seq > after_seq, Match.voided_at.is_(None))
        .order_by(Match.seq)
        .limit(limit)
    )
    return [MatchRow(*row) for row in session.execute(query)]


def count_matches_after(*, session: Session, ladder_id: str, after_seq: int) -> int:
    """How many of :func:`matches_after` there are (at most what voiding ``after_seq``
    re-rates), without reading the matches."""
    query = select(func.count()).where(
        Match.ladder_id == ladder_id, Match.seq > after_seq, Match.voided_at.is_(None)
    )
    return int(session.scalar(query) or 0)


class HistoryRow(NamedTuple):
    id: int
    player_id: str
    match_seq: int | None
    mu_before: float
    sigma_before: float | None
    mu_after: float
    sigma_after: float | None
    volatility_before: float | None
    volatility_after: float | None
    reset: bool = False

    @property
    def kind(self) -> HistoryKind:
        return history_kind(self.match_seq, self.reset)


def history_from(
    *, session: Session, ladder_id: str, from_seq: int, from_id: int
) -> list[HistoryRow]:
    """History rows of matches with seq >= ``from_seq`` and adjustments with id >=
    ``from_id``, by id. Two range scans (the match_seq index, the primary key), so a void
    late in a long ladder reads only the rows after it."""
    columns = (
        RatingHistory.id,
        RatingHistory.player_id,
        RatingHistory.match_seq,
        RatingHistory.mu_before,
        RatingHistory.sigma_before,
        RatingHistory.mu_after,
        RatingHistory.sigma_after,
        RatingHistory.volatility_before,
        RatingHistory.volatility_after,
        RatingHistory.reset,
    )
    of_matches = select(*columns).where(
        RatingHistory.match_seq >= from_seq, RatingHistory.ladder_id == ladder_id
    )
    adjustments = select(*columns).where(
        RatingHistory.id >= from_id,
        RatingHistory.match_seq.is_(None),
        RatingHistory.ladder_id == ladder_id,
    )
    rows = [HistoryRow._make(row) for row in session.execute(of_matches)]
    rows.extend(HistoryRow._make(row) for row in session.execute(adjustments))
    rows.sort(key=lambda row: row.id)
    return rows


def first_history_id(*, session: Session, match_seq: int) -> int | None:
    return session.scalar(
        select(func.min(RatingHistory.id)).where(RatingHistory.match_seq == match_seq)
    )


def starting_ratings(
    *, session: Session, ladder_id: str, match_seq: int
) -> dict[str, tuple[float, float | None]]:
    """Each participant's rating before the match ``match_seq`` (its history row)."""
    rows = session.execute(
        select(RatingHistory.player_id, RatingHistory.mu_before, RatingHistory.sigma_before).where(
            RatingHistory.ladder_id == ladder_id, RatingHistory.match_seq == match_seq
        )
    )
    return {player: (mu, sigma) for player, mu, sigma in rows}


def latest_played_before(
    *, session: Session, ladder_id: str, player_ids: Sequence[str], before_seq: int
) -> dict[str, datetime]:
    """Each player's latest played_at over its counted matches with seq below ``before_seq``."""
    out: dict[str, datetime] = {}
    for chunk in chunked(sorted(player_ids), session):
        if dialect_of(session) == "postgresql":
            ids = bindparam("player_ids", value=list(chunk), type_=ARRAY(String))
            condition = Participant.player_id == any_(ids)
        else:
            condition = Participant.player_id.in_(list(chunk))
        query = (
            select(Participant.player_id, func.max(Match.played_at))
            .join(Match, Match.seq == Participant.match_seq)
            .where(
                Participant.ladder_id == ladder_id,
                condition,
                Participant.match_seq < before_seq,
                Match.voided_at.is_(None),
            )
            .group_by(Participant.player_id)
        )
        out.update((player, latest) for player, latest in session.execute(query) if latest)
    return out


def lock_ladder_ratings(*, session: Session, ladder_id: str) -> list[RatingState]:
    """Every rating of the ladder, row-locked in player id order (one statement)."""
    query = (
        select(*state_columns())
        .where(PlayerRating.ladder_id == ladder_id)
        .order_by(PlayerRating.player_id)
        .with_for_update()
    )
    return [RatingState(*row) for row in session.execute(query)]


def players_with_adjustments(
    *, session: Session, ladder_id: str, player_ids: Sequence[str]
) -> set[str]:
    if not player_ids:
        return set()
    query = (
        select(RatingHistory.player_id)
        .where(
            RatingHistory.ladder_id == ladder_id,
            RatingHistory.match_seq.is_(None),
            RatingHistory.reset.is_(False),
            RatingHistory.player_id.in_(list(player_ids)),
        )
        .distinct()
    )
    return set(session.scalars(query))


def delete_ratings(*, session: Session, ladder_id: str, player_ids: Sequence[str]) -> None:
    """Remove the ratings of ``player_ids``. On SQLite, whose triggers keep the rating
    buckets and blocks row by row, those left with no player go too (PostgreSQL's deferred
    apply leaves none; a block without players merges into the one before it, which
    SQLite's one writer at a time makes safe)."""
    if not player_ids:
        return
    session.execute(
        delete(PlayerRating).where(
            PlayerRating.ladder_id == ladder_id, PlayerRating.player_id.in_(list(player_ids))
        )
    )
    if dialect_of(session) == "sqlite":
        for table in (RatingBucket, RatingBlock):
            session.execute(delete(table).where(table.ladder_id == ladder_id, table.players == 0))


def lower_season_base(*, session: Session, ladder_id: str, player_ids: Sequence[str]) -> None:
    """One counted match fewer before the current season for ``player_ids`` (a void in a
    closed season)."""
    if not player_ids:
        return
    session.execute(
        update(PlayerRating)
        .where(PlayerRating.ladder_id == ladder_id, PlayerRating.player_id.in_(list(player_ids)))
        .values(season_base=PlayerRating.season_base - 1)
    )


def delete_match_rows(
    *, session: Session, model: type[Participant] | type[RatingHistory], seqs: Sequence[int]
) -> None:
    """Delete the rows of ``model`` (participants or history) of the matches ``seqs``."""
    if not seqs:
        return
    column = model.match_seq
    if dialect_of(session) == "postgresql":
        ids = bindparam("seqs", value=list(seqs), type_=ARRAY(BigInteger))
        session.execute(delete(model).where(column == any_(ids)))
        return
    for start in range(0, len(seqs), SQLITE_IN_CHUNK):
        session.execute(
            delete(model).where(column.in_(list(seqs[start : start + SQLITE_IN_CHUNK])))
        )


def update_history(*, session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Rewrite history rows in place (their ids keep their order): each row has ``id``,
    ``mu_before``, ``sigma_before``, ``mu_after``, ``sigma_after`` (and Glicko-2's
    ``volatility_before``, ``volatility_after``)."""
    bulk_update(
        session=session, table=cast(Table, RatingHistory.__table__), keys=("id",), rows=rows
    )


def update_matches(*, session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Rewrite matches' ``quality``, ``result`` and ``voided_at`` (and
    ``win_probabilities``, if the rows have it) by ``seq``."""
    bulk_update(session=session, table=cast(Table, Match.__table__), keys=("seq",), rows=rows)
