"""Seasons as stored: a ladder's seasons in order, where each begins, the archived
standings of the closed ones, and the soft reset's history rows."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple, cast

from sqlalchemy import String, Table, any_, bindparam, delete, func, select, text, update
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session

from app.storage.models import (
    Ladder,
    Match,
    Participant,
    PlayerRating,
    RatingHistory,
    ScheduledSeason,
    Season,
    SeasonOpening,
    SeasonStanding,
)
from app.storage.repositories.ratings import state_columns
from app.storage.repositories.recording import HISTORY_COLUMNS
from app.storage.repositories.sql import (
    bulk_update,
    bulk_update_values,
    chunked,
    dialect_of,
    insert_values,
)
from app.storage.versions import moment

STANDINGS = cast(Table, SeasonStanding.__table__)
HISTORY = cast(Table, RatingHistory.__table__)


class SeasonRow(NamedTuple):
    """A season as stored."""

    ordinal: int
    id: str
    keep: float
    started_at: datetime
    ended_at: datetime | None
    first_seq: int
    first_history_id: int


def seasons_of(*, session: Session, ladder_id: str) -> list[SeasonRow]:
    """The ladder's seasons, oldest first."""
    query = (
        select(
            Season.ordinal,
            Season.id,
            Season.keep,
            Season.started_at,
            Season.ended_at,
            Season.first_seq,
            Season.first_history_id,
        )
        .where(Season.ladder_id == ladder_id)
        .order_by(Season.ordinal)
    )
    return [SeasonRow(*row) for row in session.execute(query)]


class ScheduledRow(NamedTuple):
    """A season a ladder opens at a set time."""

    id: str
    keep: float
    starts_at: datetime


def scheduled(*, session: Session, ladder_id: str) -> ScheduledRow | None:
    row = session.execute(
        select(ScheduledSeason.id, ScheduledSeason.keep, ScheduledSeason.starts_at).where(
            ScheduledSeason.ladder_id == ladder_id
        )
    ).first()
    return None if row is None else ScheduledRow(*row)


def add_scheduled(*, session: Session, ladder_id: str, season: ScheduledRow, now: datetime) -> None:
    """Insert the ladder's scheduled season, in a savepoint: a concurrent one raises
    ``IntegrityError`` and leaves the transaction usable."""
    with session.begin_nested():
        session.execute(
            ScheduledSeason.__table__.insert().values(  # type: ignore[attr-defined]
                ladder_id=ladder_id, created_at=now, **season._asdict()
            )
        )


def cancel_scheduled(*, session: Session, ladder_id: str, season_id: str) -> bool:
    """Delete the ladder's scheduled season ``season_id``; whether there was one."""
    deleted = session.execute(
        delete(ScheduledSeason).where(
            ScheduledSeason.ladder_id == ladder_id, ScheduledSeason.id == season_id
        )
    )
    return bool(getattr(deleted, "rowcount", 0))


def due_ladders(*, session: Session, now: datetime, limit: int = 100) -> list[str]:
    """Ladders with a scheduled season due at ``now``, the earliest first."""
    query = (
        select(ScheduledSeason.ladder_id)
        .where(ScheduledSeason.starts_at <= now)
        .order_by(ScheduledSeason.starts_at)
        .limit(limit)
    )
    return list(session.scalars(query))


def take_due(*, session: Session, ladder_id: str, now: datetime) -> ScheduledRow | None:
    """The ladder's season due at ``now``, its row deleted by this transaction (None: none
    is due, or another transaction took it)."""
    row = session.execute(
        delete(ScheduledSeason)
        .where(ScheduledSeason.ladder_id == ladder_id, ScheduledSeason.starts_at <= now)
        .returning(ScheduledSeason.id, ScheduledSeason.keep, ScheduledSeason.starts_at)
    ).first()
    return None if row is None else ScheduledRow(*row)


def next_numbers(*, session: Session) -> tuple[int, int]:
    """A match seq and a history id that every match and history row written from now on
    exceeds or equals, and every one written before is below: drawn from the sequences
    on PostgreSQL (the caller holds the ladder alone, so no writer of it is in flight), the
    largest plus one on SQLite (whose writer holds the database)."""
    if dialect_of(session) == "postgresql":
        row = session.execute(
            text(
                "SELECT nextval(pg_get_serial_sequence('matches', 'seq')),"
                " nextval(pg_get_serial_sequence('rating_history', 'id'))"
            )
        ).one()
        return int(row[0]), int(row[1])
    seq = session.scalar(select(func.coalesce(func.max(Match.seq), 0))) or 0
    history_id = session.scalar(select(func.coalesce(func.max(RatingHistory.id), 0))) or 0
    return int(seq) + 1, int(history_id) + 1


