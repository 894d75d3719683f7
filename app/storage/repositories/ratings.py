"""Ratings and ranks: players' rows, their locks, the leaderboard's pages, and a rank
counted by rating buckets and blocks."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any, Literal, NamedTuple, cast

from sqlalchemy import (
    ColumnElement,
    DateTime,
    Float,
    Integer,
    Select,
    String,
    Table,
    and_,
    any_,
    bindparam,
    func,
    or_,
    select,
    text,
    union_all,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import Executable

from app.storage import versions
from app.storage.blocks import BUCKET_LIMIT, bucket_range, bucket_sql
from app.storage.models import (
    PlayerRating,
    RatingBucket,
)
from app.storage.repositories.sql import bulk_update, chunked, dialect_of, id_list, insert_rows


def insert_missing_ratings(
    *,
    session: Session,
    ladder_id: str,
    player_ids: Sequence[str],
    mu: float,
    sigma: float | None,
    conservative: float,
    now: datetime,
    volatility: float | None = None,
) -> list[str]:
    """Create a rating at the prior for each player not yet in the ladder; returns the
    players created.

    ``INSERT ... ON CONFLICT DO NOTHING``: two requests creating the same new player both
    succeed (the second waits for the first on PostgreSQL, then does nothing). Rows go in
    player id order (on PostgreSQL the database's order), the same order the locks are
    taken in.
    """
    if not player_ids:
        return []
    if dialect_of(session) == "postgresql":
        # One statement with the ids as one array, ordered by the statement as the locks
        # are: far cheaper than the ORM's multi-row INSERTs for thousands of players.
        created = session.execute(
            _INSERT_PLAYERS_SQL,
            {
                "ladder_id": ladder_id,
                "player_ids": id_list(session, player_ids),
                "mu": mu,
                "sigma": sigma,
                "conservative": conservative,
                "now": now,
                "volatility": volatility,
            },
        )
        return list(created.scalars())
    # SQLite: the transaction holds the database's write lock, so what is missing now is
    # what this insert creates.
    known: set[str] = set()
    for chunk in chunked(list(player_ids), session):
        known.update(
            session.scalars(
                select(PlayerRating.player_id).where(
                    PlayerRating.ladder_id == ladder_id, PlayerRating.player_id.in_(list(chunk))
                )
            )
        )
    missing = sorted(set(player_ids) - known)
    rows = [
        {
            "ladder_id": ladder_id,
            "player_id": player_id,
            "mu": mu,
            "sigma": sigma,
            "conservative": conservative,
            "matches": 0,
            "last_played_at": None,
            "updated_at": now,
            "volatility": volatility,
        }
        for player_id in missing
    ]
    # One executemany of the driver (the ORM's bulk insert cost a batch of 50,000 new
    # players a second of Python).
    insert_rows(session=session, table=cast(Table, PlayerRating.__table__), rows=rows)
    return missing


def _player_in(session: Session, player_ids: Sequence[str]) -> ColumnElement[bool]:
    if dialect_of(session) == "postgresql":
        # One statement shape for any number of players: ``player_id = ANY(:ids)``.
        ids = bindparam("player_ids", value=list(player_ids), type_=ARRAY(String))
        return PlayerRating.player_id == any_(ids)
    return PlayerRating.player_id.in_(list(player_ids))


def lock_ratings(
    *, session: Session, ladder_id: str, player_ids: Sequence[str]
) -> dict[str, PlayerRating]:
    """The ratings of ``player_ids``, row-locked until the transaction ends.

    All rows are locked by ONE statement in player id order, so two matches sharing players
    always lock in the same order and cannot deadlock. (SQLite has no row locks; there the
    transaction's ``BEGIN IMMEDIATE`` already holds the database's write lock.)
    """
    query = (
        select(PlayerRating)
        .where(PlayerRating.ladder_id == ladder_id, _player_in(session, player_ids))
        .order_by(PlayerRating.player_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    return {row.player_id: row for row in session.scalars(query)}


class RatingState(NamedTuple):
    """The columns of a rating a match or a re-rating reads."""

    player_id: str
    mu: float
    sigma: float | None
    matches: int
    last_played_at: datetime | None
    #: Glicko-2's volatility; ``None`` for the other algorithms.
    volatility: float | None = None


def state_columns() -> tuple[Any, ...]:
    """The columns of :class:`RatingState`, in its order."""
    return (
        PlayerRating.player_id,
        PlayerRating.mu,
        PlayerRating.sigma,
        PlayerRating.matches,
        PlayerRating.last_played_at,
        PlayerRating.volatility,
    )


def lock_rating_states(
    *, session: Session, ladder_id: str, player_ids: Sequence[str]
) -> list[RatingState]:
    """Like :func:`lock_ratings` (one statement, player id order, row locks until the
    transaction ends), for any number of players, as plain rows instead of objects."""
    columns = state_columns()
    ordered = sorted(set(player_ids))
    out: list[RatingState] = []
    # SQLite (no row locks: BEGIN IMMEDIATE holds the database) may need several IN lists.
    for chunk in chunked(ordered, session):
        query = (
            select(*columns)
            .where(PlayerRating.ladder_id == ladder_id, _player_in(session, chunk))
            .order_by(PlayerRating.player_id)
            .with_for_update()
        )
        out.extend(RatingState(*row) for row in session.execute(query))
    return out


def update_ratings(*, session: Session, ladder_id: str, rows: Sequence[dict[str, Any]]) -> None:
    """Write new ratings keyed by player id. Each row has ``player_id``, ``mu``, ``sigma``,
    ``conservative``, ``matches``, ``last_played_at`` and ``updated_at``."""
    bulk_update(
        session=session,
        table=cast(Table, PlayerRating.__table__),
        keys=("player_id",),
        rows=rows,
        where={"ladder_id": ladder_id},
    )


_UPSERT_RATINGS_SQL = text(
    "INSERT INTO ratings (ladder_id, player_id, mu, sigma, conservative, matches, "
    "last_played_at, updated_at, volatility) VALUES (:ladder_id, :player_id, :mu, :sigma, "
    ":conservative, :matches, :last_played_at, :updated_at, :volatility) "
    "ON CONFLICT (ladder_id, player_id) DO UPDATE SET mu = excluded.mu, "
    "sigma = excluded.sigma, conservative = excluded.conservative, "
    "matches = excluded.matches, last_played_at = excluded.last_played_at, "
    "updated_at = excluded.updated_at, volatility = excluded.volatility"
).bindparams(
    bindparam("last_played_at", type_=DateTime(timezone=True)),
    bindparam("updated_at", type_=DateTime(timezone=True)),
)


def upsert_ratings(*, session: Session, ladder_id: str, rows: Sequence[dict[str, Any]]) -> None:
    """New ratings keyed by player id, inserted for players the ladder does not know yet
    (SQLite's recordings create no player before: its rank triggers count each row once),
    updated for the others; rows as for :func:`update_ratings`, with ``volatility``."""
    if rows:
        session.execute(_UPSERT_RATINGS_SQL, [{"ladder_id": ladder_id, **row} for row in rows])


class Standing(NamedTuple):
    """Where a rating stands on the leaderboard: what gives its tier."""

    conservative: float
    matches: int
    #: The counted matches before the current season (placement counts the others).
    season_base: int


def standings(
    *, session: Session, ladder_id: str, player_ids: Sequence[str] | None
) -> dict[str, Standing]:
    """The standings of those of ``player_ids`` the ladder knows (None: of every player)."""
    columns = (
        PlayerRating.player_id,
        PlayerRating.conservative,
        PlayerRating.matches,
        PlayerRating.season_base,
    )
    if player_ids is None:
        queries = [select(*columns).where(PlayerRating.ladder_id == ladder_id)]
    else:
        queries = [
            select(*columns).where(PlayerRating.ladder_id == ladder_id, _player_in(session, chunk))
            for chunk in chunked(player_ids, session)
            if chunk
        ]
    return {
        row[0]: Standing(float(row[1]), int(row[2]), int(row[3]))
        for query in queries
        for row in session.execute(query)
    }


def get_ratings(
    *, session: Session, ladder_id: str, player_ids: Sequence[str]
) -> dict[str, PlayerRating]:
    """The ratings of those of ``player_ids`` the ladder knows (no lock)."""
    query = select(PlayerRating).where(
        PlayerRating.ladder_id == ladder_id, _player_in(session, player_ids)
    )
    return {row.player_id: row for row in session.scalars(query)}


def read_rating(*, session: Session, ladder_id: str, player_id: str) -> RatingRow | None:
    """A player's rating as plain columns, for a read (see :func:`read_ladder`)."""
    row = session.execute(
        _read_rating_statement(), {"ladder_id": ladder_id, "player_id": player_id}
    ).first()
    return None if row is None else RatingRow(*row)


def lock_rating(*, session: Session, ladder_id: str, player_id: str) -> PlayerRating | None:
    return lock_ratings(session=session, ladder_id=ladder_id, player_ids=[player_id]).get(player_id)


class RatingRow(NamedTuple):
    """A rating's columns as a leaderboard entry or a player's page shows them."""

    player_id: str
    mu: float
    sigma: float | None
    conservative: float
    matches: int
    last_played_at: datetime | None
    volatility: float | None
    #: The counted matches before the current season (the season's: ``matches`` less it).
    season_base: int = 0


# The leaderboard and rank statements are built once, with bound parameters: building
# them per request cost more CPU time than running them.
_LADDER = bindparam("ladder_id", type_=String)


_KEY_RATING = bindparam("conservative", type_=Float)


_KEY_PLAYER = bindparam("player_id", type_=String)


_MIN_MATCHES = bindparam("min_matches", type_=Integer)


_PLACEMENT = bindparam("placement", type_=Integer)


def _qualified(min_matches: bool, placed: bool) -> list[ColumnElement[bool]]:
    """The players a qualified page or rank counts: ``min_matches`` matches in all, and
    (``placed``) the ladder's ``placement_matches`` in the current season."""
    conditions = []
    if min_matches:
        conditions.append(PlayerRating.matches >= _MIN_MATCHES)
    if placed:
        conditions.append(PlayerRating.matches - PlayerRating.season_base >= _PLACEMENT)
    return conditions


def _ahead_of_key() -> ColumnElement[bool]:
    """Leaderboard order: conservative rating descending, then player id ascending. The
    first condition bounds the index range; the second breaks ties."""
    return and_(
        PlayerRating.conservative >= _KEY_RATING,
        or_(
            PlayerRating.conservative > _KEY_RATING,
            and_(PlayerRating.conservative == _KEY_RATING, PlayerRating.player_id < _KEY_PLAYER),
        ),
    )


@cache
def _read_rating_statement() -> Executable:
    return select(*_rating_columns()).where(
        PlayerRating.ladder_id == _LADDER, PlayerRating.player_id == _KEY_PLAYER
    )


def _rating_columns() -> tuple[Any, ...]:
    """The columns of :class:`RatingRow`, in its order."""
    return (
        PlayerRating.player_id,
        PlayerRating.mu,
        PlayerRating.sigma,
        PlayerRating.conservative,
        PlayerRating.matches,
        PlayerRating.last_played_at,
        PlayerRating.volatility,
        PlayerRating.season_base,
    )


_FLOOR = bindparam("floor", type_=Float)
_CEILING = bindparam("ceiling", type_=Float)


@cache
def _leaderboard_statement(
    after: bool,
    min_matches: bool,
    placed: bool = False,
    backward: bool = False,
    bounded: bool = False,
) -> Executable:
    limit = bindparam("limit", type_=Integer)
    if backward:  # from the key up: the index scanned backward
        order: tuple[Any, ...] = (PlayerRating.conservative, PlayerRating.player_id.desc())
    else:
        order = (PlayerRating.conservative.desc(), PlayerRating.player_id)

    def page(*conditions: ColumnElement[bool]) -> Select[Any]:
        query = (
            select(*_rating_columns())
            .where(PlayerRating.ladder_id == _LADDER, *conditions)
            .order_by(*order)
            .limit(limit)
        )
        if bounded:  # one tier: floor <= conservative < ceiling
            query = query.where(
                PlayerRating.conservative >= _FLOOR, PlayerRating.conservative < _CEILING
            )
        return query.where(*_qualified(min_matches, placed))

    if not after:
        return page()
    # After the key: the rest of its tie, then the ratings below it (before it, backward:
    # the start of its tie, then the ratings above it). Two index range scans that each
    # start at their first row; one range with an OR would start at the tie's first
    # player and skip the tied players before the key one by one (a deep page among
    # 50,000 players who share a rating walked them all).
    if backward:
        tied = page(PlayerRating.conservative == _KEY_RATING, PlayerRating.player_id < _KEY_PLAYER)
        beyond = page(PlayerRating.conservative > _KEY_RATING)
    else:
        tied = page(PlayerRating.conservative == _KEY_RATING, PlayerRating.player_id > _KEY_PLAYER)
        beyond = page(PlayerRating.conservative < _KEY_RATING)
    both = union_all(select(tied.subquery()), select(beyond.subquery())).subquery()
    if backward:
        return select(*both.c).order_by(both.c.conservative, both.c.player_id.desc()).limit(limit)
    return select(*both.c).order_by(both.c.conservative.desc(), both.c.player_id).limit(limit)


def leaderboard(
    *,
    session: Session,
    ladder_id: str,
    after: tuple[float, str] | None,
    limit: int,
    min_matches: int,
    backward: bool = False,
    bounds: tuple[float, float] | None = None,
    placement: int = 0,
) -> list[RatingRow]:
    """One page of the leaderboard after the key ``after`` (an index range scan of
    ``ix_ratings_leaderboard``), as plain rows: a page is read, never changed, and loading
    ORM objects (identity map, change tracking) cost more than the query itself.
    ``backward``: the ``limit`` rows just before the key instead, nearest first;
    ``bounds``: only the conservative ratings in [floor, ceiling) (a tier); ``placement``:
    only the players with that many counted matches in the current season."""
    parameters: dict[str, Any] = {"ladder_id": ladder_id, "limit": limit}
    if bounds is not None:
        parameters["floor"], parameters["ceiling"] = bounds
    if min_matches > 0:
        parameters["min_matches"] = min_matches
    if placement > 0:
        parameters["placement"] = placement
    if after is not None:
        parameters["conservative"], parameters["player_id"] = after
    query = _leaderboard_statement(
        after is not None, min_matches > 0, placement > 0, backward, bounds is not None
    )
    return [RatingRow(*row) for row in session.execute(query, parameters)]


@cache
def _key_at_statement(placed: bool) -> Executable:
    """The leaderboard key ``:offset`` places into the bucket [start, end) (its placed
    players only, with ``placed``): an index range scan of at most the bucket."""
    query = (
        select(PlayerRating.conservative, PlayerRating.player_id)
        .where(
            PlayerRating.ladder_id == _LADDER,
            PlayerRating.conservative >= _FLOOR,
            PlayerRating.conservative < _CEILING,
        )
        .order_by(PlayerRating.conservative.desc(), PlayerRating.player_id)
        .limit(1)
        .offset(bindparam("offset", type_=Integer))
    )
    if placed:
        query = query.where(PlayerRating.matches - PlayerRating.season_base >= _PLACEMENT)
    return query


def bucket_counts(*, session: Session, ladder_id: str) -> list[tuple[int, int]]:
    """The ladder's rating buckets that hold players, highest first: (bucket, players)."""
    rows = session.execute(
        select(RatingBucket.bucket, func.sum(RatingBucket.players))
        .where(RatingBucket.ladder_id == ladder_id)
        .group_by(RatingBucket.bucket)
        .having(func.sum(RatingBucket.players) > 0)
        .order_by(RatingBucket.bucket.desc())
    )
    return [(int(bucket), int(players)) for bucket, players in rows]


def keys_at_ranks(
    *,
    session: Session,
    ladder_id: str,
    width: float,
    placement: int,
    counts: Sequence[tuple[int, int]],
    ranks: Sequence[int],
) -> list[tuple[float, str] | None]:
    """The leaderboard key (conservative, player id) of the player at each rank (1 first;
    None for a rank no player holds), the ranked players only (the placed ones, with
    ``placement``): the rating buckets' ``counts`` (:func:`bucket_counts`), summed from
    the top, give each rank's bucket, and one index range scan inside it the key."""
    keys: list[tuple[float, str] | None] = []
    for rank in ranks:
        seen = 0
        found = None
        for bucket, players in counts:
            if rank >= 1 and seen + players >= rank:
                bounds = bucket_range(bucket * width, width)
                parameters: dict[str, Any] = {
                    "ladder_id": ladder_id,
                    "floor": bounds["bucket_start"],
                    "ceiling": bounds["bucket_end"],
                    "offset": rank - seen - 1,
                }
                if placement > 0:
                    parameters["placement"] = placement
                row = session.execute(_key_at_statement(placement > 0), parameters).first()
                found = (float(row[0]), str(row[1])) if row is not None else None
                break
            seen += players
        keys.append(found)
    return keys


#: A tie of at least this many players is counted by blocks, a shorter one outright.
TIE_WALK = 256


def _pending(bucket: str, block: str = "") -> str:
    """SQL: this transaction's own changes still waiting in ``rating_bucket_deltas``."""
    return (
        " + (SELECT COALESCE(SUM(d.players), 0) FROM rating_bucket_deltas AS d"
        " WHERE d.txid = txid_current_if_assigned() AND d.ladder_id = k.ladder_id"
        f" AND d.bucket {bucket}{block})"
    )


#: How :func:`_count_ahead_sql` counts: every player (a ladder without placement), the
#: placed players only (with), or either by each key's ``placement`` column.
CountMode = Literal["every", "placed", "either"]


def _count_ahead_sql(
    key: str, own_writes: bool = False, columns: str = "", mode: CountMode = "every"
) -> str:
    """The rank statement of :func:`count_ahead` without ``min_matches``, for each row of
    ``key`` (SQL with the columns ladder_id, conservative, player_id, bucket, bucket_start
    and bucket_end, and any ``columns`` to return before the count). On a ladder with
    placement the buckets and blocks count the placed players only (the triggers of
    migration 0023), and so must the walks beside them: ``mode`` ``placed`` counts those
    (``key`` has a column ``placement``), ``either`` chooses by each key's ``placement``
    (the walks of placed players read each row, not only the index: they are kept to
    ladders that need them)."""

    def placed(alias: str, of: str) -> str:
        return f" AND {alias}.matches - {alias}.season_base >= {of}.placement"

    def tie_size(only_placed: bool) -> str:
        where = placed("r", "key") if only_placed else ""
        return (
            "(SELECT count(*) FROM (SELECT 1 FROM ratings AS r"
            " WHERE r.ladder_id = key.ladder_id AND r.conservative = key.conservative"
            f"{where} LIMIT {TIE_WALK}) AS s)"
        )

    def count(only_placed: bool) -> str:
        where = placed("r", "k") if only_placed else ""
        ratings = f"SELECT count(*) FROM ratings AS r WHERE r.ladder_id = k.ladder_id{where} AND "
        return (
            f"{above} + CASE WHEN k.tie_size < {TIE_WALK} THEN"
            # A short tie: the tied players with a smaller id, counted, and the bucket's
            # players above the key's rating: walked, or, when the key sits in the bucket's
            # lower half, the bucket's count less those walked below it and the tie.
            f" ({ratings}r.conservative = k.conservative AND r.player_id < k.player_id)"
            " + CASE WHEN k.conservative - k.bucket_start < k.bucket_end - k.conservative"
            f" THEN {in_bucket} - ({ratings}r.conservative >= k.bucket_start"
            " AND r.conservative < k.conservative) - k.tie_size"
            f" ELSE ({ratings}r.conservative > k.conservative AND r.conservative < k.bucket_end)"
            " END ELSE"
            # A long tie: the bucket's players above the key's rating from the key's block
            # on, the blocks before the key's less the bucket's untied players in them, and
            # the tie inside the key's block.
            f" ({ratings}r.conservative > k.conservative AND r.conservative < k.bucket_end"
            f" AND r.player_id >= k.fence) + {blocks_before}"
            f" - ({ratings}r.conservative >= k.bucket_start AND r.conservative < k.conservative"
            " AND r.player_id < k.fence)"
            f" + ({ratings}r.conservative = k.conservative AND r.player_id >= k.fence"
            " AND r.player_id < k.player_id) END"
        )

    blocks_before = (
        "(SELECT COALESCE(SUM(b.players), 0) FROM rating_blocks AS b"
        " WHERE b.ladder_id = k.ladder_id AND b.bucket = k.bucket AND b.first_id < k.fence)"
    )
    above = (
        "(SELECT COALESCE(SUM(u.players), 0) FROM rating_buckets AS u"
        " WHERE u.ladder_id = k.ladder_id AND u.bucket > k.bucket)"
    )
    in_bucket = (
        "(SELECT COALESCE(SUM(u.players), 0) FROM rating_buckets AS u"
        " WHERE u.ladder_id = k.ladder_id AND u.bucket = k.bucket)"
    )
    if own_writes:
        # A seeded player's rank is read in the transaction that seeds it. Reads leave the
        # deltas alone: the table is unlogged, which a streaming replica cannot read.
        above = f"({above}{_pending('> k.bucket')})"
        in_bucket = f"({in_bucket}{_pending('= k.bucket')})"
        blocks_before = f"({blocks_before}{_pending('= k.bucket', ' AND d.first_id < k.fence')})"
    if mode == "either":
        tie = f"CASE WHEN key.placement > 0 THEN {tie_size(True)} ELSE {tie_size(False)} END"
        ahead = f"CASE WHEN k.placement > 0 THEN {count(True)} ELSE {count(False)} END"
    else:
        tie, ahead = tie_size(mode == "placed"), count(mode == "placed")
    return (
        f"WITH key AS ({key}),"
        # How many players share the key's rating, counted up to TIE_WALK.
        f" tie AS (SELECT key.*, {tie} AS tie_size FROM key),"
        # The fence of the key's block, for a long tie ('' otherwise: no blocks).
        f" k AS (SELECT tie.*, CASE WHEN tie.tie_size < {TIE_WALK} THEN '' ELSE"
        " COALESCE((SELECT max(f.first_id) FROM rating_blocks AS f"
        " WHERE f.ladder_id = tie.ladder_id AND f.bucket = tie.bucket"
        " AND f.first_id <= tie.player_id), '') END AS fence FROM tie)"
        f" SELECT {columns}{ahead} FROM k"
    )


def _bucketed(source: str, dialect: str) -> str:
    """SQL: the rows of ``source`` (with ladder_id, player_id, conservative, and their
    ladder's bucket width as width) with each one's bucket and the bucket's bounds,
    ``bucket_start <= conservative < bucket_end``, computed as the triggers compute the
    bucket (the two outermost buckets are open-ended; every stored rating is finite)."""
    infinity = "CAST('Infinity' AS DOUBLE PRECISION)" if dialect == "postgresql" else "1e999"
    bucket = bucket_sql("s.conservative", "s.width", dialect)
    return (
        "SELECT b.*,"
        f" CASE WHEN b.bucket = -{BUCKET_LIMIT} THEN -{infinity}"
        " ELSE b.bucket * b.width END AS bucket_start,"
        f" CASE WHEN b.bucket = {BUCKET_LIMIT} THEN {infinity}"
        " ELSE (b.bucket + 1) * b.width END AS bucket_end"
        f" FROM (SELECT s.*, {bucket} AS bucket FROM ({source}) AS s) AS b"
    )


#: The key of :func:`count_ahead`, from its parameters.
_KEY_FROM_PARAMETERS = (
    "SELECT CAST(:ladder_id AS VARCHAR(64)) AS ladder_id,"
    " CAST(:player_id AS VARCHAR(128)) AS player_id,"
    " CAST(:conservative AS DOUBLE PRECISION) AS conservative,"
    " CAST(:width AS DOUBLE PRECISION) AS width"
)


@cache
def _count_ahead_statement(
    dialect: str, qualified: bool, own_writes: bool, placed: bool = False
) -> Executable:
    if qualified:
        # The buckets count every (placed) player: those with enough matches are counted
        # one by one.
        return (
            select(func.count())
            .select_from(PlayerRating)
            .where(
                PlayerRating.ladder_id == _LADDER,
                *_qualified(True, placed),
                _ahead_of_key(),
            )
        )
    source = _KEY_FROM_PARAMETERS
    if placed:
        source += ", CAST(:placement AS INTEGER) AS placement"
    key = _bucketed(source, dialect)
    sql = _count_ahead_sql(
        key, dialect == "postgresql" and own_writes, mode="placed" if placed else "every"
    )
    return text(sql).bindparams(
        _LADDER,
        _KEY_RATING,
        _KEY_PLAYER,
        bindparam("width", type_=Float),
        *([_PLACEMENT] if placed else []),
    )


def count_ahead(
    *,
    session: Session,
    ladder_id: str,
    bucket_width: float,
    conservative: float,
    player_id: str,
    min_matches: int,
    own_writes: bool = False,
    placement: int = 0,
) -> int:
    """How many players rank ahead of the key (conservative, player_id) on the leaderboard.

    ONE statement (one snapshot): the players of the buckets above the key's, from
    ``rating_buckets``, plus those ahead of it in its own bucket. A tie of fewer than
    :data:`TIE_WALK` players is counted outright, and the bucket's players above the key's
    rating by a range scan of ``ix_ratings_leaderboard`` on the shorter side of the key:
    above it, or below it (then the bucket's count less the scan and the tie), so at most
    about half a bucket. A longer tie is counted from ``rating_blocks``: the bucket's
    players in the blocks before the key's block, less those of them not tied (two ranges
    of the bucket without the tie), plus the tied players inside the key's block. Either
    way the cost is bounded by the bucket's untied players and one block, however many
    players share the rating.

    ``placement``: the ladder's placement matches; where above 0 the buckets and blocks
    count the players placed in the current season only, and so does the walk. With
    ``min_matches`` the buckets do not apply: the players ahead are counted one by one.
    ``own_writes``: this transaction changed ratings, and its rank must include them.
    """
    parameters: dict[str, Any] = {
        "ladder_id": ladder_id,
        "conservative": conservative,
        "player_id": player_id,
    }
    qualified = min_matches > 0
    if qualified:
        parameters["min_matches"] = min_matches
    else:
        parameters["width"] = bucket_width
    if placement > 0:
        parameters["placement"] = placement
    query = _count_ahead_statement(dialect_of(session), qualified, own_writes, placement > 0)
    return int(session.scalar(query, parameters) or 0)


def _players_key(dialect: str) -> str:
    """The keys of :func:`read_players`: the rows of the players asked for, bucketed
    (:func:`_bucketed`); ``n``: the request's place. PostgreSQL reads every (ladder,
    player) asked for from two arrays; SQLite one."""
    if dialect == "postgresql":
        asked = (
            "unnest(CAST(:ladder_ids AS TEXT[]), CAST(:player_ids AS TEXT[]))"
            " WITH ORDINALITY AS q(ladder_id, player_id, n)"
        )
    else:
        asked = "(SELECT :ladder_id AS ladder_id, :player_id AS player_id, 1 AS n) AS q"
    return _bucketed(
        "SELECT q.n, r.ladder_id, r.player_id, r.conservative, r.mu, r.sigma, r.matches,"
        " r.last_played_at, r.volatility, l.bucket_width AS width, l.season,"
        " CAST(l.tiers AS TEXT) AS tiers, r.season_base, l.placement_matches AS placement,"
        " l.algorithm, CAST(l.params AS TEXT) AS params, l.aged_at"
        f" FROM {asked} JOIN ratings AS r ON r.ladder_id = q.ladder_id"
        " AND r.player_id = q.player_id JOIN ladders AS l ON l.id = r.ladder_id",
        dialect,
    )


@cache
def _read_players_sql(dialect: str) -> str:
    sql = _count_ahead_sql(
        _players_key(dialect),
        columns="k.n, k.player_id, k.mu, k.sigma, k.conservative, k.matches,"
        " k.last_played_at, k.volatility, k.season, k.tiers, k.season_base, k.placement,"
        " k.algorithm, k.params, k.aged_at,"
        # The ranked players, for tiers by percentile.
        " CASE WHEN k.tiers LIKE '%min_percentile%' THEN (SELECT COALESCE(SUM(u.players), 0)"
        " FROM rating_buckets AS u WHERE u.ladder_id = k.ladder_id) ELSE 0 END, ",
        mode="either",
    )
    # The driver's own parameter style: psycopg's pyformat (a literal % doubled), sqlite3's
    # named.
    if dialect == "postgresql":
        return re.sub(r":(\w+)", r"%(\1)s", sql.replace("%", "%%"))
    return sql


class PlayerAnswer(NamedTuple):
    """What :func:`read_players` reads of one player."""

    rating: RatingRow
    #: How many players rank ahead (placed ones only, on a ladder with placement).
    ahead: int
    #: The ladder's current season, tiers and placement matches.
    season: str
    tiers: list[dict[str, Any]] | None
    placement: int
    #: The ladder's algorithm and parameters (JSON text), and the time its stored
    #: conservative ratings are aged to (None: not aged).
    algorithm: str = ""
    params: str = "{}"
    aged_at: datetime | None = None
    #: The ladder's ranked players (read for tiers by percentile only; else 0).
    ranked: int = 0


def read_players(
    dbapi_connection: Any, dialect: str, pairs: Sequence[tuple[str, str]]
) -> list[PlayerAnswer | None]:
    """For each (ladder id, player id) of ``pairs``, in order: the player's rating, how
    many players rank ahead of it, and the ladder's current season, tiers and placement
    (None: no such player),
    on a DB-API connection in autocommit, no session. On PostgreSQL ONE statement (one
    snapshot, one round trip) answers them all: the rows and their buckets, then
    :func:`count_ahead`'s count for each; SQLite, in process, runs it once a pair."""
    sql = _read_players_sql(dialect)
    cursor = dbapi_connection.cursor()
    try:
        if dialect == "postgresql":
            parameters = {
                "ladder_ids": [ladder_id for ladder_id, _ in pairs],
                "player_ids": [player_id for _, player_id in pairs],
            }
            cursor.execute(sql, parameters)
            rows = cursor.fetchall()
        else:
            rows = []
            for n, (ladder_id, player_id) in enumerate(pairs, start=1):
                cursor.execute(sql, {"ladder_id": ladder_id, "player_id": player_id})
                rows.extend((n, *row[1:]) for row in cursor.fetchall())
    finally:
        cursor.close()
    found: list[PlayerAnswer | None] = [None] * len(pairs)
    for row in rows:
        rating = RatingRow(
            player_id=row[1],
            mu=row[2],
            sigma=row[3],
            conservative=row[4],
            matches=row[5],
            last_played_at=versions.moment(row[6]),
            volatility=row[7],
            season_base=int(row[10]),
        )
        tiers = json.loads(row[9]) if row[9] is not None else None
        found[int(row[0]) - 1] = PlayerAnswer(
            rating,
            int(row[16]),
            str(row[8]),
            tiers,
            int(row[11]),
            str(row[12]),
            str(row[13]),
            versions.moment(row[14]),
            int(row[15]),
        )
    return found


_INSERT_PLAYERS_SQL = text(
    "INSERT INTO ratings (ladder_id, player_id, mu, sigma, conservative, matches, "
    "last_played_at, updated_at, volatility) "
    "SELECT :ladder_id, p.player_id, :mu, :sigma, :conservative, 0, NULL, :now, :volatility "
    "FROM json_array_elements_text(CAST(:player_ids AS JSON)) AS p(player_id) "
    "ORDER BY p.player_id "
    "ON CONFLICT (ladder_id, player_id) DO NOTHING RETURNING player_id"
).bindparams(bindparam("now", type_=DateTime(timezone=True)))


class ExportedRating(NamedTuple):
    """A player's stored rating as an export writes it."""

    player_id: str
    mu: float
    sigma: float | None
    conservative: float
    volatility: float | None
    matches: int
    last_played_at: datetime | None


def ratings_page(
    *, session: Session, ladder_id: str, after_player: str | None, limit: int
) -> list[ExportedRating]:
    """The ladder's first ``limit`` ratings by player id after ``after_player`` (None: from
    the first): a ladder's ratings read a page at a time along its primary key."""
    query = select(
        PlayerRating.player_id,
        PlayerRating.mu,
        PlayerRating.sigma,
        PlayerRating.conservative,
        PlayerRating.volatility,
        PlayerRating.matches,
        PlayerRating.last_played_at,
    ).where(PlayerRating.ladder_id == ladder_id)
    if after_player is not None:
        query = query.where(PlayerRating.player_id > after_player)
    rows = session.execute(query.order_by(PlayerRating.player_id).limit(limit))
    return [ExportedRating(*row) for row in rows]
