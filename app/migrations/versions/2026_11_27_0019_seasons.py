"""Ranked seasons: a ladder's seasons, the archived standings of the closed ones, and the
soft reset as a history entry.

``seasons`` holds each season of a ladder in order (``ordinal``, from 1) with its id, the
``keep`` factor of the reset that opened it and where it begins: the first match ``seq``
and the first ``rating_history`` id that belong to it (both drawn while the opening held
the ladder alone, so everything recorded before has smaller numbers and everything after
larger). ``ladders.season`` is the current season's id. ``season_standings`` keeps a
closed season's final standings, ranked. ``rating_history.reset`` marks the soft reset's
entries. Every existing ladder gets its first season, ``"1"``, from its creation.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27 15:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE on both engines (SQLite adds and drops a column in place): a
    # batch copy of ``ladders`` would trip the rating triggers that name it.
    op.add_column(
        "ladders", sa.Column("season", sa.String(length=64), server_default="1", nullable=False)
    )
    op.add_column(
        "rating_history",
        sa.Column("reset", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    op.create_table(
        "seasons",
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.Column("ordinal", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("keep", sa.Float(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("first_seq", sa.BigInteger(), nullable=False),
        sa.Column("first_history_id", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("keep >= 0 AND keep <= 1", name=op.f("ck_seasons_keep")),
        sa.ForeignKeyConstraint(
            ["ladder_id"],
            ["ladders.id"],
            name=op.f("fk_seasons_ladder_id_ladders"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("ladder_id", "ordinal", name=op.f("pk_seasons")),
        sa.UniqueConstraint("ladder_id", "id", name="uq_seasons_ladder_id"),
    )
    op.create_table(
        "season_standings",
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.Column("season", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("player_id", sa.String(length=128), nullable=False),
        sa.Column("rank", sa.BigInteger(), nullable=False),
        sa.Column("mu", sa.Float(), nullable=False),
        sa.Column("sigma", sa.Float(), nullable=True),
        sa.Column("conservative", sa.Float(), nullable=False),
        sa.Column("volatility", sa.Float(), nullable=True),
        sa.Column("matches", sa.Integer(), nullable=False),
        sa.Column("last_played_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["ladder_id", "player_id"],
            ["ratings.ladder_id", "ratings.player_id"],
            name="fk_season_standings_player_ratings",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("ladder_id", "season", "player_id", name=op.f("pk_season_standings")),
    )
    op.create_index(
        "ix_season_standings_rank", "season_standings", ["ladder_id", "season", "rank"]
    )
    op.execute(
        "INSERT INTO seasons (ladder_id, ordinal, id, keep, started_at, ended_at, first_seq,"
        " first_history_id) SELECT id, 1, '1', 1.0, created_at, NULL, 0, 0 FROM ladders"
    )


def downgrade() -> None:
    op.drop_index("ix_season_standings_rank", table_name="season_standings")
    op.drop_table("season_standings")
    op.drop_table("seasons")
    op.drop_column("rating_history", "reset")
    op.drop_column("ladders", "season")
