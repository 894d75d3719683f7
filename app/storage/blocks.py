"""Cutting the rating blocks that grew large (``rating_blocks``, migration 0016).

A rank inside a long tie counts the tied players of one block one by one
(:func:`app.storage.repositories.ratings.count_ahead`), so a block must stay small. The triggers
count players into the blocks that exist; this module moves the fences: a block with a
stripe row above :data:`FULL_ROW` players is cut into pieces of about half that many
players a stripe, by player id, and each piece is counted again from ``ratings``.

Fences must not move under a transaction that found its blocks by them: on PostgreSQL the
cut takes the ladder's advisory lock exclusively (the triggers hold it shared until their
transaction ends), so it waits for the ladder's open writers and holds off new ones while
it runs, one bucket's range of the leaderboard index for each block it cuts. SQLite has one
writer at a time.

The service cuts by itself: :func:`due` picks one changing commit in :data:`CHECK_EVERY` of
each ladder, and :func:`cut_full` then cuts at most :data:`CUTS_AT_ONCE` blocks, for about
:data:`CUT_SECONDS` at most. A write that changed many ratings at once (a batch or an
import, a void, a rebuild, a season's reset, an inactivity step: :func:`filled`) may fill
many blocks in one commit, which one commit in :data:`CHECK_EVERY` would not see: after
it, the service cuts until no block is full, in rounds of the same size, each its own
transaction (writers go on between them). After ratings are loaded straight into the
database, ``ratings ladders blocks`` cuts them all.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

from sqlalchemy import Executable, bindparam, delete, func, insert, select, text, update
from sqlalchemy.orm import Session
from sqlalchemy.types import Float, Integer, String

from app.storage.models import Ladder, RatingBlock

#: A stripe row above this many players marks its block as full (the partial index
#: ``ix_rating_blocks_full`` of migration 0016 holds exactly these rows).
FULL_ROW = 128
#: The advisory lock class of a ladder's fences (migration 0016).
RANK_LOCK = 0x52414E4B
#: Stripes of a block: PostgreSQL spreads concurrent writers over eight rows.
STRIPES = {"postgresql": 8, "sqlite": 1}
#: One changing commit in this many of a ladder, per process, looks for full blocks.
CHECK_EVERY = 32
#: Blocks cut after one commit at most: the ladder's writers wait while they are cut.
CUTS_AT_ONCE = 16
#: ... and no more once the cuts have taken this long (a block that grew large, as a
#: season's reset makes them in the middle buckets, takes a while to cut): the rest wait
#: for a later commit.
CUT_SECONDS = 0.1

#: Buckets are clamped to +-2**53 (migration 0004): the outermost two are open-ended.
BUCKET_LIMIT = 2**53


def rating_bucket(conservative: float, width: float) -> int:
    """The bucket of a conservative rating: ``floor(conservative / width)`` clamped to
    +-``BUCKET_LIMIT``, computed exactly as the triggers of migration 0004 compute it."""
    if conservative >= width:
        return math.floor(min(conservative, BUCKET_LIMIT * width) / width)
    if conservative >= 0:
        return 0
    if conservative >= -width:
        return -1
    return math.floor(max(conservative, -BUCKET_LIMIT * width) / width)


def bucket_sql(value: str, width: str, dialect: str) -> str:
    """SQL for ``floor(value / width)`` clamped to +-``BUCKET_LIMIT``, never dividing a value below
    the width (PostgreSQL raises on a quotient that underflows or overflows)."""
    low, high = ("GREATEST", "LEAST") if dialect == "postgresql" else ("max", "min")
    if dialect == "postgresql":
        above = f"floor({high}({value}, {BUCKET_LIMIT}.0 * {width}) / {width})"
        below = f"floor({low}({value}, -{BUCKET_LIMIT}.0 * {width}) / {width})"
        cast = "bigint"
    else:
        # SQLite may lack floor(): truncate, then step down where that rounded up.
        q_above = f"({high}({value}, {BUCKET_LIMIT}.0 * {width}) / {width})"
        q_below = f"({low}({value}, -{BUCKET_LIMIT}.0 * {width}) / {width})"
        above = f"CAST({q_above} AS INTEGER)"
        below = f"(CAST({q_below} AS INTEGER) - ({q_below} < CAST({q_below} AS INTEGER)))"
        cast = "INTEGER"
    return (
        f"CAST(CASE WHEN {value} >= {width} THEN {above} WHEN {value} >= 0 THEN 0 "
        f"WHEN {value} >= -{width} THEN -1 ELSE {below} END AS {cast})"
    )


def bucket_range(conservative: float, width: float) -> dict[str, Any]:
    """The bucket of a rating and its bounds, ``bucket_start <= c < bucket_end`` (the two
    outermost buckets are open-ended; every stored rating is finite)."""
    bucket = rating_bucket(conservative, width)
    return {
        "bucket": bucket,
        "bucket_start": bucket * width if bucket > -BUCKET_LIMIT else -math.inf,
        "bucket_end": (bucket + 1) * width if bucket < BUCKET_LIMIT else math.inf,
    }


_commits: Counter[str] = Counter()
_commits_lock = threading.Lock()


_FILLED = "blocks.filled"


def filled(session: Session) -> None:
    """Say that the transaction of ``session`` may fill many blocks at once (it writes
    many ratings): after it commits, its ladders' full blocks are all cut."""
    session.info[_FILLED] = True


