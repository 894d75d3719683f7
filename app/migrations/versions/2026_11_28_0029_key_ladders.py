"""Keys limited to some ladders: ``api_keys.ladders``, the JSON text of the ladder ids a
key is good for (null: every ladder).

Revision ID: 0029
Revises: 0028
Create Date: 2026-11-28 05:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("ladders", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("ladders")