def add_season(*, session: Session, ladder_id: str, season: SeasonRow) -> None:
    """Insert ``season`` and make it the ladder's current one."""
    session.execute(
        Season.__table__.insert().values(ladder_id=ladder_id, **season._asdict())  # type: ignore[attr-defined]
    )
    session.execute(update(Ladder).where(Ladder.id == ladder_id).values(season=season.id))


def close_season(*, session: Session, ladder_id: str, ordinal: int, ended_at: datetime) -> None:
    session.execute(
        update(Season)
        .where(Season.ladder_id == ladder_id, Season.ordinal == ordinal)
        .values(ended_at=ended_at)
    )


def match_counts(*, session: Session, ladder_id: str, first_seq: int, end_seq: int | None) -> int:
    """How many matches that count the ladder has with seq in [first_seq, end_seq)."""
    query = select(func.count()).where(
        Match.ladder_id == ladder_id, Match.seq >= first_seq, Match.voided_at.is_(None)
    )
    if end_seq is not None:
        query = query.where(Match.seq < end_seq)
    return int(session.scalar(query) or 0)


def count_standings(*, session: Session, ladder_id: str) -> dict[int, int]:
    """How many players each closed season's standings hold, by season ordinal."""
    query = (
        select(SeasonStanding.season, func.count())
        .where(SeasonStanding.ladder_id == ladder_id)
        .group_by(SeasonStanding.season)
    )
    return {int(season): int(count) for season, count in session.execute(query)}


def count_ratings(*, session: Session, ladder_id: str) -> int:
    query = select(func.count()).where(PlayerRating.ladder_id == ladder_id)
    return int(session.scalar(query) or 0)


def played_in(
    *,
    session: Session,
    ladder_id: str,
    first_seq: int,
    end_seq: int | None = None,
    player_ids: Sequence[str] | None = None,
) -> dict[str, tuple[int, datetime]]:
    """Each player's counted matches with seq in [first_seq, end_seq) and the latest
    played_at among them (players of ``player_ids`` only, when given)."""
    query = (
        select(Participant.player_id, func.count(), func.max(Match.played_at))
        .join(Match, Match.seq == Participant.match_seq)
        .where(
            Participant.ladder_id == ladder_id,
            Participant.match_seq >= first_seq,
            Match.voided_at.is_(None),
        )
        .group_by(Participant.player_id)
    )
    if end_seq is not None:
        query = query.where(Participant.match_seq < end_seq)
    if player_ids is None:
        return {player: (int(n), last) for player, n, last in session.execute(query)}
    out: dict[str, tuple[int, datetime]] = {}
    for part in chunked(player_ids, session):
        if dialect_of(session) == "postgresql":  # one statement shape, whatever the count
            ids = bindparam("player_ids", value=list(part), type_=ARRAY(String))
            chosen = query.where(Participant.player_id == any_(ids))
        else:
            chosen = query.where(Participant.player_id.in_(part))
        out.update({player: (int(n), last) for player, n, last in session.execute(chosen)})
    return out


#: The columns of an archived standing, in the order :func:`insert_standings` takes.
STANDING_COLUMNS = (
    "player_id",
    "rank",
    "mu",
    "sigma",
    "conservative",
    "volatility",
    "matches",
    "last_played_at",
)


def insert_standings(
    *, session: Session, ladder_id: str, season: int, rows: Sequence[Sequence[Any]]
) -> None:
    """Archive a season's standings: rows of the values of :data:`STANDING_COLUMNS`."""
    insert_values(
        session=session,
        table=STANDINGS,
        names=("ladder_id", "season", *STANDING_COLUMNS),
        values=((ladder_id, season, *row) for row in rows),
    )


def update_standings(
    *, session: Session, ladder_id: str, season: int, rows: Sequence[dict[str, Any]]
) -> None:
    """Rewrite archived standings, each row keyed by ``player_id``."""
    bulk_update(
        session=session,
        table=STANDINGS,
        keys=("player_id",),
        rows=rows,
        where={"ladder_id": ladder_id, "season": season},
    )


