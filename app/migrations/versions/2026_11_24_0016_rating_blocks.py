"""Rating blocks: a rank among thousands of tied players without walking the tie.

Players with the same conservative rating are ordered by player id, so a rank inside a tie
is the number of tied players with a smaller id. An index range counts them one by one: at
a game's launch, when most players have played one match and share one of two ratings, that
is tens of thousands of index entries for one rank.

``rating_blocks`` splits each rating bucket further by player id. A bucket's blocks start at
fences, ``first_id`` (the first block of a bucket starts at ``''``), and each counts the
bucket's players whose id is at or after its fence and before the next one, per stripe as
``rating_buckets`` does. A rank inside a tie is then the blocks before the player's own,
corrected by the bucket's untied players, plus a walk inside one block (``count_ahead``).
A block that grows too large is cut in pieces by the service (``app.storage.blocks``).

The triggers of migration 0004 keep the blocks too: the statement triggers find each changed
row's block and add its change to ``rating_bucket_deltas`` (now keyed by block as well), and
the deferred trigger applies the deltas to both tables at commit, buckets then blocks, each
in key order. It now fires once a transaction, on the transaction's row in
``rating_bucket_commits``, where 0004's fired once for every delta row. A block is found by its fences at statement time, so fences must not move
while a transaction that found blocks is open: on PostgreSQL the statement triggers take a
shared advisory lock on the ladder (class ``RANK_LOCK``, key ``hashtext(ladder_id)``) that
the transaction holds until it ends, and cutting a ladder's blocks takes it exclusively.
SQLite has one writer at a time.

Existing databases start with one block per bucket and stripe: a copy of ``rating_buckets``.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-24 12:30:00.000000
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import sqlalchemy as sa
from alembic import op

from app.migrations.checks import bucket_sql

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Stripes per bucket on PostgreSQL (as in 0004).
STRIPES = 8
#: The advisory lock class of a ladder's block fences ('RANK').
RANK_LOCK = 0x52414E4B
#: A stripe row above this many players marks its block for cutting (the partial index).
FULL_ROW = 128


def _postgres_functions(placed: bool = False) -> list[str]:
    """The trigger functions; ``placed`` (migration 0023): a ladder's buckets and blocks
    count only the players placed in its current season."""

    def changes(table: str, sign: str) -> str:
        bucket = bucket_sql(f"{table}.conservative", "l.bucket_width", "postgresql")
        where = (
            f" WHERE {table}.matches - {table}.season_base >= l.placement_matches"
            if placed
            else ""
        )
        return (
            f"SELECT {table}.ladder_id, c.bucket, (hashtext({table}.player_id) & {STRIPES - 1})"
            " AS stripe, COALESCE((SELECT max(b.first_id) FROM rating_blocks AS b"
            f" WHERE b.ladder_id = {table}.ladder_id AND b.bucket = c.bucket"
            f" AND b.first_id <= {table}.player_id), '') AS first_id, {sign}1 AS players"
            f" FROM {table} JOIN ladders AS l ON l.id = {table}.ladder_id"
            f" CROSS JOIN LATERAL (SELECT {bucket} AS bucket) AS c{where}"
        )

    def collect(name: str, ladders: str, source: str) -> str:
        return f"""
CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock_shared({RANK_LOCK}, hashtext(ladder_id))
    FROM ({ladders}) AS changed ORDER BY ladder_id;
    INSERT INTO rating_bucket_deltas (txid, ladder_id, bucket, stripe, first_id, players)
    SELECT txid_current(), ladder_id, bucket, stripe, first_id, sum(players)
    FROM ({source}) AS changes
    GROUP BY ladder_id, bucket, stripe, first_id
    HAVING sum(players) <> 0
    ORDER BY ladder_id, bucket, stripe, first_id
    ON CONFLICT (txid, ladder_id, bucket, stripe, first_id)
        DO UPDATE SET players = rating_bucket_deltas.players + excluded.players;
    INSERT INTO rating_bucket_commits (txid) VALUES (txid_current()) ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$"""

    apply = """
