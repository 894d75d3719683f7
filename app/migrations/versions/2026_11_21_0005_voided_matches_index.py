"""Index the voided matches: a ladder's match count without reading every match.

A ladder's matches that count are all of its matches less the voided ones. The first
number comes from an index-only scan of ``ix_matches_ladder_seq``; the second from this
partial index, which holds the voided matches only (a match enters it when it is voided,
so recording a match writes nothing more). Before, the count read every match row to
check ``voided_at``: about 1.2 microseconds a match, over a second at 1,000,000 matches.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21 17:05:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

VOIDED = sa.text("voided_at IS NOT NULL")


def upgrade() -> None:
    op.create_index(
        "ix_matches_voided",
        "matches",
        ["ladder_id"],
        postgresql_where=VOIDED,
        sqlite_where=VOIDED,
    )


def downgrade() -> None:
    op.drop_index("ix_matches_voided", table_name="matches")
