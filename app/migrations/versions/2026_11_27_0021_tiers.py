"""Tiers: ``ladders.tiers`` holds a ladder's tiers (JSON: name and min, highest first), or
NULL for none.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-27 16:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ALTER TABLE (SQLite adds the column in place): a batch copy of ``ladders``
    # would trip the rating triggers that name it.
    op.add_column("ladders", sa.Column("tiers", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("ladders", "tiers")
