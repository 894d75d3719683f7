"""Every query the service makes. Functions take the session and keyword-only arguments,
flush when they must, and never commit: the request's transaction does."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import Any, Literal, NamedTuple, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    ColumnElement,
    DateTime,
    Float,
    Integer,
    Select,
    String,
    Table,
    Text,
    and_,
    any_,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
    text,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session
from sqlalchemy.sql.expression import Executable
from sqlalchemy.types import TypeEngine

from app.config import get_settings
from app.domain import jsontext
from app.domain.accuracy import FIELDS as TALLY_FIELDS
from app.errors import ServiceUnavailable
from app.storage import versions
from app.storage.blocks import BUCKET_LIMIT, bucket_sql
from app.storage.engine import (
    lift_reply_bound,
)
from app.storage.models import (
    LADDER_ACCURACY,
    Job,
    Ladder,
    Match,
    Participant,
    PlayerRating,
    RatingBlock,
    RatingBucket,
    RatingHistory,
)

# -- ladders --------------------------------------------------------------------------------


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
    if _dialect(session) == "postgresql" and not patient:
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


# -- ratings --------------------------------------------------------------------------------


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
    if _dialect(session) == "postgresql":
        # One statement with the ids as one array, ordered by the statement as the locks
        # are: far cheaper than the ORM's multi-row INSERTs for thousands of players.
        created = session.execute(
            _INSERT_PLAYERS_SQL,
            {
                "ladder_id": ladder_id,
                "player_ids": _ids(session, player_ids),
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
    for chunk in _chunks(list(player_ids), session):
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


def _dialect(session: Session) -> str:
    return session.get_bind().dialect.name


def _ids(session: Session, values: Sequence[str]) -> str | list[str]:
    """Ids for a statement: on PostgreSQL one JSON array (read back with
    ``json_array_elements_text``: psycopg escapes each string of a text array with a
    regular expression, which cost a group of matches a fifth of its CPU), on SQLite a
    list for an expanding ``IN``."""
    if _dialect(session) == "postgresql":
        return jsontext.compact(list(values))
    return list(values)


#: Values per ``IN (...)`` list on SQLite (far below its limit of 32,766 variables).
SQLITE_IN_CHUNK = 5000


def _chunks(values: Sequence[str], session: Session) -> list[Sequence[str]]:
    """PostgreSQL takes any number as one array; SQLite gets bounded ``IN`` lists."""
    if _dialect(session) == "postgresql" or len(values) <= SQLITE_IN_CHUNK:
        return [values]
    return [values[i : i + SQLITE_IN_CHUNK] for i in range(0, len(values), SQLITE_IN_CHUNK)]


def _player_in(session: Session, player_ids: Sequence[str]) -> ColumnElement[bool]:
    if _dialect(session) == "postgresql":
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


def lock_rating_states(
    *, session: Session, ladder_id: str, player_ids: Sequence[str]
) -> list[RatingState]:
    """Like :func:`lock_ratings` (one statement, player id order, row locks until the
    transaction ends), for any number of players, as plain rows instead of objects."""
    columns = (
        PlayerRating.player_id,
        PlayerRating.mu,
        PlayerRating.sigma,
        PlayerRating.matches,
        PlayerRating.last_played_at,
        PlayerRating.volatility,
    )
    ordered = sorted(set(player_ids))
    out: list[RatingState] = []
    # SQLite (no row locks: BEGIN IMMEDIATE holds the database) may need several IN lists.
    for chunk in _chunks(ordered, session):
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


#: From this many rows a PostgreSQL bulk update goes through COPY into a temporary table:
#: long texts (result documents) cost far less to send that way than as array literals.
COPY_UPDATE_ROWS = 1000

_temporary_tables = itertools.count(1)


def _update_through_copy(
    session: Session,
    table: Table,
    keys: Sequence[str],
    names: list[str],
    rows: Sequence[dict[str, Any]],
    where: dict[str, Any],
) -> None:
    """``bulk_update`` for many rows on PostgreSQL: COPY them into a temporary table (dropped
    at commit), then one ``UPDATE ... FROM`` it."""
    connection = session.connection()
    dialect = connection.dialect
    scratch = f"bulk_{table.name}_{next(_temporary_tables)}"
    columns = ", ".join(f"{name} {table.c[name].type.compile(dialect=dialect)}" for name in names)
    connection.execute(text(f"CREATE TEMPORARY TABLE {scratch} ({columns}) ON COMMIT DROP"))
    try:
        _copy_rows(
            connection.connection.cursor(),
            table,
            names,
            (tuple([row[name] for name in names]) for row in rows),
            target=scratch,
        )
    except dialect.loaded_dbapi.Error as exc:
        raise DBAPIError.instance(
            f"COPY {scratch}", None, exc, dialect.loaded_dbapi.Error, dialect=dialect
        ) from exc
    conditions = [f"t.{key} = v.{key}" for key in keys]
    conditions += [f"t.{column} = :w_{column}" for column in where]
    values = [name for name in names if name not in keys]
    connection.execute(
        text(
            f"UPDATE {table.name} AS t SET "
            + ", ".join(f"{name} = v.{name}" for name in values)
            + f" FROM {scratch} AS v WHERE "
            + " AND ".join(conditions)
        ),
        {f"w_{column}": value for column, value in where.items()},
    )


def bulk_update(
    *,
    session: Session,
    table: Table,
    keys: Sequence[str],
    rows: Sequence[dict[str, Any]],
    where: dict[str, Any] | None = None,
) -> None:
    """Update many rows, each found by its ``keys`` columns (and the fixed ``where``
    columns), setting its other columns. PostgreSQL: ONE statement joining the table with
    ``unnest`` of one array per column; a key that is unchanged needs no foreign key check.
    SQLite: one executemany of the driver."""
    if not rows:
        return
    names = list(rows[0])
    values = [name for name in names if name not in keys]
    where = where or {}
    connection = session.connection()
    dialect = connection.dialect
    if dialect.name == "postgresql" and len(rows) >= COPY_UPDATE_ROWS:
        _update_through_copy(session, table, keys, names, rows, where)
        return
    if dialect.name == "postgresql":
        # A JSON column's values go as their text (an array of JSON is an array of texts).
        json_names = {name for name in names if isinstance(table.c[name].type, JSON)}
        arrays = ", ".join(
            f"CAST(CAST(:a_{name} AS TEXT[]) AS JSON[])"
            if name in json_names
            else f"CAST(:a_{name} AS {table.c[name].type.compile(dialect=dialect)}[])"
            for name in names
        )
        conditions = [f"t.{key} = v.{key}" for key in keys]
        conditions += [f"t.{column} = :w_{column}" for column in where]
        statement = (
            f"UPDATE {table.name} AS t SET "
            + ", ".join(f"{name} = v.{name}" for name in values)
            + f" FROM unnest({arrays}) AS v({', '.join(names)}) WHERE "
            + " AND ".join(conditions)
        )
        parameters = {
            f"a_{name}": [json_text(row[name]) if name in json_names else row[name] for row in rows]
            for name in names
        }
        parameters.update({f"w_{column}": value for column, value in where.items()})
        connection.execute(text(statement), parameters)
        return
    fixed = tuple(where.values())
    order = values + list(keys)
    converters = [_converter(table.c[name].type, dialect) for name in order]
    sql = (
        f"UPDATE {table.name} SET "
        + ", ".join(f"{name} = ?" for name in values)
        + " WHERE "
        + " AND ".join(f"{column} = ?" for column in [*keys, *where])
    )
    converted = [
        tuple(
            row[name] if convert is None else convert(row[name])
            for name, convert in zip(order, converters, strict=True)
        )
        + fixed
        for row in rows
    ]
    connection.exec_driver_sql(sql, converted)


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


# The leaderboard and rank statements are built once, with bound parameters: building
# them per request cost more CPU time than running them.
_LADDER = bindparam("ladder_id", type_=String)
_KEY_RATING = bindparam("conservative", type_=Float)
_KEY_PLAYER = bindparam("player_id", type_=String)
_MIN_MATCHES = bindparam("min_matches", type_=Integer)


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
    )


@cache
def _leaderboard_statement(after: bool, qualified: bool) -> Executable:
    limit = bindparam("limit", type_=Integer)

    def page(*conditions: ColumnElement[bool]) -> Select[Any]:
        query = (
            select(*_rating_columns())
            .where(PlayerRating.ladder_id == _LADDER, *conditions)
            .order_by(PlayerRating.conservative.desc(), PlayerRating.player_id)
            .limit(limit)
        )
        return query.where(PlayerRating.matches >= _MIN_MATCHES) if qualified else query

    if not after:
        return page()
    # After the key: the rest of its tie, then the ratings below it. Two index range
    # scans that each start at their first row; one range with an OR would start at the
    # tie's first player and skip the tied players before the key one by one (a deep
    # page among 50,000 players who share a rating walked them all).
    tied = page(PlayerRating.conservative == _KEY_RATING, PlayerRating.player_id > _KEY_PLAYER)
    below = page(PlayerRating.conservative < _KEY_RATING)
    both = union_all(select(tied.subquery()), select(below.subquery())).subquery()
    return select(*both.c).order_by(both.c.conservative.desc(), both.c.player_id).limit(limit)


def leaderboard(
    *,
    session: Session,
    ladder_id: str,
    after: tuple[float, str] | None,
    limit: int,
    min_matches: int,
) -> list[RatingRow]:
    """One page of the leaderboard after the key ``after`` (an index range scan of
    ``ix_ratings_leaderboard``), as plain rows: a page is read, never changed, and loading
    ORM objects (identity map, change tracking) cost more than the query itself."""
    parameters: dict[str, Any] = {"ladder_id": ladder_id, "limit": limit}
    if min_matches > 0:
        parameters["min_matches"] = min_matches
    if after is not None:
        parameters["conservative"], parameters["player_id"] = after
    query = _leaderboard_statement(after is not None, min_matches > 0)
    return [RatingRow(*row) for row in session.execute(query, parameters)]


#: A tie of at least this many players is counted by blocks, a shorter one outright.
TIE_WALK = 256


def _pending(bucket: str, block: str = "") -> str:
    """SQL: this transaction's own changes still waiting in ``rating_bucket_deltas``."""
    return (
        " + (SELECT COALESCE(SUM(d.players), 0) FROM rating_bucket_deltas AS d"
        " WHERE d.txid = txid_current_if_assigned() AND d.ladder_id = k.ladder_id"
        f" AND d.bucket {bucket}{block})"
    )


