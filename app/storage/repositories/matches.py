"""Matches and their history as stored: the rows of a match, its participants and its
players' rating history, found and paged."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Literal, NamedTuple

from sqlalchemy import (
    func,
    select,
    text,
)
from sqlalchemy.orm import Session

from app.storage.models import (
    Match,
    Participant,
    RatingHistory,
)
from app.storage.repositories.sql import chunked, dialect_of, id_list


def find_match(*, session: Session, ladder_id: str, match_id: str) -> Match | None:
    return session.scalar(
        select(Match).where(Match.ladder_id == ladder_id, Match.match_id == match_id)
    )


def list_matches(
    *,
    session: Session,
    ladder_id: str,
    player_id: str | None,
    before_seq: int | None,
    limit: int,
) -> list[Match]:
    """Matches newest first (by arrival), older than ``before_seq``, optionally of one player."""
    query = (
        select(Match).where(Match.ladder_id == ladder_id).order_by(Match.seq.desc()).limit(limit)
    )
    if player_id is not None:
        query = query.join(Participant, Participant.match_seq == Match.seq).where(
            Participant.ladder_id == ladder_id, Participant.player_id == player_id
        )
    if before_seq is not None:
        query = query.where(Match.seq < before_seq)
    return list(session.scalars(query))


class StoredMatch(NamedTuple):
    """What the idempotency check needs of a recorded match."""

    match_id: str
    body_hash: str
    result: str


_FIND_MATCHES_SQL = text(
    # One unique-index lookup per id (OFFSET 0 keeps it from being merged into a join).
    "SELECT r.match_id, r.body_hash, r.result "
    "FROM json_array_elements_text(CAST(:match_ids AS JSON)) AS q(match_id) "
    "CROSS JOIN LATERAL (SELECT match_id, body_hash, result FROM matches "
    "WHERE ladder_id = :ladder_id AND match_id = q.match_id OFFSET 0) AS r"
)


def find_matches(
    *, session: Session, ladder_id: str, match_ids: Sequence[str]
) -> dict[str, StoredMatch]:
    """The recorded matches among ``match_ids``, by id."""
    found: dict[str, StoredMatch] = {}
    for chunk in chunked(match_ids, session):
        if dialect_of(session) == "postgresql":
            rows = session.execute(
                _FIND_MATCHES_SQL, {"ladder_id": ladder_id, "match_ids": id_list(session, chunk)}
            )
        else:
            rows = session.execute(
                select(Match.match_id, Match.body_hash, Match.result).where(
                    Match.ladder_id == ladder_id, Match.match_id.in_(list(chunk))
                )
            )
        found.update((row[0], StoredMatch(*row)) for row in rows)
    return found


def statistics_of(
    *, session: Session, ladder_id: str, match_ids: Sequence[str], player_id: str
) -> dict[str, float]:
    """The player's own statistic (``player_scores``) in those of ``match_ids`` that give
    it, by match id."""
    found: dict[str, float] = {}
    for chunk in chunked(match_ids, session):
        rows = session.execute(
            select(Match.match_id, Match.request).where(
                Match.ladder_id == ladder_id, Match.match_id.in_(list(chunk))
            )
        )
        for match_id, request in rows:
            scores = request.get("player_scores")
            if scores is None:
                continue
            for team, row in zip(request["teams"], scores, strict=True):
                for player, score in zip(team, row, strict=True):
                    if player == player_id and score is not None:
                        found[match_id] = float(score)
    return found


def allocate_match_seqs(*, session: Session, count: int) -> list[int]:
    """``count`` new match seqs, increasing, in one round trip.

    Called with the players' rows locked, so a match's seq orders it after every match its
    players played before. PostgreSQL draws them from the column's sequence; on SQLite the
    transaction holds the database's write lock, so the next ones after the largest are free.
    """
    if count <= 0:
        return []
    if dialect_of(session) == "postgresql":
        rows = session.execute(
            text(
                "SELECT nextval(pg_get_serial_sequence('matches', 'seq')) "
                "FROM generate_series(1, :count)"
            ),
            {"count": count},
        )
        return sorted(int(row[0]) for row in rows)
    top = int(session.scalar(select(func.coalesce(func.max(Match.seq), 0))) or 0)
    return list(range(top + 1, top + 1 + count))


def add_history(*, session: Session, entry: RatingHistory) -> None:
    session.add(entry)
    session.flush()


class HistoryEntryRow(NamedTuple):
    """One of a player's rating changes, with the match_id of its match (None: an
    adjustment)."""

    id: int
    match_seq: int | None
    match_id: str | None
    played_at: datetime
    mu_before: float
    sigma_before: float | None
    mu_after: float
    sigma_after: float | None
    #: Glicko-2's volatility before and after; ``None`` for the other algorithms.
    volatility_before: float | None
    volatility_after: float | None
    reset: bool

    @property
    def kind(self) -> HistoryKind:
        return history_kind(self.match_seq, self.reset)


def history(
    *, session: Session, ladder_id: str, player_id: str, before_id: int | None, limit: int
) -> list[HistoryEntryRow]:
    """A player's rating changes, newest first, older than the entry ``before_id``: a range
    of ``ix_rating_history_player``, each change of a match joined to it for its match_id."""
    query = (
        select(
            RatingHistory.id,
            RatingHistory.match_seq,
            Match.match_id,
            RatingHistory.played_at,
            RatingHistory.mu_before,
            RatingHistory.sigma_before,
            RatingHistory.mu_after,
            RatingHistory.sigma_after,
            RatingHistory.volatility_before,
            RatingHistory.volatility_after,
            RatingHistory.reset,
        )
        .outerjoin(Match, Match.seq == RatingHistory.match_seq)
        .where(RatingHistory.ladder_id == ladder_id, RatingHistory.player_id == player_id)
        .order_by(RatingHistory.id.desc())
        .limit(limit)
    )
    if before_id is not None:
        query = query.where(RatingHistory.id < before_id)
    return [HistoryEntryRow._make(row) for row in session.execute(query)]


class TrajectoryRow(NamedTuple):
    """One of a player's rating changes as a point of their trajectory."""

    match_seq: int | None
    mu_before: float
    sigma_before: float | None
    mu_after: float
    sigma_after: float | None
    played_at: datetime


def trajectory(*, session: Session, ladder_id: str, player_id: str) -> list[TrajectoryRow]:
    """Every rating change of the player, oldest first: one range of
    ``ix_rating_history_player`` and six columns a row, no join (the console draws the
    whole of it, up to tens of thousands of points)."""
    query = (
        select(
            RatingHistory.match_seq,
            RatingHistory.mu_before,
            RatingHistory.sigma_before,
            RatingHistory.mu_after,
            RatingHistory.sigma_after,
            RatingHistory.played_at,
        )
        .where(RatingHistory.ladder_id == ladder_id, RatingHistory.player_id == player_id)
        .order_by(RatingHistory.id)
    )
    return [TrajectoryRow._make(row) for row in session.execute(query)]


#: What a history row records: a match, an adjustment (a seeded rating) or a season's
#: soft reset.
HistoryKind = Literal["match", "adjustment", "season_reset"]


def history_kind(match_seq: int | None, reset: bool) -> HistoryKind:
    """A history row of a match (its seq), a season's reset, or an adjustment (a seeded
    rating: neither)."""
    if match_seq is not None:
        return "match"
    return "season_reset" if reset else "adjustment"