CREATE OR REPLACE FUNCTION rating_buckets_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rating_buckets (ladder_id, bucket, stripe, players)
    SELECT d.ladder_id, d.bucket, d.stripe, sum(d.players)
    FROM rating_bucket_deltas AS d JOIN ladders ON ladders.id = d.ladder_id
    WHERE d.txid = txid_current()
    GROUP BY d.ladder_id, d.bucket, d.stripe
    HAVING sum(d.players) <> 0
    ORDER BY d.ladder_id, d.bucket, d.stripe
    ON CONFLICT (ladder_id, bucket, stripe)
        DO UPDATE SET players = rating_buckets.players + excluded.players;
    INSERT INTO rating_blocks (ladder_id, bucket, first_id, stripe, players)
    SELECT d.ladder_id, d.bucket, d.first_id, d.stripe, sum(d.players)
    FROM rating_bucket_deltas AS d JOIN ladders ON ladders.id = d.ladder_id
    WHERE d.txid = txid_current()
    GROUP BY d.ladder_id, d.bucket, d.first_id, d.stripe
    HAVING sum(d.players) <> 0
    ORDER BY d.ladder_id, d.bucket, d.first_id, d.stripe
    ON CONFLICT (ladder_id, bucket, first_id, stripe)
        DO UPDATE SET players = rating_blocks.players + excluded.players;
    DELETE FROM rating_bucket_deltas WHERE txid = txid_current();
    DELETE FROM rating_bucket_commits WHERE txid = txid_current();
    RETURN NULL;