def _count_ahead_sql(key: str, own_writes: bool = False, columns: str = "") -> str:
    """The rank statement of :func:`count_ahead` without ``min_matches``, for each row of
    ``key`` (SQL with the columns ladder_id, conservative, player_id, bucket, bucket_start
    and bucket_end, and any ``columns`` to return before the count)."""
    ratings = "SELECT count(*) FROM ratings AS r WHERE r.ladder_id = k.ladder_id AND "
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
    return (
        f"WITH key AS ({key}),"
        # How many players share the key's rating, counted up to TIE_WALK.
        " tie AS (SELECT key.*, (SELECT count(*) FROM (SELECT 1 FROM ratings AS r"
        " WHERE r.ladder_id = key.ladder_id AND r.conservative = key.conservative"
        f" LIMIT {TIE_WALK}) AS s) AS tie_size FROM key),"
        # The fence of the key's block, for a long tie ('' otherwise: no blocks).
        f" k AS (SELECT tie.*, CASE WHEN tie.tie_size < {TIE_WALK} THEN '' ELSE"
        " COALESCE((SELECT max(f.first_id) FROM rating_blocks AS f"
        " WHERE f.ladder_id = tie.ladder_id AND f.bucket = tie.bucket"
        " AND f.first_id <= tie.player_id), '') END AS fence FROM tie)"
        f" SELECT {columns}{above} + CASE WHEN k.tie_size < {TIE_WALK} THEN"
        # A short tie: the tied players with a smaller id, counted, and the bucket's
        # players above the key's rating: walked, or, when the key sits in the bucket's
        # lower half, the bucket's count less those walked below it and the tie.
        f" ({ratings}r.conservative = k.conservative AND r.player_id < k.player_id)"
        " + CASE WHEN k.conservative - k.bucket_start < k.bucket_end - k.conservative"
        f" THEN {in_bucket} - ({ratings}r.conservative >= k.bucket_start"
        " AND r.conservative < k.conservative) - k.tie_size"
        f" ELSE ({ratings}r.conservative > k.conservative AND r.conservative < k.bucket_end)"
        " END ELSE"
        # A long tie: the bucket's players above the key's rating from the key's block on,
        # the blocks before the key's less the bucket's untied players in them, and the
        # tie inside the key's block.
        f" ({ratings}r.conservative > k.conservative AND r.conservative < k.bucket_end"
        f" AND r.player_id >= k.fence) + {blocks_before}"
        f" - ({ratings}r.conservative >= k.bucket_start AND r.conservative < k.conservative"
        " AND r.player_id < k.fence)"
        f" + ({ratings}r.conservative = k.conservative AND r.player_id >= k.fence"
        " AND r.player_id < k.player_id) END"
        " FROM k"
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
def _count_ahead_statement(dialect: str, qualified: bool, own_writes: bool) -> Executable:
    if qualified:
        # The buckets count every player: those with enough matches are counted one by one.
        return (
            select(func.count())
            .select_from(PlayerRating)
            .where(
                PlayerRating.ladder_id == _LADDER,
                PlayerRating.matches >= _MIN_MATCHES,
                _ahead_of_key(),
            )
        )
    key = _bucketed(_KEY_FROM_PARAMETERS, dialect)
    sql = _count_ahead_sql(key, dialect == "postgresql" and own_writes)
    return text(sql).bindparams(_LADDER, _KEY_RATING, _KEY_PLAYER, bindparam("width", type_=Float))


def count_ahead(
    *,
    session: Session,
    ladder_id: str,
    bucket_width: float,
    conservative: float,
    player_id: str,
    min_matches: int,
    own_writes: bool = False,
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

    With ``min_matches`` the buckets do not apply (they count every player): the players
    ahead are counted one by one. ``own_writes``: this transaction changed ratings, and its
    rank must include them.
    """
    parameters: dict[str, Any] = {
        "ladder_id": ladder_id,
        "conservative": conservative,
        "player_id": player_id,
    }
    if min_matches > 0:
        parameters["min_matches"] = min_matches
    else:
        parameters["width"] = bucket_width
    query = _count_ahead_statement(_dialect(session), min_matches > 0, own_writes)
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
        " r.last_played_at, r.volatility, l.bucket_width AS width"
        f" FROM {asked} JOIN ratings AS r ON r.ladder_id = q.ladder_id"
        " AND r.player_id = q.player_id JOIN ladders AS l ON l.id = r.ladder_id",
        dialect,
    )


@cache
def _read_players_sql(dialect: str) -> str:
    sql = _count_ahead_sql(
        _players_key(dialect),
        columns="k.n, k.player_id, k.mu, k.sigma, k.conservative, k.matches,"
        " k.last_played_at, k.volatility, ",
    )
    # The driver's own parameter style: psycopg's pyformat, sqlite3's named.
    return re.sub(r":(\w+)", r"%(\1)s", sql) if dialect == "postgresql" else sql


def read_players(
    dbapi_connection: Any, dialect: str, pairs: Sequence[tuple[str, str]]
) -> list[tuple[RatingRow, int] | None]:
    """For each (ladder id, player id) of ``pairs``, in order: the player's rating and how
    many players rank ahead of it (None: no such player), on a DB-API connection in
    autocommit, no session. On PostgreSQL ONE statement (one snapshot, one round trip)
    answers them all: the rows and their buckets, then :func:`count_ahead`'s count for
    each; SQLite, in process, runs it once a pair."""
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
    found: list[tuple[RatingRow, int] | None] = [None] * len(pairs)
    for row in rows:
        rating = RatingRow(
            player_id=row[1],
            mu=row[2],
            sigma=row[3],
            conservative=row[4],
            matches=row[5],
            last_played_at=versions.moment(row[6]),
            volatility=row[7],
        )
        found[int(row[0]) - 1] = (rating, int(row[8]))
    return found


# -- matches and history --------------------------------------------------------------------


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
    for chunk in _chunks(match_ids, session):
        if _dialect(session) == "postgresql":
            rows = session.execute(
                _FIND_MATCHES_SQL, {"ladder_id": ladder_id, "match_ids": _ids(session, chunk)}
            )
        else:
            rows = session.execute(
                select(Match.match_id, Match.body_hash, Match.result).where(
                    Match.ladder_id == ladder_id, Match.match_id.in_(list(chunk))
                )
            )
        found.update((row[0], StoredMatch(*row)) for row in rows)
    return found


def allocate_match_seqs(*, session: Session, count: int) -> list[int]:
    """``count`` new match seqs, increasing, in one round trip.

    Called with the players' rows locked, so a match's seq orders it after every match its
    players played before. PostgreSQL draws them from the column's sequence; on SQLite the
    transaction holds the database's write lock, so the next ones after the largest are free.
    """
    if count <= 0:
        return []
    if _dialect(session) == "postgresql":
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


def insert_rows(*, session: Session, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Insert many rows (dicts with the same keys) in one go: :func:`insert_values`."""
    if not rows:
        return
    names = list(rows[0])
    insert_values(
        session=session,
        table=table,
        names=names,
        values=[tuple([row[name] for name in names]) for row in rows],
    )


def insert_values(
    *, session: Session, table: Table, names: Sequence[str], values: Iterable[Sequence[Any]]
) -> None:
    """Insert many rows, each a sequence of the values of the columns ``names`` (a JSON
    column's value as the Python value, encoded here), in one go: ``COPY ... FROM STDIN``
    on PostgreSQL, one executemany of the driver on SQLite (values converted by the
    columns' own SQLAlchemy types). ``values`` is read once, row by row: an iterator
    costs no list of its own (on SQLite the converted rows are the one list)."""
    connection = session.connection()
    dialect = connection.dialect
    if dialect.name == "postgresql":
        try:
            _copy_rows(connection.connection.cursor(), table, names, values)
        except dialect.loaded_dbapi.Error as exc:
            # COPY runs on the driver's cursor: wrap its errors as SQLAlchemy does every
            # statement's (a unique match_id raced -> IntegrityError, a lost connection ->
            # OperationalError), so the callers and the error handlers see the usual classes.
            raise DBAPIError.instance(
                f"COPY {table.name}", None, exc, dialect.loaded_dbapi.Error, dialect=dialect
            ) from exc
        return
    converters = [
        (n, convert)
        for n, name in enumerate(names)
        if (convert := _converter(table.c[name].type, dialect)) is not None
    ]
    rows: list[tuple[Any, ...]] = []
    for row in values:
        if converters:
            out = list(row)
            for n, convert in converters:
                out[n] = convert(out[n])
            row = out
        rows.append(tuple(row))
    if not rows:
        return
    placeholders = ", ".join("?" for _ in names)
    statement = f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({placeholders})"
    connection.exec_driver_sql(statement, rows)


def _converter(column_type: TypeEngine[Any], dialect: Dialect) -> Callable[[Any], Any] | None:
    """What the driver gets for a column's Python value: its type's bind processor (None:
    the value as it is). A time's text is made once per distinct time and offset: the rows
    of a batch share a few (its recorded_at, its matches' played_at), and formatting each
    one cost a batch of 50,000 player slots over half a second on SQLite."""
    convert = column_type.dialect_impl(dialect).bind_processor(dialect)
    if convert is None or not isinstance(column_type, DateTime):
        return convert
    made: dict[tuple[datetime, Any], Any] = {}

    def once(value: Any) -> Any:
        if value is None:
            return convert(value)
        key = (value, value.tzinfo)
        try:
            return made[key]
        except KeyError:
            made[key] = out = convert(value)
            return out

    return once


def _copy_type(column_type: TypeEngine[Any]) -> str:
    """The PostgreSQL type a column's values are sent as in a binary COPY.

    JSON goes as ``text``: its binary form is its text (unlike ``jsonb``), so the JSON text
    encoded here arrives unchanged, as the text format would store it."""
    if isinstance(column_type, JSON | String):
        return "text"
    if isinstance(column_type, DateTime):
        return "timestamptz" if column_type.timezone else "timestamp"
    if isinstance(column_type, Float):
        return "float8"
    if isinstance(column_type, BigInteger):
        return "int8"
    if isinstance(column_type, Integer):
        return "int4"
    raise TypeError(f"no COPY type for {column_type!r}")


def _copy_rows(
    cursor: Any,
    table: Table,
    names: Sequence[str],
    rows: Iterable[Sequence[Any]],
    target: str | None = None,
) -> None:
    """``COPY table (names) FROM STDIN (FORMAT BINARY)`` of ``rows`` (into ``target`` if
    given: a table with those columns). The driver formats the values in C: floats and
    times go as their exact binary values, nothing is parsed back from text."""
    types = [_copy_type(table.c[name].type) for name in names]
    encode = [n for n, name in enumerate(names) if isinstance(table.c[name].type, JSON)]
    columns = ", ".join(f'"{name}"' for name in names)
    try:
        with cursor.copy(
            f"COPY {target or table.name} ({columns}) FROM STDIN (FORMAT BINARY)"
        ) as copy:
            copy.set_types(types)
            write = copy.write_row
            if not encode:
                for row in rows:
                    write(row)
                return
            for row in rows:
                out = list(row)
                for n in encode:
                    # SQLAlchemy stores None in a JSON column as the JSON null.
                    out[n] = json_text(out[n])
                write(out)
    finally:
        cursor.close()


def json_text(value: Any) -> str:
    """A JSON column's value as text (``None`` is the JSON ``null``, as SQLAlchemy stores it)."""
    return jsontext.compact(value)


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

    @property
    def kind(self) -> Literal["match", "adjustment"]:
        return _kind(self.match_seq)


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


def trajectory(*, session: Session, ladder_id: str, player_id: str) -> list[TrajectoryRow]:
    """Every rating change of the player, oldest first: one range of
    ``ix_rating_history_player`` and five columns a row, no join (the console draws the
    whole of it, up to tens of thousands of points)."""
    query = (
        select(
            RatingHistory.match_seq,
            RatingHistory.mu_before,
            RatingHistory.sigma_before,
            RatingHistory.mu_after,
            RatingHistory.sigma_after,
        )
        .where(RatingHistory.ladder_id == ladder_id, RatingHistory.player_id == player_id)
        .order_by(RatingHistory.id)
    )
    return [TrajectoryRow._make(row) for row in session.execute(query)]


# -- re-rating (void, rebuild) ---------------------------------------------------------------


def lift_statement_timeout(*, session: Session) -> None:
    """No statement timeout for the rest of this transaction (PostgreSQL): re-rating a large
    ladder legitimately runs statements longer than a request's; the client's wait for each
    reply is then unbounded too (``engine.lift_reply_bound``)."""
    if _dialect(session) == "postgresql":
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

    @property
    def kind(self) -> Literal["match", "adjustment"]:
        return _kind(self.match_seq)


def _kind(match_seq: int | None) -> Literal["match", "adjustment"]:
    """A history row of a match (its seq), or an adjustment (a seeded rating: no match)."""
    return "adjustment" if match_seq is None else "match"


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
    )
    of_matches = select(*columns).where(
        RatingHistory.match_seq >= from_seq, RatingHistory.ladder_id == ladder_id
    )
    adjustments = select(*columns).where(
        RatingHistory.id >= from_id,
        RatingHistory.match_seq.is_(None),
        RatingHistory.ladder_id == ladder_id,
    )
    rows = [HistoryRow(*row) for row in session.execute(of_matches)]
    rows.extend(HistoryRow(*row) for row in session.execute(adjustments))
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
    for chunk in _chunks(sorted(player_ids), session):
        if _dialect(session) == "postgresql":
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
        select(
            PlayerRating.player_id,
            PlayerRating.mu,
            PlayerRating.sigma,
            PlayerRating.matches,
            PlayerRating.last_played_at,
        )
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
    if _dialect(session) == "sqlite":
        for table in (RatingBucket, RatingBlock):
            session.execute(delete(table).where(table.ladder_id == ladder_id, table.players == 0))


def delete_match_rows(
    *, session: Session, model: type[Participant] | type[RatingHistory], seqs: Sequence[int]
) -> None:
    """Delete the rows of ``model`` (participants or history) of the matches ``seqs``."""
    if not seqs:
        return
    column = model.match_seq
    if _dialect(session) == "postgresql":
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


# -- erasure and deleting a ladder ----------------------------------------------------------


def player_match_seqs(*, session: Session, ladder_id: str, player_id: str) -> list[int]:
    """The seqs of every stored match of the player, voided ones included, in order."""
    return list(
        session.scalars(
            select(Participant.match_seq)
            .where(Participant.ladder_id == ladder_id, Participant.player_id == player_id)
            .order_by(Participant.match_seq)
        )
    )


class MatchDocument(NamedTuple):
    """A stored match as erasure rewrites it."""

    seq: int
    request: dict[str, Any]
    result: str


def lock_match_documents(*, session: Session, seqs: Sequence[int]) -> list[MatchDocument]:
    """The stored request and result document of the matches ``seqs``, row-locked, by seq."""
    out: list[MatchDocument] = []
    for start in range(0, len(seqs), SQLITE_IN_CHUNK):
        query = (
            select(Match.seq, Match.request, Match.result)
            .where(Match.seq.in_(list(seqs[start : start + SQLITE_IN_CHUNK])))
            .order_by(Match.seq)
            .with_for_update()
        )
        out.extend(MatchDocument(*row) for row in session.execute(query))
    return out


def match_results(*, session: Session, seqs: Sequence[int]) -> dict[int, str]:
    """The result documents of the matches ``seqs``, by seq."""
    if not seqs:
        return {}
    rows = session.execute(select(Match.seq, Match.result).where(Match.seq.in_(list(seqs))))
    return {seq: result for seq, result in rows}


def rewrite_requests(*, session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Rewrite matches' stored ``request`` and ``body_hash`` (and ``result``, if the rows
    have it) by ``seq``: one executemany of UPDATEs by primary key."""
    if rows:
        session.execute(update(Match), list(rows))


def rename_participant(*, session: Session, ladder_id: str, old: str, new: str) -> int:
    """Name the player ``old`` ``new`` in every participants row of the ladder; the rows."""
    renamed = session.execute(
        update(Participant)
        .where(Participant.ladder_id == ladder_id, Participant.player_id == old)
        .values(player_id=new)
    )
    return int(getattr(renamed, "rowcount", 0) or 0)


class ChangeRow(NamedTuple):
    """Where a player's history row sits and what rating it left."""

    id: int
    match_seq: int | None
    mu_after: float
    sigma_after: float | None
    volatility_after: float | None


def player_changes(*, session: Session, ladder_id: str, player_id: str) -> list[ChangeRow]:
    """Every history row of the player, in id order."""
    query = (
        select(
            RatingHistory.id,
            RatingHistory.match_seq,
            RatingHistory.mu_after,
            RatingHistory.sigma_after,
            RatingHistory.volatility_after,
        )
        .where(RatingHistory.ladder_id == ladder_id, RatingHistory.player_id == player_id)
        .order_by(RatingHistory.id)
    )
    return [ChangeRow(*row) for row in session.execute(query)]


def delete_player_history(*, session: Session, ladder_id: str, player_id: str) -> int:
    """Remove every history row of the player; how many there were."""
    deleted = session.execute(
        delete(RatingHistory).where(
            RatingHistory.ladder_id == ladder_id, RatingHistory.player_id == player_id
        )
    )
    return int(getattr(deleted, "rowcount", 0) or 0)


class LadderRows(NamedTuple):
    """How many rows of each kind deleting a ladder removed."""

    players: int
    matches: int
    history: int


def delete_ladder_rows(*, session: Session, ladder_id: str) -> LadderRows:
    """Remove the ladder and every row of it, children first (the caller holds the ladder's
    row lock, so no writer adds one meanwhile). Its rating buckets and blocks go before its
    ratings: SQLite's triggers then have none left to count down, and PostgreSQL's pending
    bucket changes apply to no ladder at commit. Its jobs go too: one still queued finds
    no ladder and ends with nothing to write to."""

    def gone(statement: Executable) -> int:
        return int(getattr(session.execute(statement), "rowcount", 0) or 0)

    history = gone(delete(RatingHistory).where(RatingHistory.ladder_id == ladder_id))
    gone(delete(Participant).where(Participant.ladder_id == ladder_id))
    matches = gone(delete(Match).where(Match.ladder_id == ladder_id))
    gone(delete(RatingBucket).where(RatingBucket.ladder_id == ladder_id))
    gone(delete(RatingBlock).where(RatingBlock.ladder_id == ladder_id))
    gone(delete(LADDER_ACCURACY).where(LADDER_ACCURACY.c.ladder_id == ladder_id))
    players = gone(delete(PlayerRating).where(PlayerRating.ladder_id == ladder_id))
    gone(delete(Job).where(Job.ladder_id == ladder_id))
    gone(delete(Ladder).where(Ladder.id == ladder_id))
    return LadderRows(players=players, matches=matches, history=history)


# -- recording single matches (app.services.recording.record_group) ---------------------------


class KeyRow(NamedTuple):
    """The columns of an ``api_keys`` row that a request's check reads."""

    id: int
    scope: str
    prefix: str
    key_hash: str
    revoked_at: datetime | None
    last_used_at: datetime | None


class KeyAndLadder(NamedTuple):
    """The request's key row (None: unknown), its ladder's algorithm and parameters as
    stored (None: no such ladder), and the matches of that ladder recorded under the
    match_ids asked about."""

    key: KeyRow | None
    algorithm: str | None
    params: str | None
    recorded: dict[str, StoredMatch]


_KEY_COLUMNS: dict[str, TypeEngine[Any]] = {
    "id": Integer(),
    "scope": String(),
    "prefix": String(),
    "key_hash": String(),
    "revoked_at": DateTime(timezone=True),
    "last_used_at": DateTime(timezone=True),
    "algorithm": String(),
    "params": Text(),
    "recorded": Text(),
}
_KEY_AND_LADDER = (
    "SELECT k.id, k.scope, k.prefix, k.key_hash, k.revoked_at, k.last_used_at, "
    "l.algorithm, CAST(l.params AS TEXT) AS params, CAST(m.recorded AS TEXT) AS recorded "
    "FROM (SELECT 1 AS one) AS one "
    "LEFT JOIN api_keys AS k ON k.key_hash = :key_hash "
    "LEFT JOIN (SELECT algorithm, params FROM ladders WHERE id = :ladder_id{lock}) AS l ON 1 = 1 "
    "LEFT JOIN ({recorded}) AS m ON 1 = 1"
)
_KEY_AND_LADDER_SQL = {
    # One unique-index lookup per match_id asked about (a nested loop over the ids; OFFSET 0
    # keeps the lookup from being merged into a join): the plan does not hang on the
    # ladder's match count, which a growing ladder's statistics underestimate.
    "postgresql": text(
        _KEY_AND_LADDER.format(
            lock=" FOR SHARE",
            recorded="SELECT json_agg(json_build_array(r.match_id, r.body_hash, r.result)) "
            "AS recorded FROM json_array_elements_text(CAST(:match_ids AS JSON)) AS q(match_id) "
            "CROSS JOIN LATERAL (SELECT match_id, body_hash, result FROM matches "
            "WHERE ladder_id = :ladder_id AND match_id = q.match_id OFFSET 0) AS r",
        )
    ).columns(**_KEY_COLUMNS),
    "sqlite": text(
        _KEY_AND_LADDER.format(
            lock="",
            recorded="SELECT json_group_array(json_array(match_id, body_hash, result)) "
            "AS recorded FROM matches WHERE ladder_id = :ladder_id AND match_id IN :match_ids",
        )
    )
    .bindparams(bindparam("match_ids", expanding=True))
    .columns(**_KEY_COLUMNS),
}


def key_and_ladder(
    *, session: Session, key_hash: str, ladder_id: str | None, match_ids: Sequence[str] = ()
) -> KeyAndLadder:
    """The key with this hash, the ladder, and the ladder's matches recorded under
    ``match_ids``, in one statement. On PostgreSQL the ladder's row is share-locked: its
    parameters cannot change until the transaction ends."""
    row = session.execute(
        _KEY_AND_LADDER_SQL[_dialect(session)],
        {"key_hash": key_hash, "ladder_id": ladder_id, "match_ids": _ids(session, match_ids)},
    ).one()
    key = KeyRow(*row[:6]) if row[0] is not None else None
    recorded = {
        match_id: StoredMatch(match_id, digest, result)
        for match_id, digest, result in (json.loads(row[8]) if row[8] else [])
    }
    return KeyAndLadder(key=key, algorithm=row[6], params=row[7], recorded=recorded)


_STATE_COLUMNS: dict[str, TypeEngine[Any]] = {
    "player_id": String(),
    "mu": Float(),
    "sigma": Float(),
    "matches": Integer(),
    "last_played_at": DateTime(timezone=True),
    "volatility": Float(),
}


def _players_sql(lock: bool) -> dict[str, Executable]:
    """The statements that read players' ratings, with row locks (``lock``) or without."""
    return {
        # One index lookup per player, in the order given (a nested loop over the ids):
        # the plan does not hang on the ladder's row count, which the statistics of a
        # growing ladder underestimate (a scan of the whole ladder looks cheap then).
        "postgresql": text(
            "SELECT r.player_id, r.mu, r.sigma, r.matches, r.last_played_at, r.volatility "
            "FROM json_array_elements_text(CAST(:player_ids AS JSON)) AS p(player_id) "
            "CROSS JOIN LATERAL (SELECT player_id, mu, sigma, matches, last_played_at, "
            "volatility FROM ratings WHERE ladder_id = :ladder_id AND player_id = p.player_id"
            f"{' FOR UPDATE' if lock else ''}) AS r"
        ).columns(**_STATE_COLUMNS),
        # No row locks: a writing transaction's BEGIN IMMEDIATE holds the database.
        "sqlite": text(
            "SELECT player_id, mu, sigma, matches, last_played_at, volatility FROM ratings "
            "WHERE ladder_id = :ladder_id AND player_id IN :player_ids "
            "ORDER BY player_id"
        )
        .bindparams(bindparam("player_ids", expanding=True))
        .columns(**_STATE_COLUMNS),
    }


_LOCK_PLAYERS_SQL = _players_sql(lock=True)
_UNLOCKED_PLAYERS_SQL = _players_sql(lock=False)


def player_states(
    *, session: Session, ladder_id: str, player_ids: Sequence[str]
) -> list[RatingState]:
    """The ratings of ``player_ids`` (sorted), as :func:`lock_players` reads them but
    without a lock: what a batch is rated ahead from before its transaction."""
    statement = _UNLOCKED_PLAYERS_SQL[_dialect(session)]
    out: list[RatingState] = []
    for chunk in _chunks(list(player_ids), session):
        rows = session.execute(
            statement, {"ladder_id": ladder_id, "player_ids": _ids(session, chunk)}
        )
        out.extend(RatingState(*row) for row in rows)
    return out


def lock_players(
    *, session: Session, ladder_id: str, player_ids: Sequence[str]
) -> list[RatingState]:
    """The ratings of ``player_ids`` (sorted), locked one after the other in that order by
    one statement on PostgreSQL (one index lookup per player, whatever the ladder's size);
    on SQLite, whose transaction holds the database's write lock, read by bounded ``IN``
    lists."""
    statement = _LOCK_PLAYERS_SQL[_dialect(session)]
    out: list[RatingState] = []
    for chunk in _chunks(list(player_ids), session):
        rows = session.execute(
            statement, {"ladder_id": ladder_id, "player_ids": _ids(session, chunk)}
        )
        out.extend(RatingState(*row) for row in rows)
    return out


_INSERT_PLAYERS_SQL = text(
    "INSERT INTO ratings (ladder_id, player_id, mu, sigma, conservative, matches, "
    "last_played_at, updated_at, volatility) "
    "SELECT :ladder_id, p.player_id, :mu, :sigma, :conservative, 0, NULL, :now, :volatility "
    "FROM json_array_elements_text(CAST(:player_ids AS JSON)) AS p(player_id) "
    "ORDER BY p.player_id "
    "ON CONFLICT (ladder_id, player_id) DO NOTHING RETURNING player_id"
).bindparams(bindparam("now", type_=DateTime(timezone=True)))


#: The columns of the rows a recording writes (:func:`write_recorded`), in tuple order.
MATCH_COLUMNS = (
    "seq",
    "ladder_id",
    "match_id",
    "body_hash",
    "played_at",
    "recorded_at",
    "quality",
    "request",
    "result",
    "voided_at",
    "win_probabilities",
)
PARTICIPANT_COLUMNS = (
    "match_seq",
    "player_id",
    "ladder_id",
)
HISTORY_COLUMNS = (
    "ladder_id",
    "player_id",
    "match_seq",
    "played_at",
    "mu_before",
    "sigma_before",
    "mu_after",
    "sigma_after",
    "volatility_before",
    "volatility_after",
)


#: The columns of a history row the statement of :func:`write_recorded` reads, the last
#: ones of :data:`HISTORY_COLUMNS` (the player and ladder come from the participants row,
#: the match_id from the match's row).
_PLAYED_FROM = HISTORY_COLUMNS.index("played_at")
_PLAYED_HISTORY = HISTORY_COLUMNS[_PLAYED_FROM:]
#: Where a match row holds its match_id, and a history row its match's seq.
_MATCH_ID = MATCH_COLUMNS.index("match_id")
_HISTORY_SEQ = HISTORY_COLUMNS.index("match_seq")

#: Where a match row holds its result document (as the text before and after its seq),
#: and its teams' win probabilities.
_RESULT = MATCH_COLUMNS.index("result")
_WIN_PROBABILITIES = MATCH_COLUMNS.index("win_probabilities")

MATCHES = cast(Table, Match.__table__)
PARTICIPANTS = cast(Table, Participant.__table__)
HISTORY = cast(Table, RatingHistory.__table__)


_WRITE_MATCHES_SQL = text(
    """
WITH matches_written AS (
    INSERT INTO matches (seq, ladder_id, match_id, body_hash, played_at, recorded_at, quality,
                         request, result, voided_at, win_probabilities)
    SELECT v.seq, v.ladder_id, v.match_id, v.body_hash, v.played_at, v.recorded_at, v.quality,
           CAST(v.request AS JSON), v.result_head || v.seq || v.result_tail, NULL,
           CAST(v.win_probabilities AS JSON)
    -- nextval in the derived table's own list: once per row, in the rows' order (a
    -- volatile function keeps the table from being merged into the outer query).
    FROM (
        SELECT nextval(pg_get_serial_sequence('matches', 'seq')) AS seq, a.*
        FROM json_to_recordset(CAST(:matches AS JSON)) AS a(
            ladder_id VARCHAR, match_id VARCHAR, body_hash VARCHAR, played_at TIMESTAMPTZ,
            recorded_at TIMESTAMPTZ, quality FLOAT8, request TEXT, result_head TEXT,
            result_tail TEXT, win_probabilities TEXT)
    ) AS v
    RETURNING seq, ladder_id, match_id
), played AS (
    SELECT w.seq, v.* FROM json_to_recordset(CAST(:participants AS JSON)) AS v(
        player_id VARCHAR, ladder_id VARCHAR, match_id VARCHAR, played_at TIMESTAMPTZ,
        mu_before FLOAT8, sigma_before FLOAT8, mu_after FLOAT8, sigma_after FLOAT8,
        volatility_before FLOAT8, volatility_after FLOAT8)
    JOIN matches_written AS w ON w.ladder_id = v.ladder_id AND w.match_id = v.match_id
), participants_written AS (
    INSERT INTO participants (match_seq, player_id, ladder_id)
    SELECT seq, player_id, ladder_id FROM played
), history_written AS (
    INSERT INTO rating_history (ladder_id, player_id, match_seq, played_at,
                                mu_before, sigma_before, mu_after, sigma_after,
                                volatility_before, volatility_after)
    SELECT ladder_id, player_id, seq, played_at, mu_before, sigma_before, mu_after, sigma_after,
           volatility_before, volatility_after
    FROM played
), ratings_written AS (
    -- Each row found by its key, then updated by its physical id: one index lookup and
    -- one TID scan per player whatever the statistics say (a growing ladder's look small,
    -- and a hash join would scan every rating).
    UPDATE ratings AS t
    SET mu = v.mu, sigma = v.sigma, conservative = v.conservative, matches = v.matches,
        last_played_at = v.last_played_at, updated_at = v.updated_at, volatility = v.volatility
    FROM (
        SELECT v.*, r.row_id FROM json_to_recordset(CAST(:ratings AS JSON)) AS v(
            ladder_id VARCHAR, player_id VARCHAR, mu FLOAT8, sigma FLOAT8, conservative FLOAT8,
            matches INTEGER, last_played_at TIMESTAMPTZ, updated_at TIMESTAMPTZ,
            volatility FLOAT8)
        CROSS JOIN LATERAL (
            SELECT ctid AS row_id FROM ratings
            WHERE ladder_id = v.ladder_id AND player_id = v.player_id OFFSET 0
        ) AS r
    ) AS v
    WHERE t.ctid = v.row_id
), tallies_written AS (
    -- Each ladder's accuracy tally: added to one stripe, ladders in id order.
    INSERT INTO ladder_accuracy AS t (ladder_id, stripe, {tally_columns})
    SELECT v.ladder_id, :stripe, {tally_values}
    FROM json_to_recordset(CAST(:tallies AS JSON)) AS v(ladder_id VARCHAR, {tally_types})
    ORDER BY v.ladder_id
    ON CONFLICT (ladder_id, stripe) DO UPDATE SET {tally_sums}
), versions_written AS (
    -- The ladders' versions (app.storage.versions): one stripe each, ladders in id order.
    INSERT INTO ladder_versions AS t (ladder_id, stripe, version)
    SELECT v.ladder_id, :version_stripe, 1
    FROM json_array_elements_text(CAST(:ladders AS JSON)) AS v(ladder_id)
    ORDER BY v.ladder_id
    ON CONFLICT (ladder_id, stripe) DO UPDATE SET version = t.version + 1
)
SELECT seq, ladder_id, match_id FROM matches_written
""".format(
        tally_columns=", ".join(TALLY_FIELDS),
        tally_values=", ".join(f"v.{name}" for name in TALLY_FIELDS),
        tally_types=", ".join(f"{name} INT8" for name in TALLY_FIELDS),
        tally_sums=", ".join(f"{name} = t.{name} + excluded.{name}" for name in TALLY_FIELDS),
    )
).bindparams(bindparam("stripe", type_=Integer), bindparam("version_stripe", type_=Integer))


#: From this many matches PostgreSQL gets a recording's rows by COPY rather than in one
#: statement (a group of single matches stays below it).
COPY_MATCHES = 64


def _iso(value: datetime) -> str:
    return value.isoformat()


def _match_with_seq(row: Sequence[Any], seq: int) -> tuple[Any, ...]:
    head, tail = row[_RESULT]
    return (seq, *row[1:_RESULT], f"{head}{seq}{tail}", *row[_RESULT + 1 :])


def with_seqs(
    seqs: Sequence[int],
    matches: Sequence[Sequence[Any]],
    participants: Sequence[Sequence[Any]],
    history: Sequence[Sequence[Any]],
) -> tuple[Iterator[tuple[Any, ...]], Iterator[tuple[Any, ...]], Iterator[tuple[Any, ...]]]:
    """Rows of :func:`write_recorded` with their seqs in place of their slots, and each
    match's result document whole: made row by row as they are written, so a batch's rows
    are never held twice."""
    seq_matches = (_match_with_seq(row, seqs[row[0]]) for row in matches)
    seq_participants = ((seqs[row[0]], *row[1:]) for row in participants)
    seq_history = (
        (*row[:_HISTORY_SEQ], seqs[row[_HISTORY_SEQ]], *row[_HISTORY_SEQ + 1 :]) for row in history
    )
    return seq_matches, seq_participants, seq_history


def write_recorded(
    *,
    session: Session,
    matches: Sequence[Sequence[Any]],
    participants: Sequence[Sequence[Any]],
    history: Sequence[Sequence[Any]],
    ratings: Mapping[str, Sequence[dict[str, Any]]],
    tallies: Mapping[str, Sequence[int]] | None = None,
    stripe: int = 0,
) -> list[int]:
    """Store rated matches and return their seqs, drawn in the order of ``matches``: their
    rows of ``matches``, ``participants`` and ``rating_history`` (tuples of
    :data:`MATCH_COLUMNS`, :data:`PARTICIPANT_COLUMNS` and :data:`HISTORY_COLUMNS`, the
    match ids of a ladder distinct) where each seq is the match's place in ``matches``
    and each result document the text before and after its seq; the new ratings of
    each ladder (rows for :func:`update_ratings`, by ladder id); and what the matches'
    predictions scored, added to each ladder's accuracy tally in its ``stripe`` row
    (:func:`add_tallies`). The caller holds the
    players' row locks, so the seqs order matches sharing a player as they were applied.

    PostgreSQL: ONE statement, drawing the seqs (the rows as arrays and JSON, which
    PostgreSQL reads back exactly: a float's repr is the shortest text that parses to it);
    from :data:`COPY_MATCHES` matches (batches, imports) the seqs in one statement and the
    rows by binary ``COPY``, far cheaper for thousands of rows. A match_id recorded
    meanwhile by another transaction fails it whole with an ``IntegrityError``. SQLite: one
    executemany per table (the transaction holds the database's write lock, so the seqs
    after the largest are free)."""
    if not matches:
        return []
    if _dialect(session) != "postgresql" or len(matches) >= COPY_MATCHES:
        for ladder_id in ratings:
            versions.touch(session, ladder_id)
        seqs = allocate_match_seqs(session=session, count=len(matches))
        rows, members, histories = with_seqs(seqs, matches, participants, history)
        # The ratings first: a history row refers to its player's rating (SQLite inserts
        # a new player's here).
        for ladder_id, update in ratings.items():
            if _dialect(session) == "sqlite":
                upsert_ratings(session=session, ladder_id=ladder_id, rows=update)
            else:
                update_ratings(session=session, ladder_id=ladder_id, rows=update)
        insert_values(session=session, table=MATCHES, names=MATCH_COLUMNS, values=rows)
        insert_values(
            session=session, table=PARTICIPANTS, names=PARTICIPANT_COLUMNS, values=members
        )
        insert_values(session=session, table=HISTORY, names=HISTORY_COLUMNS, values=histories)
        add_tallies(session=session, stripe=stripe, tallies=tallies or {})
        return seqs
    # Every row as JSON, which PostgreSQL reads back exactly (a float's repr is the
    # shortest text that parses to it) and which costs far less to send than arrays of
    # strings. The JSON columns go as their text, cast by the statement: PostgreSQL's text
    # cannot hold every string JSON can (such as "\u0000"), but their escaped text can.
    parameters: dict[str, Any] = {
        "matches": jsontext.compact(
            [
                {
                    "ladder_id": row[1],
                    "match_id": row[2],
                    "body_hash": row[3],
                    "played_at": _iso(row[4]),
                    "recorded_at": _iso(row[5]),
                    "quality": row[6],
                    "request": json_text(row[7]),
                    "result_head": row[_RESULT][0],
                    "result_tail": row[_RESULT][1],
                    "win_probabilities": json_text(row[_WIN_PROBABILITIES]),
                }
                for row in matches
            ]
        )
    }
    # Each player of each match: its participants row and its history row as one document.
    played = []
    for p, h in zip(participants, history, strict=True):
        doc = dict(zip(PARTICIPANT_COLUMNS[1:], p[1:], strict=True))
        doc["match_id"] = matches[p[0]][_MATCH_ID]
        doc.update(zip(_PLAYED_HISTORY, h[_PLAYED_FROM:], strict=True))
        doc["played_at"] = _iso(doc["played_at"])
        played.append(doc)
    parameters["participants"] = jsontext.compact(played)
    parameters["ratings"] = jsontext.compact(
        [
            {
                "ladder_id": ladder_id,
                **row,
                "last_played_at": _iso(row["last_played_at"]),
                "updated_at": _iso(row["updated_at"]),
            }
            for ladder_id, rows in ratings.items()
            for row in rows
        ]
    )
    parameters["tallies"] = jsontext.compact(
        [
            {"ladder_id": ladder_id, **dict(zip(TALLY_FIELDS, values, strict=True))}
            for ladder_id, values in (tallies or {}).items()
        ]
    )
    parameters["stripe"] = stripe
    # The ladders' versions move in this statement (their last change but the commit's).
    parameters["ladders"] = jsontext.compact(sorted(ratings))
    parameters["version_stripe"] = versions.bumped(session, ratings)
    drawn = {
        (ladder_id, match_id): int(seq)
        for seq, ladder_id, match_id in session.execute(_WRITE_MATCHES_SQL, parameters)
    }
    return [drawn[row[1], row[2]] for row in matches]


# -- API keys -------------------------------------------------------------------------------

#: The PostgreSQL advisory lock that serialises first starts of several replicas.
_FIRST_KEY_LOCK = 0x72617469  # "rati"


def serialize_first_start(*, session: Session) -> None:
    """Make replicas starting together take turns until the transaction ends: on
    PostgreSQL a transaction-scoped advisory lock; SQLite's ``BEGIN IMMEDIATE`` already
    serialises them."""
    if _dialect(session) == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:lock)"), {"lock": _FIRST_KEY_LOCK})


