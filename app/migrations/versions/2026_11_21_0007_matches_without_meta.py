"""Matches without a ``meta`` column: a match's meta is kept in its canonical request.

``matches.request`` (the canonical request, what a match is replayed from) holds the meta
as sent, and the result document holds it too; the column was a third copy. Re-rating
takes it from the request.

The column is dropped in place (``ALTER TABLE ... DROP COLUMN``, SQLite 3.35 or newer),
not by batch mode's copy of the table: on SQLite, with foreign keys on, dropping the old
``matches`` table would cascade its delete to every participant and history row.

Downgrading puts it back from the requests (``null``: no meta, as it was stored).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-21 18:20:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_column("matches", "meta")


def downgrade() -> None:
    op.add_column("matches", sa.Column("meta", sa.JSON(), nullable=True))
    if op.get_bind().dialect.name == "sqlite":
        op.execute("UPDATE matches SET meta = coalesce(json_extract(request, '$.meta'), 'null')")
    else:
        op.execute("UPDATE matches SET meta = coalesce(request -> 'meta', 'null')")