def delete_standings(
    *, session: Session, ladder_id: str, season: int, player_ids: Sequence[str]
) -> None:
    for part in chunked(player_ids, session):
        session.execute(
            delete(SeasonStanding).where(
                SeasonStanding.ladder_id == ladder_id,
                SeasonStanding.season == season,
                SeasonStanding.player_id.in_(part),
            )
        )


def standing_order(
    *, session: Session, ladder_id: str, season: int
) -> list[tuple[str, float, int]]:
    """A season's archived players with their conservative rating and stored rank."""
    query = select(
        SeasonStanding.player_id, SeasonStanding.conservative, SeasonStanding.rank
    ).where(SeasonStanding.ladder_id == ladder_id, SeasonStanding.season == season)
    return [(player, float(value), int(rank)) for player, value, rank in session.execute(query)]


def seasons_of_players(*, session: Session, ladder_id: str, player_ids: Sequence[str]) -> set[int]:
    """The seasons whose standings hold any of ``player_ids``."""
    out: set[int] = set()
    for part in chunked(player_ids, session):
        query = (
            select(SeasonStanding.season)
            .where(SeasonStanding.ladder_id == ladder_id, SeasonStanding.player_id.in_(part))
            .distinct()
        )
        out.update(int(season) for season in session.scalars(query))
    return out


class StandingRow(NamedTuple):
    rank: int
    player_id: str
    mu: float
    sigma: float | None
    conservative: float
    volatility: float | None
    matches: int
    last_played_at: datetime | None


def last_rank(*, session: Session, ladder_id: str, season: int) -> int:
    """How many players the season's archive ranks (its last rank: one probe of
    ``ix_season_standings_rank``)."""
    found = session.scalar(
        select(func.max(SeasonStanding.rank)).where(
            SeasonStanding.ladder_id == ladder_id, SeasonStanding.season == season
        )
    )
    return int(found or 0)


def standings_page(
    *, session: Session, ladder_id: str, season: int, after_rank: int, limit: int
) -> list[StandingRow]:
    """The archived standings ranked after ``after_rank``, best first: one range of
    ``ix_season_standings_rank``."""
    query = (
        select(
            SeasonStanding.rank,
            SeasonStanding.player_id,
            SeasonStanding.mu,
            SeasonStanding.sigma,
            SeasonStanding.conservative,
            SeasonStanding.volatility,
            SeasonStanding.matches,
            SeasonStanding.last_played_at,
        )
        .where(
            SeasonStanding.ladder_id == ladder_id,
            SeasonStanding.season == season,
            SeasonStanding.rank > after_rank,
        )
        .order_by(SeasonStanding.rank)
        .limit(limit)
    )
    return [StandingRow(*row) for row in session.execute(query)]


class Ratings(NamedTuple):
    """Ratings as columns (those of :class:`app.storage.repositories.ratings.RatingState`),
    a list each, in player id order."""

    player_id: list[str]
    mu: list[float]
    sigma: list[float | None]
    matches: list[int]
    last_played_at: list[datetime | None]
    volatility: list[float | None]

    def take(self, positions: Sequence[int]) -> Ratings:
        """The ratings at ``positions``."""
        return Ratings(
            [self.player_id[n] for n in positions],
            [self.mu[n] for n in positions],
            [self.sigma[n] for n in positions],
            [self.matches[n] for n in positions],
            [self.last_played_at[n] for n in positions],
            [self.volatility[n] for n in positions],
        )


def lock_step(*, session: Session, ladder_id: str, after_id: str, size: int) -> Ratings:
    """The next ``size`` ratings of the ladder by player id after ``after_id``, row-locked
    in id order (as recording locks its players), as columns."""
    query = (
        select(*state_columns())
        .where(PlayerRating.ladder_id == ladder_id, PlayerRating.player_id > after_id)
        .order_by(PlayerRating.player_id)
        .limit(size)
        .with_for_update()
    )
    rows = session.connection().execute(query).all()
    if not rows:
        return Ratings([], [], [], [], [], [])
    ids, mu, sigma, matches, played, volatility = (
        list(column) for column in zip(*rows, strict=True)
    )
    return Ratings(ids, mu, sigma, matches, [moment(value) for value in played], volatility)


