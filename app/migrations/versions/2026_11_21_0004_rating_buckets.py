"""Rating buckets: a player's exact leaderboard rank without counting every player ahead.

``rating_buckets`` counts each ladder's players per bucket of conservative rating (bucket
``floor(c / width)``, ``width`` a power of two stored on the ladder) and per stripe. A rank
is then the sum of the buckets above the player's plus an index range scan inside its own
bucket. Triggers on ``ratings`` keep the counts exact for every statement that writes it
(INSERT, COPY, UPDATE ... FROM, DELETE, cascades), so no code path has to remember them:

- PostgreSQL: statement-level triggers with transition tables add up a statement's changes
  per (bucket, stripe) into ``rating_bucket_deltas`` (rows of this transaction only). A
  deferred constraint trigger applies them when the transaction commits, with ONE
  ``INSERT ... ON CONFLICT DO UPDATE`` ordered by key: the bucket rows are locked last, all
  at once and in the same order by every writer, so writers cannot deadlock on them.
  The stripe (a hash of the player id) spreads concurrent writers over several rows.
- SQLite (one writer at a time): row-level triggers update ``rating_buckets`` at once.

A later migration that rebuilds ``ratings`` on SQLite (``batch_alter_table``) drops these
triggers with the table and must create them again.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21 14:00:00.000000
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.migrations.checks import LIMIT, bucket_sql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: Stripes per bucket on PostgreSQL.
STRIPES = 8
BAYESIAN = ("trueskill", "plackett_luce")


def _width(algorithm: str, params: dict[str, float]) -> float:
    """The ladder's bucket width, as the service chooses it for a new ladder (a copy: a
    migration must not change when the service does)."""
    if algorithm in BAYESIAN:
        scale, per = float(params.get("sigma", 25.0 / 3.0)), 32.0
    else:
        scale, per = float(params.get("scale", 400.0)), 128.0
    if not (math.isfinite(scale) and scale > 0):
        return 1.0
    return 2.0 ** min(max(round(math.log2(scale / per)), -40), 40)


def _postgres_functions() -> list[str]:
    stripe = "(hashtext({t}.player_id) & " + str(STRIPES - 1) + ")"

    def changes(table: str, sign: str) -> str:
        return (
            f"SELECT {table}.ladder_id, {bucket_sql(f'{table}.conservative', 'l.bucket_width', 'postgresql')}"
            f" AS bucket, {stripe.format(t=table)} AS stripe, {sign}1 AS players"
            f" FROM {table} JOIN ladders AS l ON l.id = {table}.ladder_id"
        )

    def collect(name: str, source: str) -> str:
        return f"""
CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rating_bucket_deltas (txid, ladder_id, bucket, stripe, players)
    SELECT txid_current(), ladder_id, bucket, stripe, sum(players)
    FROM ({source}) AS changes
    GROUP BY ladder_id, bucket, stripe
    HAVING sum(players) <> 0
    ORDER BY ladder_id, bucket, stripe
    ON CONFLICT (txid, ladder_id, bucket, stripe)
        DO UPDATE SET players = rating_bucket_deltas.players + excluded.players;
    RETURN NULL;
END $$"""

    apply = """
CREATE OR REPLACE FUNCTION rating_buckets_apply() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH moved AS (
        DELETE FROM rating_bucket_deltas WHERE txid = txid_current()
        RETURNING ladder_id, bucket, stripe, players
    )
    INSERT INTO rating_buckets (ladder_id, bucket, stripe, players)
    SELECT moved.ladder_id, moved.bucket, moved.stripe, sum(moved.players)
    FROM moved JOIN ladders ON ladders.id = moved.ladder_id
    GROUP BY moved.ladder_id, moved.bucket, moved.stripe
    HAVING sum(moved.players) <> 0
    ORDER BY moved.ladder_id, moved.bucket, moved.stripe
    ON CONFLICT (ladder_id, bucket, stripe)
        DO UPDATE SET players = rating_buckets.players + excluded.players;
    RETURN NULL;
