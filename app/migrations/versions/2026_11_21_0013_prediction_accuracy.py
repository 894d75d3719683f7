"""Prediction accuracy: each match's pre-match win probabilities, and each ladder's running
tally of how they scored.

``matches.win_probabilities`` (JSON, one probability per team) is NULL for the matches
recorded before: they had no stored prediction, and the ratings each started from are not
at hand here (a rebuild of the ladder computes them). ``ladder_accuracy`` starts empty,
which is the tally of those matches: none is scored. Added in place on SQLite, so
``matches`` keeps its indexes and its children's foreign keys; the downgrade drops both
again (SQLite's ALTER TABLE DROP COLUMN, 3.35).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-21 23:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BINS = 10
#: The tally's columns as this revision made them (``app.domain.accuracy.FIELDS``).
FIELDS = (
    "matches",
    "pairs",
    "wrong_halves",
    "decided",
    "log_loss",
    "brier",
    *(f"bin{b}_count" for b in range(BINS)),
    *(f"bin{b}_predicted" for b in range(BINS)),
    *(f"bin{b}_won" for b in range(BINS)),
)


def upgrade() -> None:
    op.add_column("matches", sa.Column("win_probabilities", sa.JSON(), nullable=True))
    op.create_table(
        "ladder_accuracy",
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.Column("stripe", sa.Integer(), autoincrement=False, nullable=False),
        *(sa.Column(name, sa.BigInteger(), nullable=False) for name in FIELDS),
        sa.ForeignKeyConstraint(
            ["ladder_id"],
            ["ladders.id"],
            name=op.f("fk_ladder_accuracy_ladder_id_ladders"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("ladder_id", "stripe", name=op.f("pk_ladder_accuracy")),
    )


def downgrade() -> None:
    op.drop_table("ladder_accuracy")
    if op.get_bind().dialect.name == "sqlite":
        op.get_bind().exec_driver_sql("ALTER TABLE matches DROP COLUMN win_probabilities")
    else:
        op.drop_column("matches", "win_probabilities")
