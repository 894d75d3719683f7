"""Ladder versions: a counter of each ladder's committed changes, the validator of its reads.

Every transaction that changes a ladder (recording, voiding, rebuilding, seeding, erasing,
changing its parameters) adds 1 to one of the ladder's stripes as its last statement, so a
ladder's version (the sum of its stripes) is the number of changing transactions committed
since it was made, as any snapshot of the database sees them: two snapshots with the same
version hold the same ladder. Writers pick a stripe at random, so concurrent writers of one
ladder rarely wait on the same row. Reads turn the version into their ``ETag``. A ladder
starts with no rows (version 0); the table goes with its ladder.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-24 08:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "ladder_versions",
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.Column("stripe", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["ladder_id"],
            ["ladders.id"],
            name=op.f("fk_ladder_versions_ladder_id_ladders"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("ladder_id", "stripe", name=op.f("pk_ladder_versions")),
    )


def downgrade() -> None:
    op.drop_table("ladder_versions")
