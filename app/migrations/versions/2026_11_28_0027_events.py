"""Events in an outbox: ``events``, each change a consumer acts on, written in the same
transaction as the change and numbered per ladder in commit order under the lock of the
ladder's row of ``ladder_event_counters``.

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-28 03:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "ladder_event_counters",
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["ladder_id"],
            ["ladders.id"],
            name=op.f("fk_ladder_event_counters_ladder_id_ladders"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("ladder_id", name=op.f("pk_ladder_event_counters")),
    )
    op.create_table(
        "events",
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("match_seq", sa.BigInteger(), nullable=True),
        sa.Column("player_id", sa.String(length=128), nullable=True),
        sa.ForeignKeyConstraint(
            ["ladder_id"],
            ["ladders.id"],
            name=op.f("fk_events_ladder_id_ladders"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("ladder_id", "seq", name=op.f("pk_events")),
    )
    op.create_index(
        "ix_events_match_seq",
        "events",
        ["match_seq"],
        postgresql_where=sa.text("match_seq IS NOT NULL"),
        sqlite_where=sa.text("match_seq IS NOT NULL"),
    )
    op.create_index(
        "ix_events_player",
        "events",
        ["ladder_id", "player_id"],
        postgresql_where=sa.text("player_id IS NOT NULL"),
        sqlite_where=sa.text("player_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_events_player", table_name="events")
    op.drop_index("ix_events_match_seq", table_name="events")
    op.drop_table("events")
    op.drop_table("ladder_event_counters")