def was_filled(session: Session) -> bool:
    """Whether :func:`filled` was said of the transaction of ``session``."""
    return bool(session.info.get(_FILLED))


#: Rounds of :func:`cut_full` after a write that :func:`filled` blocks, at most (each cuts
#: up to :data:`CUTS_AT_ONCE`; the rest wait for later commits).
FILLED_ROUNDS = 256


def due(ladder_id: str) -> bool:
    """Whether this changing commit of ``ladder_id`` should look for full blocks: the
    first of the process, then one in :data:`CHECK_EVERY`."""
    with _commits_lock:
        seen = _commits[ladder_id]
        _commits[ladder_id] = seen + 1
    return seen % CHECK_EVERY == 0


def _stripe_sql(dialect: str) -> str:
    """The stripe of ``r.player_id``, as the triggers compute it."""
    return (
        f"(hashtext(r.player_id) & {STRIPES['postgresql'] - 1})" if dialect == "postgresql" else "0"
    )


#: SQL: whether the rating ``r`` is counted in its ladder's buckets and blocks (a ladder
#: with placement counts its placed players only: migration 0023).
COUNTED = (
    "r.matches - r.season_base >= (SELECT l.placement_matches FROM ladders AS l"
    " WHERE l.id = r.ladder_id)"
)


@cache
def _pieces_statement(dialect: str, bounded: bool, placed: bool) -> Executable:
    """The players of one block (a bucket's range of the leaderboard index, from the
    block's fence to the next) numbered by id: the counts of its pieces of ``:piece``
    players, per stripe, each piece named by its first id (the first keeps the fence).
    ``placed``: the ladder has placement, and its blocks count the placed players only."""
    below_next = " AND r.player_id < :next_id" if bounded else ""
    if placed:
        below_next += f" AND {COUNTED}"
    return text(
        "WITH block AS ("
        f" SELECT r.player_id, {_stripe_sql(dialect)} AS stripe,"
        " (row_number() OVER (ORDER BY r.player_id) - 1) / :piece AS piece"
        " FROM ratings AS r WHERE r.ladder_id = :ladder_id"
        " AND r.conservative >= :bucket_start AND r.conservative < :bucket_end"
        f" AND r.player_id >= :first_id{below_next})"
        " SELECT CASE WHEN block.piece = 0 THEN :first_id ELSE firsts.first_id END,"
        " block.stripe, count(*)"
        " FROM block JOIN (SELECT piece, min(player_id) AS first_id FROM block GROUP BY piece)"
        " AS firsts ON firsts.piece = block.piece"
        " GROUP BY 1, 2"
    ).bindparams(
        bindparam("ladder_id", type_=String),
        bindparam("first_id", type_=String),
        bindparam("piece", type_=Integer),
        bindparam("bucket_start", type_=Float),
        bindparam("bucket_end", type_=Float),
        *([bindparam("next_id", type_=String)] if bounded else []),
    )


