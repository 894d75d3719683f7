"""History rows without ``kind`` and ``match_id``: both follow from ``match_seq``.

A history row is a match's exactly when it has a ``match_seq`` (a CHECK constraint held
``kind`` to that), and that match's row holds its match_id: a player's history reads it
from there, joining each of its (at most a page of) rows to the match by primary key.
Every history row is smaller by both texts (a generated match_id has 34 characters).

Downgrading puts them back from ``match_seq`` and the matches.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-21 18:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # SQLite: the table is copied without the columns (rating_history is no table's parent).
    with op.batch_alter_table("rating_history") as batch:
        batch.drop_constraint(op.f("ck_rating_history_kind"), type_="check")
        batch.drop_constraint(op.f("ck_rating_history_match_kind"), type_="check")
        batch.drop_column("kind")
        batch.drop_column("match_id")


def downgrade() -> None:
    with op.batch_alter_table("rating_history") as batch:
        batch.add_column(sa.Column("kind", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("match_id", sa.String(length=128), nullable=True))
    op.execute(
        "UPDATE rating_history SET "
        "kind = CASE WHEN match_seq IS NULL THEN 'adjustment' ELSE 'match' END, "
        "match_id = (SELECT m.match_id FROM matches AS m WHERE m.seq = rating_history.match_seq)"
    )
    with op.batch_alter_table("rating_history") as batch:
        batch.alter_column("kind", existing_type=sa.String(length=16), nullable=False)
        batch.create_check_constraint(
            op.f("ck_rating_history_kind"), "kind IN ('match', 'adjustment')"
        )
        batch.create_check_constraint(
            op.f("ck_rating_history_match_kind"), "(kind = 'match') = (match_seq IS NOT NULL)"
        )