#: The columns :func:`write_resets` writes to a reset rating.
_RESET_RATING = ("player_id", "mu", "sigma", "conservative", "season_base", "updated_at")
#: A history row's columns (a match's), and ``reset``.
_RESET_HISTORY = (*HISTORY_COLUMNS, "reset")


def write_resets(
    *,
    session: Session,
    ladder_id: str,
    before: Ratings,
    mu: Sequence[float],
    sigma: Sequence[float | None],
    conservative: Sequence[float],
    played_at: datetime,
    updated_at: datetime,
) -> None:
    """The soft reset of the ratings ``before`` (columns; sigma None on an Elo ladder):
    each rating set to ``mu``, ``sigma`` and ``conservative``, its season's counted
    matches starting from here (``season_base``), and its history row (``reset`` true, no
    match, played at ``played_at``) written."""
    bulk_update_values(
        session=session,
        table=cast(Table, PlayerRating.__table__),
        keys=("player_id",),
        names=_RESET_RATING,
        values=list(
            zip(
                before.player_id,
                mu,
                sigma,
                conservative,
                before.matches,
                [updated_at] * len(mu),
                strict=True,
            )
        ),
        where={"ladder_id": ladder_id},
    )
    insert_values(
        session=session,
        table=HISTORY,
        names=_RESET_HISTORY,
        values=(
            (ladder_id, player, None, played_at, *values, True)
            for player, *values in zip(
                before.player_id,
                before.mu,
                before.sigma,
                mu,
                sigma,
                before.volatility,
                before.volatility,
                strict=True,
            )
        ),
    )


class ResetRow(NamedTuple):
    id: int
    player_id: str


def leading_resets(
    *, session: Session, ladder_id: str, player_ids: Sequence[str], ignoring_seq: int
) -> list[ResetRow]:
    """The reset rows of ``player_ids`` that come before any match or seed of theirs (by
    history id), the match ``ignoring_seq`` aside: resets of a player who was not rated
    when the season opened, but for that match."""
    out: list[ResetRow] = []
    for part in chunked(player_ids, session):
        query = (
            select(
                RatingHistory.id,
                RatingHistory.player_id,
                RatingHistory.reset,
                RatingHistory.match_seq,
            )
            .where(RatingHistory.ladder_id == ladder_id, RatingHistory.player_id.in_(part))
            .order_by(RatingHistory.player_id, RatingHistory.id)
        )
        rated: set[str] = set()
        for row_id, player, reset, seq in session.execute(query):
            if seq is not None and seq == ignoring_seq:
                continue
            if not reset:
                rated.add(player)
            elif player not in rated:
                out.append(ResetRow(int(row_id), player))
    return out


def delete_history_rows(*, session: Session, ids: Sequence[int]) -> None:
    for start in range(0, len(ids), 5000):
        session.execute(
            delete(RatingHistory).where(RatingHistory.id.in_(ids[start : start + 5000]))
        )


def rerank(*, session: Session, ladder_id: str, season: int) -> None:
    """A season's archived ranks, counted again (after its ratings changed or a player
    left it): the rows whose rank moved are rewritten."""
    order = standing_order(session=session, ladder_id=ladder_id, season=season)
    order.sort(key=lambda row: (-row[1], row[0]))
    moved = [
        {"player_id": player, "rank": rank}
        for rank, (player, _, stored) in enumerate(order, start=1)
        if stored != rank
    ]
    update_standings(session=session, ladder_id=ladder_id, season=season, rows=moved)


# -- the opening under way (app.services.seasons: open in steps) ----------------------------


class OpeningRow(NamedTuple):
    """A ladder's season opening under way."""

    season: int
    #: The season's first history id (``ladders.opening_from``).
    first_history_id: int
    after_id: str
    ranked: int | None
    owner: str
    lease_until: datetime


def opening_of(*, session: Session, ladder_id: str, lock: bool = True) -> OpeningRow | None:
    """The ladder's opening under way, row-locked unless not ``lock`` (None: none)."""
    query = (
        select(
            SeasonOpening.season,
            Ladder.opening_from,
            SeasonOpening.after_id,
            SeasonOpening.ranked,
            SeasonOpening.owner,
            SeasonOpening.lease_until,
        )
        .join(Ladder, Ladder.id == SeasonOpening.ladder_id)
        .where(SeasonOpening.ladder_id == ladder_id)
    )
    row = session.execute(query.with_for_update(of=SeasonOpening) if lock else query).first()
    if row is None:
        return None
    season, first, after_id, ranked, owner, lease_until = row
    return OpeningRow(
        int(season),
        int(first or 0),  # set while the opening's row exists
        after_id,
        None if ranked is None else int(ranked),
        owner,
        moment(lease_until),  # type: ignore[arg-type]
    )