def full(*, session: Session, ladder_id: str) -> bool:
    """Whether a block of the ladder is full (one probe of the partial index)."""
    # The bound as a literal: the partial index's predicate must be implied by the query.
    found = session.scalar(
        select(RatingBlock.ladder_id)
        .where(RatingBlock.ladder_id == ladder_id, text(f"players > {FULL_ROW}"))
        .limit(1)
    )
    return found is not None


def cut(
    *,
    session: Session,
    ladder_id: str,
    full_row: int = FULL_ROW,
    most: int | None = None,
    seconds: float | None = None,
) -> int:
    """Cut the ladder's blocks that have a stripe row above ``full_row`` players (at most
    ``most`` of them, lowest buckets first, and none more once ``seconds`` have passed)
    into pieces of about ``full_row // 2`` players a stripe. Returns how many were cut."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        session.execute(
            text("SELECT pg_advisory_xact_lock(:lock, hashtext(:ladder_id))"),
            {"lock": RANK_LOCK, "ladder_id": ladder_id},
        )
    found = session.execute(
        select(Ladder.bucket_width, Ladder.placement_matches).where(Ladder.id == ladder_id)
    ).first()
    if found is None:
        return 0
    width, placement = found
    query = (
        select(RatingBlock.bucket, RatingBlock.first_id)
        .where(RatingBlock.ladder_id == ladder_id)
        .group_by(RatingBlock.bucket, RatingBlock.first_id)
        .having(func.max(RatingBlock.players) > full_row)
        .order_by(RatingBlock.bucket, RatingBlock.first_id)
    )
    if most is not None:
        query = query.limit(most)
    blocks = session.execute(query).all()
    piece = max(1, full_row // 2) * STRIPES.get(dialect, 1)
    started = time.perf_counter()
    done = 0
    for bucket, first_id in blocks:
        if seconds is not None and done and time.perf_counter() - started > seconds:
            break
        done += 1
        _cut_one(
            session,
            dialect,
            ladder_id,
            int(bucket),
            str(first_id),
            float(width),
            piece,
            placement > 0,
        )
    return done


def _cut_one(
    session: Session,
    dialect: str,
    ladder_id: str,
    bucket: int,
    first_id: str,
    width: float,
    piece: int,
    placed: bool,
) -> None:
    of_bucket = (RatingBlock.ladder_id == ladder_id, RatingBlock.bucket == bucket)
    next_id = session.scalar(
        select(func.min(RatingBlock.first_id)).where(*of_bucket, RatingBlock.first_id > first_id)
    )
    bounds = bucket_range(bucket * width, width)
    parameters: dict[str, Any] = {
        "ladder_id": ladder_id,
        "first_id": first_id,
        "piece": piece,
        "bucket_start": bounds["bucket_start"],
        "bucket_end": bounds["bucket_end"],
    }
    if next_id is not None:
        parameters["next_id"] = next_id
    statement = _pieces_statement(dialect, next_id is not None, placed)
    pieces = session.execute(statement, parameters).all()
    session.execute(delete(RatingBlock).where(*of_bucket, RatingBlock.first_id == first_id))
    if pieces:
        session.execute(
            insert(RatingBlock),
            [
                {
                    "ladder_id": ladder_id,
                    "bucket": bucket,
                    "first_id": str(fence),
                    "stripe": int(stripe),
                    "players": int(players),
                }
                for fence, stripe, players in pieces
            ],
        )


def forget_fences(session: Session, *, ladder_id: str, player_id: str) -> int:
    """Merge every block of the ladder fenced at ``player_id`` into the block before it
    (same bucket), so the id no longer stands anywhere as a fence (an erased player's);
    the blocks it merged. Counts stay exact: the merged block's range and players join the
    previous one's (which the next cut splits again, by ids of players still rated).

    Call it before the player's rating is deleted in the same transaction, so the
    triggers count that deletion in the merged block. On PostgreSQL it takes the ladder's
    fence lock exclusively first, as a cut does."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(
            text("SELECT pg_advisory_xact_lock(:lock, hashtext(:ladder_id))"),
            {"lock": RANK_LOCK, "ladder_id": ladder_id},
        )
    buckets = session.scalars(
        select(RatingBlock.bucket)
        .where(RatingBlock.ladder_id == ladder_id, RatingBlock.first_id == player_id)
        .distinct()
    ).all()
    for bucket in buckets:
        _merge_block(session, ladder_id, int(bucket), player_id)
    return len(buckets)