def others_write_meanwhile(*, session: Session) -> bool:
    """Whether other transactions can commit while this one runs: PostgreSQL (row locks),
    not SQLite (a writing transaction holds the database from its first statement)."""
    return _dialect(session) == "postgresql"


# -- jobs (app.services.jobs) ---------------------------------------------------------------

#: The states of a job that has not ended.
UNFINISHED = ("queued", "running")


class JobRow(NamedTuple):
    id: str
    kind: str
    ladder_id: str
    request: dict[str, Any]
    state: str
    done: int
    total: int | None
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    owner: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime


def _job_columns() -> tuple[Any, ...]:
    return tuple(getattr(Job, name) for name in JobRow._fields)


def add_job(*, session: Session, row: Mapping[str, Any]) -> None:
    session.execute(insert(Job).values(**row))


def get_job(*, session: Session, job_id: str) -> JobRow | None:
    row = session.execute(select(*_job_columns()).where(Job.id == job_id)).first()
    return None if row is None else JobRow(*row)


def job_documents(
    *, session: Session, ladder_id: str
) -> list[tuple[str, dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]]:
    """Every job of the ladder: its id, request, result and problem."""
    query = select(Job.id, Job.request, Job.result, Job.error).where(Job.ladder_id == ladder_id)
    return [(str(a), b, c, d) for a, b, c, d in session.execute(query)]


