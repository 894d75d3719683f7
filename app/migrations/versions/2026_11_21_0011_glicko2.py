"""Glicko-2 ladders: the algorithm, and the volatility of a rating and of its history.

A Glicko-2 rating is a rating, a deviation and a volatility; the volatility is stored
beside mu and sigma (``ratings.volatility``) and before and after every change
(``rating_history.volatility_before`` / ``volatility_after``) so that a void or a rebuild
restores it exactly. The columns are NULL for every other algorithm: existing ladders
are untouched.

On SQLite the ladders' CHECK of the algorithm is rewritten in the schema text (SQLite's
documented ``writable_schema`` way of changing a CHECK constraint): rebuilding ``ladders``
as ``batch_alter_table`` does would drop the table every other table cascades from.
Downgrading deletes the Glicko-2 ladders (with their ratings and matches), which the
older schema cannot hold.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-21 21:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.migrations.checks import replace_algorithm_check

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD = "algorithm IN ('trueskill', 'plackett_luce', 'elo')"
NEW = "algorithm IN ('trueskill', 'plackett_luce', 'elo', 'glicko2')"
POSITIVE = "{0} IS NULL OR ({0} > 0 AND {0} <= 1.0e308)"


def upgrade() -> None:
    replace_algorithm_check(OLD, NEW)
    # In place, without a rebuild: ``ratings`` carries the bucket triggers of 0004 and is
    # the parent of ``rating_history``.
    op.add_column(
        "ratings",
        sa.Column(
            "volatility",
            sa.Float(),
            sa.CheckConstraint(POSITIVE.format("volatility"), name="volatility"),
            nullable=True,
        ),
    )
    with op.batch_alter_table("rating_history") as batch:
        batch.add_column(sa.Column("volatility_before", sa.Float(), nullable=True))
        batch.add_column(sa.Column("volatility_after", sa.Float(), nullable=True))
        batch.create_check_constraint(
            op.f("ck_rating_history_volatility_positive"),
            f"({POSITIVE.format('volatility_before')}) AND ({POSITIVE.format('volatility_after')})",
        )


def downgrade() -> None:
    op.execute("DELETE FROM ladders WHERE algorithm = 'glicko2'")
    with op.batch_alter_table("rating_history") as batch:
        batch.drop_constraint(op.f("ck_rating_history_volatility_positive"), type_="check")
        batch.drop_column("volatility_after")
        batch.drop_column("volatility_before")
    _drop_ratings_volatility()
    replace_algorithm_check(NEW, OLD)


def _drop_ratings_volatility() -> None:
    """In place on SQLite too (ALTER TABLE DROP COLUMN, SQLite 3.35; the column's own
    CHECK goes with it), so ``ratings`` keeps its bucket triggers."""
    if op.get_bind().dialect.name == "sqlite":
        op.get_bind().exec_driver_sql("ALTER TABLE ratings DROP COLUMN volatility")
    else:
        op.drop_column("ratings", "volatility")