def _merge_block(session: Session, ladder_id: str, bucket: int, fence: str) -> None:
    of_bucket = (RatingBlock.ladder_id == ladder_id, RatingBlock.bucket == bucket)
    previous = session.scalar(
        select(func.max(RatingBlock.first_id)).where(*of_bucket, RatingBlock.first_id < fence)
    )
    merged = session.execute(
        select(RatingBlock.stripe, RatingBlock.players).where(
            *of_bucket, RatingBlock.first_id == fence
        )
    ).all()
    session.execute(delete(RatingBlock).where(*of_bucket, RatingBlock.first_id == fence))
    into = previous if previous is not None else ""
    for stripe, players in merged:
        row = {"ladder_id": ladder_id, "bucket": bucket, "first_id": into, "stripe": int(stripe)}
        changed = session.execute(
            update(RatingBlock)
            .where(*of_bucket, RatingBlock.first_id == into, RatingBlock.stripe == int(stripe))
            .values(players=RatingBlock.players + int(players))
        )
        if not changed.rowcount:  # type: ignore[attr-defined]
            session.execute(insert(RatingBlock), [{**row, "players": int(players)}])


def cut_full(session: Session, *, ladder_id: str) -> int:
    """What the service does after a commit :func:`due` picked: cut up to
    :data:`CUTS_AT_ONCE` full blocks of the ladder, if it has any, for about
    :data:`CUT_SECONDS`."""
    if not full(session=session, ladder_id=ladder_id):
        return 0
    return cut(session=session, ladder_id=ladder_id, most=CUTS_AT_ONCE, seconds=CUT_SECONDS)


def recount(session: Session, *, ladder_id: str) -> None:
    """Count the ladder's rating buckets and blocks again from its ratings (its placed
    players only, where it has placement): after its ``placement_matches`` changed, in
    the transaction that holds the ladder alone, after its last write to ``ratings``.
    This transaction's own pending changes to them are dropped (the count includes them).
    One block per bucket and stripe: the service cuts the full ones as it goes (or
    ``ratings ladders blocks`` at once)."""
    dialect = session.get_bind().dialect.name
    parameters = {"ladder_id": ladder_id}
    if dialect == "postgresql":
        session.execute(
            text("SELECT pg_advisory_xact_lock(:lock, hashtext(:ladder_id))"),
            {"lock": RANK_LOCK, **parameters},
        )
        session.execute(
            text(
                "DELETE FROM rating_bucket_deltas"
                " WHERE txid = txid_current() AND ladder_id = :ladder_id"
            ),
            parameters,
        )
    session.execute(delete(RatingBlock).where(RatingBlock.ladder_id == ladder_id))
    session.execute(text("DELETE FROM rating_buckets WHERE ladder_id = :ladder_id"), parameters)
    bucket = bucket_sql("r.conservative", "l.bucket_width", dialect)
    session.execute(
        text(
            "INSERT INTO rating_buckets (ladder_id, bucket, stripe, players)"
            " SELECT ladder_id, bucket, stripe, count(*) FROM ("
            f" SELECT r.ladder_id, {bucket} AS bucket, {_stripe_sql(dialect)} AS stripe"
            " FROM ratings AS r JOIN ladders AS l ON l.id = r.ladder_id"
            " WHERE r.ladder_id = :ladder_id"
            " AND r.matches - r.season_base >= l.placement_matches) AS counted"
            " GROUP BY ladder_id, bucket, stripe"
        ),
        parameters,
    )
    session.execute(
        text(
            "INSERT INTO rating_blocks (ladder_id, bucket, first_id, stripe, players)"
            " SELECT ladder_id, bucket, '', stripe, players FROM rating_buckets"
            " WHERE ladder_id = :ladder_id"
        ),
        parameters,
    )


