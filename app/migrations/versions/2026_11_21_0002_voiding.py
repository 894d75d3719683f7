"""Voided matches: ``matches.voided_at``, and an index to find a match's history rows.

A voided match stays recorded (and listed, marked as voided) but no longer counts; the
matches after it are re-rated. Re-rating rewrites the history rows of those matches, found
by ``match_seq``.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21 11:45:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('matches') as batch:
        batch.add_column(sa.Column('voided_at', sa.DateTime(timezone=True), nullable=True))
    op.create_index('ix_rating_history_match_seq', 'rating_history', ['match_seq'])


def downgrade() -> None:
    op.drop_index('ix_rating_history_match_seq', table_name='rating_history')
    with op.batch_alter_table('matches') as batch:
        batch.drop_column('voided_at')