END $$"""
    new, old = "SELECT ladder_id FROM new_rows", "SELECT ladder_id FROM old_rows"
    return [
        collect("rating_buckets_inserted", f"{new} GROUP BY ladder_id", changes("new_rows", "+")),
        collect(
            "rating_buckets_updated",
            f"{new} UNION {old}",
            changes("new_rows", "+") + " UNION ALL " + changes("old_rows", "-"),
        ),
        collect("rating_buckets_deleted", f"{old} GROUP BY ladder_id", changes("old_rows", "-")),
        apply,
    ]


def _postgres_triggers(buckets: ModuleType) -> list[str]:
    """0004's statement triggers, and the deferred apply fired once a transaction: by the
    transaction's one row in ``rating_bucket_commits`` (0004 fired it for every delta row,
    each run after the first finding nothing to do)."""
    statements: list[str] = buckets.POSTGRES_TRIGGERS[:3]
    return [
        *statements,
        "CREATE CONSTRAINT TRIGGER rating_buckets_apply AFTER INSERT ON rating_bucket_commits"
        " DEFERRABLE INITIALLY DEFERRED"
        " FOR EACH ROW EXECUTE FUNCTION rating_buckets_apply()",
    ]


def _sqlite_triggers(
    placed: bool = False, pausable: bool = False, pause_first: bool = False
) -> list[str]:
    """The row triggers; ``placed`` (migration 0023): a ladder's buckets and blocks count
    only the players placed in its current season; ``pausable`` (migration 0025): an
    update skips a ladder that has a row in ``rating_trigger_pauses`` (a bulk rewrite that
    moves its counts itself), looked up before the buckets are computed when
    ``pause_first`` (migration 0026)."""

    def counted(row: str) -> str:
        if not placed:
            return ""
        return (
            f" AND {row}.matches - {row}.season_base"
            f" >= (SELECT placement_matches FROM ladders WHERE id = {row}.ladder_id)"
        )

    def bucket(row: str) -> str:
        width = f"(SELECT bucket_width FROM ladders WHERE id = {row}.ladder_id)"
        return bucket_sql(f"{row}.conservative", width, "sqlite")

    def fence(row: str) -> str:
        return (
            "COALESCE((SELECT max(b.first_id) FROM rating_blocks AS b"
            f" WHERE b.ladder_id = {row}.ladder_id AND b.bucket = {bucket(row)}"
            f" AND b.first_id <= {row}.player_id), '')"
        )

    def add(row: str) -> str:
        # Only for a ladder that exists (a cascade from a deleted ladder adds nothing).
        exists = f" WHERE EXISTS (SELECT 1 FROM ladders WHERE id = {row}.ladder_id){counted(row)}"
        return (
            "INSERT INTO rating_buckets (ladder_id, bucket, stripe, players)"
            f" SELECT {row}.ladder_id, {bucket(row)}, 0, 1{exists}"
            " ON CONFLICT (ladder_id, bucket, stripe) DO UPDATE SET players = players + 1;"
            " INSERT INTO rating_blocks (ladder_id, bucket, first_id, stripe, players)"
            f" SELECT {row}.ladder_id, {bucket(row)}, {fence(row)}, 0, 1{exists}"
            " ON CONFLICT (ladder_id, bucket, first_id, stripe)"
            " DO UPDATE SET players = players + 1;"
        )

    def remove(row: str) -> str:
        return (
            "UPDATE rating_buckets SET players = players - 1"
            f" WHERE ladder_id = {row}.ladder_id AND bucket = {bucket(row)} AND stripe = 0"
            f"{counted(row)};"
            " UPDATE rating_blocks SET players = players - 1"
            f" WHERE ladder_id = {row}.ladder_id AND bucket = {bucket(row)} AND stripe = 0"
            f" AND first_id = {fence(row)}{counted(row)};"
        )

    moved = (
        f"OLD.ladder_id IS NOT NEW.ladder_id OR OLD.player_id IS NOT NEW.player_id"
        f" OR {bucket('OLD')} IS NOT {bucket('NEW')}"
    )
    columns = "ladder_id, player_id, conservative"
    if placed:  # a player placed, or back to placing: counted in, or out
        moved += f" OR (1{counted('OLD')}) IS NOT (1{counted('NEW')})"
        columns += ", matches, season_base"
    when = moved
    if pausable and pause_first:
        when = (
            "NOT EXISTS (SELECT 1 FROM rating_trigger_pauses WHERE ladder_id = NEW.ladder_id)"
            f" AND ({moved})"
        )
    elif pausable:
        when = (
            f"({moved}) AND NOT EXISTS"
            " (SELECT 1 FROM rating_trigger_pauses WHERE ladder_id = NEW.ladder_id)"
        )
    return [
        f"CREATE TRIGGER rating_buckets_inserted AFTER INSERT ON ratings BEGIN {add('NEW')} END",
        f"CREATE TRIGGER rating_buckets_updated AFTER UPDATE OF {columns}"
        f" ON ratings WHEN {when} BEGIN {remove('OLD')} {add('NEW')} END",
        f"CREATE TRIGGER rating_buckets_deleted AFTER DELETE ON ratings BEGIN {remove('OLD')} END",
    ]


def _buckets_migration() -> ModuleType:
    """Migration 0004, for the definitions a downgrade puts back."""
    path = Path(__file__).with_name("2026_11_21_0004_rating_buckets.py")
    spec = importlib.util.spec_from_file_location("rating_buckets_0004", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _deltas_table(dialect: str, blocks: bool) -> None:
    """``rating_bucket_deltas`` (empty between transactions, so made again, not altered)."""
    op.create_table(
        "rating_bucket_deltas",
        sa.Column("txid", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.Column("bucket", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("stripe", sa.Integer(), autoincrement=False, nullable=False),
        *([sa.Column("first_id", sa.String(length=128), nullable=False)] if blocks else []),
        sa.Column("players", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "txid",
            "ladder_id",
            "bucket",
            "stripe",
            *(["first_id"] if blocks else []),
            name=op.f("pk_rating_bucket_deltas"),
        ),
        prefixes=["UNLOGGED"] if dialect == "postgresql" else [],
    )


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    buckets = _buckets_migration()
    for statement in buckets.POSTGRES_DROPS if dialect == "postgresql" else buckets.SQLITE_DROPS:
        op.execute(statement)
    op.drop_table("rating_bucket_deltas")
    _deltas_table(dialect, blocks=True)
    op.create_table(
        "rating_bucket_commits",
        sa.Column("txid", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint("txid", name=op.f("pk_rating_bucket_commits")),
        prefixes=["UNLOGGED"] if dialect == "postgresql" else [],
    )
    op.create_table(
        "rating_blocks",
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.Column("bucket", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("first_id", sa.String(length=128), nullable=False),
        sa.Column("stripe", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("players", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["ladder_id"],
            ["ladders.id"],
            name=op.f("fk_rating_blocks_ladder_id_ladders"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "ladder_id", "bucket", "first_id", "stripe", name=op.f("pk_rating_blocks")
        ),
    )
    full = sa.text(f"players > {FULL_ROW}")
    op.create_index(
        "ix_rating_blocks_full",
        "rating_blocks",
        ["ladder_id"],
        postgresql_where=full,
        sqlite_where=full,
    )
    # The triggers exist before the copy (on PostgreSQL their lock holds off writers until
    # this commits): every rating is counted exactly once.
    if dialect == "postgresql":
        for statement in [*_postgres_functions(), *_postgres_triggers(buckets)]:
            op.execute(statement)
    else:
        for statement in _sqlite_triggers():
            op.execute(statement)
    op.execute(
        "INSERT INTO rating_blocks (ladder_id, bucket, first_id, stripe, players)"
        " SELECT ladder_id, bucket, '', stripe, players FROM rating_buckets WHERE players <> 0"
    )


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    buckets = _buckets_migration()
    for statement in buckets.POSTGRES_DROPS if dialect == "postgresql" else buckets.SQLITE_DROPS:
        op.execute(statement)
    op.drop_index("ix_rating_blocks_full", table_name="rating_blocks")
    op.drop_table("rating_blocks")
    op.drop_table("rating_bucket_commits")
    op.drop_table("rating_bucket_deltas")
    _deltas_table(dialect, blocks=False)
    if dialect == "postgresql":
        for statement in [*buckets._postgres_functions(), *buckets.POSTGRES_TRIGGERS]:
            op.execute(statement)
    else:
        for statement in buckets._sqlite_triggers():
            op.execute(statement)
