"""A ladder's default season reset: ``ladders.season_keep``, the ``keep`` factor a new
season uses when its request names none (1: ratings carry over unchanged).

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-27 17:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain ALTER TABLE (SQLite adds the column in place): a batch copy of ``ladders``
    # would trip the rating triggers that name it. The range is checked by the API.
    op.add_column(
        "ladders", sa.Column("season_keep", sa.Float(), server_default="1.0", nullable=False)
    )


def downgrade() -> None:
    op.drop_column("ladders", "season_keep")
