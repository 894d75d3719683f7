"""Scheduled seasons: ``season_schedule`` holds the season a ladder opens at a set time.

One row per ladder at most: the season's id, its ``keep`` and ``starts_at``. Each worker's
season clock opens a due one in a transaction that deletes its row, holds the ladder and
opens the season: the delete is what makes it happen once, whichever worker or instance
gets there first, and a crash before the commit leaves the row for the next attempt.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27 16:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "season_schedule",
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("keep", sa.Float(), nullable=False),
        sa.Column("starts_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("keep >= 0 AND keep <= 1", name=op.f("ck_season_schedule_keep")),
        sa.ForeignKeyConstraint(
            ["ladder_id"],
            ["ladders.id"],
            name=op.f("fk_season_schedule_ladder_id_ladders"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("ladder_id", name=op.f("pk_season_schedule")),
    )
    op.create_index(
        op.f("ix_season_schedule_starts_at"), "season_schedule", ["starts_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_season_schedule_starts_at"), table_name="season_schedule")
    op.drop_table("season_schedule")