def _shift_statements(dialect: str) -> list[Executable]:
    """Move a range of a ladder's ratings out of (``sign`` -1) or into (+1) its bucket and
    block counts, grouped: what the row triggers do row by row."""
    bucket = bucket_sql("r.conservative", "l.bucket_width", dialect)
    rows = (
        f"SELECT {bucket} AS bucket, r.player_id FROM ratings AS r"
        " JOIN ladders AS l ON l.id = r.ladder_id"
        " WHERE r.ladder_id = :ladder_id AND r.player_id >= :first AND r.player_id <= :last"
        " AND r.matches - r.season_base >= l.placement_matches"
    )
    return [
        text(
            "INSERT INTO rating_buckets (ladder_id, bucket, stripe, players)"
            f" SELECT :ladder_id, bucket, 0, :sign * count(*) FROM ({rows}) AS counted"
            " WHERE true GROUP BY bucket"
            " ON CONFLICT (ladder_id, bucket, stripe)"
            " DO UPDATE SET players = players + excluded.players"
        ),
        text(
            "INSERT INTO rating_blocks (ladder_id, bucket, first_id, stripe, players)"
            " SELECT :ladder_id, bucket, fence, 0, :sign * count(*) FROM ("
            " SELECT c.bucket, COALESCE((SELECT max(b.first_id) FROM rating_blocks AS b"
            " WHERE b.ladder_id = :ladder_id AND b.bucket = c.bucket"
            f" AND b.first_id <= c.player_id), '') AS fence FROM ({rows}) AS c) AS fenced"
            " WHERE true GROUP BY bucket, fence"
            " ON CONFLICT (ladder_id, bucket, first_id, stripe)"
            " DO UPDATE SET players = players + excluded.players"
        ),
    ]


@contextmanager
def rewriting(session: Session, *, ladder_id: str, first_id: str, last_id: str) -> Iterator[None]:
    """Around a bulk rewrite of the ladder's ratings with ids in [``first_id``,
    ``last_id``] (a season's reset in steps). On SQLite, whose row triggers count each
    row's move in six statements of their own, the range is moved out of the counts by
    two grouped statements, the triggers paused for the ladder (its row in
    ``rating_trigger_pauses``, migration 0025, seen by this transaction alone), and moved
    back in after: the same counts, a fraction of the work. PostgreSQL's statement
    triggers group a bulk write's moves already: nothing to do."""
    if session.get_bind().dialect.name != "sqlite":
        yield
        return
    parameters = {"ladder_id": ladder_id, "first": first_id, "last": last_id}
    statements = _shift_statements("sqlite")
    for statement in statements:
        session.execute(statement, {**parameters, "sign": -1})
    session.execute(
        text("INSERT INTO rating_trigger_pauses (ladder_id) VALUES (:ladder_id)"), parameters
    )
    yield
    session.execute(
        text("DELETE FROM rating_trigger_pauses WHERE ladder_id = :ladder_id"), parameters
    )
    for statement in statements:
        session.execute(statement, {**parameters, "sign": 1})
