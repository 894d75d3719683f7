"""Inactivity on the leaderboard: ``ladders.aged_at``, the time the stored conservative
ratings of a ladder that ages ratings (``tau_per_day``, Glicko-2's ``deviation_per_day``)
stand at, each widened for the player's time away since their last match; and
``aging_passes``, the one pass under way per ladder that brings them to a new time, in
short steps by player id (its cursor, and the lease of the worker running it).

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-27 19:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ALTER TABLE (in place on SQLite): a batch copy would drop the rating triggers.
    op.add_column("ladders", sa.Column("aged_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "aging_passes",
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.Column("as_of", sa.DateTime(timezone=True), nullable=False),
        sa.Column("after_id", sa.String(length=128), nullable=False),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["ladder_id"],
            ["ladders.id"],
            name=op.f("fk_aging_passes_ladder_id_ladders"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("ladder_id", name=op.f("pk_aging_passes")),
    )


def downgrade() -> None:
    op.drop_table("aging_passes")
    op.drop_column("ladders", "aged_at")