def start_opening(
    *,
    session: Session,
    ladder_id: str,
    season: int,
    first_history_id: int,
    owner: str,
    lease_until: datetime,
) -> None:
    """The opening of ``season`` under way (its row), and the ladder's ``opening_from``."""
    session.execute(
        update(Ladder).where(Ladder.id == ladder_id).values(opening_from=first_history_id)
    )
    session.execute(
        SeasonOpening.__table__.insert().values(  # type: ignore[attr-defined]
            ladder_id=ladder_id,
            season=season,
            after_id="",
            ranked=None,
            owner=owner,
            lease_until=lease_until,
        )
    )


def move_opening(*, session: Session, ladder_id: str, **values: Any) -> None:
    """Move the opening on: any of ``after_id``, ``ranked``, ``owner`` and ``lease_until``."""
    session.execute(
        update(SeasonOpening).where(SeasonOpening.ladder_id == ladder_id).values(**values)
    )


def end_opening(*, session: Session, ladder_id: str) -> None:
    session.execute(delete(SeasonOpening).where(SeasonOpening.ladder_id == ladder_id))
    session.execute(update(Ladder).where(Ladder.id == ladder_id).values(opening_from=None))


def stalled_openings(*, session: Session, now: datetime) -> list[str]:
    """The ladders whose opening's lease ran out before ``now`` (its worker stopped)."""
    query = (
        select(SeasonOpening.ladder_id)
        .where(SeasonOpening.lease_until < now)
        .order_by(SeasonOpening.ladder_id)
    )
    return list(session.scalars(query))


def not_reset(
    *, session: Session, ladder_id: str, player_ids: Sequence[str], first_history_id: int
) -> set[str]:
    """Those of ``player_ids`` (rated) with no history row from ``first_history_id`` on:
    the players an opening season has not reset yet. One probe of
    ``ix_rating_history_player`` each."""
    if dialect_of(session) == "postgresql":
        # One statement shape for any number of players, and one probe per player (the
        # LIMIT keeps the planner from an anti join that reads every history row of the
        # ladder since the season opened, a step's reads growing with each step).
        rows = session.execute(
            text(
                "SELECT p.player_id FROM unnest(CAST(:ids AS TEXT[])) AS p(player_id) "
                "LEFT JOIN LATERAL (SELECT 1 AS found FROM rating_history AS h "
                "WHERE h.ladder_id = :ladder_id AND h.player_id = p.player_id "
                "AND h.id >= :first LIMIT 1) AS later ON true WHERE later.found IS NULL"
            ),
            {"ids": list(player_ids), "ladder_id": ladder_id, "first": first_history_id},
        )
        return {row[0] for row in rows}
    later = (
        select(RatingHistory.id)
        .where(
            RatingHistory.ladder_id == ladder_id,
            RatingHistory.player_id == PlayerRating.player_id,
            RatingHistory.id >= first_history_id,
        )
        .exists()
    )
    out: set[str] = set()
    for part in chunked(player_ids, session):
        query = select(PlayerRating.player_id).where(
            PlayerRating.ladder_id == ladder_id, PlayerRating.player_id.in_(part), ~later
        )
        out.update(session.scalars(query))
    return out


def resets_since(
    *, session: Session, ladder_id: str, first_history_id: int
) -> list[tuple[str, float, float | None, float | None]]:
    """The ladder's reset rows from ``first_history_id`` on (one range of the history's
    primary key: the rows written since the season opened): each player's id and rating
    before its reset (mu, sigma, volatility)."""
    query = select(
        RatingHistory.player_id,
        RatingHistory.mu_before,
        RatingHistory.sigma_before,
        RatingHistory.volatility_before,
    ).where(
        RatingHistory.id >= first_history_id,
        RatingHistory.ladder_id == ladder_id,
        RatingHistory.reset.is_(True),
    )
    return [tuple(row) for row in session.connection().execute(query)]  # type: ignore[misc]