END $$"""
    return [
        collect("rating_buckets_inserted", changes("new_rows", "+")),
        collect(
            "rating_buckets_updated",
            changes("new_rows", "+") + " UNION ALL " + changes("old_rows", "-"),
        ),
        collect("rating_buckets_deleted", changes("old_rows", "-")),
        apply,
    ]


POSTGRES_TRIGGERS = [
    "CREATE TRIGGER rating_buckets_inserted AFTER INSERT ON ratings"
    " REFERENCING NEW TABLE AS new_rows"
    " FOR EACH STATEMENT EXECUTE FUNCTION rating_buckets_inserted()",
    "CREATE TRIGGER rating_buckets_updated AFTER UPDATE ON ratings"
    " REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows"
    " FOR EACH STATEMENT EXECUTE FUNCTION rating_buckets_updated()",
    "CREATE TRIGGER rating_buckets_deleted AFTER DELETE ON ratings"
    " REFERENCING OLD TABLE AS old_rows"
    " FOR EACH STATEMENT EXECUTE FUNCTION rating_buckets_deleted()",
    "CREATE CONSTRAINT TRIGGER rating_buckets_apply AFTER INSERT ON rating_bucket_deltas"
    " DEFERRABLE INITIALLY DEFERRED"
    " FOR EACH ROW EXECUTE FUNCTION rating_buckets_apply()",
]
POSTGRES_DROPS = [
    "DROP TRIGGER IF EXISTS rating_buckets_inserted ON ratings",
    "DROP TRIGGER IF EXISTS rating_buckets_updated ON ratings",
    "DROP TRIGGER IF EXISTS rating_buckets_deleted ON ratings",
    "DROP FUNCTION IF EXISTS rating_buckets_inserted()",
    "DROP FUNCTION IF EXISTS rating_buckets_updated()",
    "DROP FUNCTION IF EXISTS rating_buckets_deleted()",
    "DROP FUNCTION IF EXISTS rating_buckets_apply() CASCADE",
]


def _sqlite_triggers() -> list[str]:
    def bucket(row: str) -> str:
        width = f"(SELECT bucket_width FROM ladders WHERE id = {row}.ladder_id)"
        return bucket_sql(f"{row}.conservative", width, "sqlite")

    def add(row: str) -> str:
        # Only for a ladder that exists (a cascade from a deleted ladder adds nothing).
        return (
            "INSERT INTO rating_buckets (ladder_id, bucket, stripe, players)"
            f" SELECT {row}.ladder_id, {bucket(row)}, 0, 1"
            f" WHERE EXISTS (SELECT 1 FROM ladders WHERE id = {row}.ladder_id)"
            " ON CONFLICT (ladder_id, bucket, stripe) DO UPDATE SET players = players + 1;"
        )

    def remove(row: str) -> str:
        return (
            "UPDATE rating_buckets SET players = players - 1"
            f" WHERE ladder_id = {row}.ladder_id AND bucket = {bucket(row)} AND stripe = 0;"
        )

    moved = f"OLD.ladder_id IS NOT NEW.ladder_id OR {bucket('OLD')} IS NOT {bucket('NEW')}"
    return [
        f"CREATE TRIGGER rating_buckets_inserted AFTER INSERT ON ratings BEGIN {add('NEW')} END",
        "CREATE TRIGGER rating_buckets_updated AFTER UPDATE OF ladder_id, conservative"
        f" ON ratings WHEN {moved} BEGIN {remove('OLD')} {add('NEW')} END",
        f"CREATE TRIGGER rating_buckets_deleted AFTER DELETE ON ratings BEGIN {remove('OLD')} END",
    ]


SQLITE_DROPS = [
    "DROP TRIGGER IF EXISTS rating_buckets_inserted",
    "DROP TRIGGER IF EXISTS rating_buckets_updated",
    "DROP TRIGGER IF EXISTS rating_buckets_deleted",
]


def upgrade() -> None:
    bind = op.get_bind()
    dialect = bind.dialect.name
    op.add_column(
        "ladders",
        sa.Column("bucket_width", sa.Float(), server_default=sa.text("1.0"), nullable=False),
    )
    for ladder_id, algorithm, params in bind.execute(
        sa.text("SELECT id, algorithm, params FROM ladders")
    ):
        values = params if isinstance(params, dict) else json.loads(params)
        bind.execute(
            sa.text("UPDATE ladders SET bucket_width = :width WHERE id = :id"),
            {"width": _width(algorithm, values), "id": ladder_id},
        )
    op.create_table(
        "rating_buckets",
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.Column("bucket", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("stripe", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("players", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["ladder_id"],
            ["ladders.id"],
            name=op.f("fk_rating_buckets_ladder_id_ladders"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("ladder_id", "bucket", "stripe", name=op.f("pk_rating_buckets")),
    )
    op.create_table(
        "rating_bucket_deltas",
        sa.Column("txid", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.Column("bucket", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("stripe", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("players", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "txid", "ladder_id", "bucket", "stripe", name=op.f("pk_rating_bucket_deltas")
        ),
        prefixes=["UNLOGGED"] if dialect == "postgresql" else [],
    )
    if dialect == "postgresql":
        for statement in [*_postgres_functions(), *POSTGRES_TRIGGERS]:
            op.execute(statement)
        stripe = f"(hashtext(r.player_id) & {STRIPES - 1})"
        width = "l.bucket_width"
    else:
        for statement in _sqlite_triggers():
            op.execute(statement)
        stripe = "0"
        width = "l.bucket_width"
    # The triggers exist already (and, on PostgreSQL, their lock holds off writers until
    # this commits): every rating is counted exactly once.
    bucket = bucket_sql("r.conservative", width, dialect)
    op.execute(
        "INSERT INTO rating_buckets (ladder_id, bucket, stripe, players)"
        f" SELECT r.ladder_id, {bucket}, {stripe}, count(*)"
        " FROM ratings AS r JOIN ladders AS l ON l.id = r.ladder_id"
        " GROUP BY 1, 2, 3"
    )


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for statement in POSTGRES_DROPS if dialect == "postgresql" else SQLITE_DROPS:
        op.execute(statement)
    op.drop_table("rating_bucket_deltas")
    op.drop_table("rating_buckets")
    op.drop_column("ladders", "bucket_width")