def rewrite_job_documents(*, session: Session, rows: Sequence[Mapping[str, Any]]) -> None:
    """Write jobs' ``request``, ``result`` and ``error`` by ``id``."""
    if rows:
        session.execute(update(Job), [dict(row) for row in rows])


def unfinished_jobs(*, session: Session, ladder_id: str) -> list[JobRow]:
    """The ladder's jobs that have not ended (queued or running; stale ones too)."""
    query = select(*_job_columns()).where(Job.ladder_id == ladder_id, Job.state.in_(UNFINISHED))
    return [JobRow(*row) for row in session.execute(query)]


def every_unfinished_job(*, session: Session) -> list[JobRow]:
    """Every job that has not ended, of every ladder (the reaper's round)."""
    query = select(*_job_columns()).where(Job.state.in_(UNFINISHED))
    return [JobRow(*row) for row in session.execute(query)]


def backend_pid(*, session: Session) -> int | None:
    """The PostgreSQL server process of this session's connection (None on SQLite)."""
    if _dialect(session) != "postgresql":
        return None
    return int(session.scalar(text("SELECT pg_backend_pid()")) or 0) or None


def cancel_backend_statement(*, session: Session, pid: int) -> None:
    """Cancel what PostgreSQL's server process ``pid`` is running (its transaction then
    fails and rolls back): a cancelled job's statement."""
    session.execute(text("SELECT pg_cancel_backend(:pid)"), {"pid": pid})


def update_unfinished_job(
    *, session: Session, job_id: str, values: Mapping[str, Any], beat_before: datetime | None = None
) -> bool:
    """Write ``values`` into the job if it has not ended (and, with ``beat_before``, if its
    last heartbeat is older than that); whether it had not."""
    condition = [Job.id == job_id, Job.state.in_(UNFINISHED)]
    if beat_before is not None:
        condition.append(Job.heartbeat_at < beat_before)
    outcome = session.execute(update(Job).where(*condition).values(**values))
    return bool(getattr(outcome, "rowcount", 0))


# -- prediction accuracy (app.services.accuracy) -------------------------------------------

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
