"""The rest of the Weng-Lin family as ladder algorithms: ``bradley_terry_full``,
``bradley_terry_part``, ``thurstone_mosteller_full`` and ``thurstone_mosteller_part``.

Their ratings are a mean and a deviation, as Plackett-Luce's, so only the ladders' CHECK
of the algorithm changes, and the algorithm column widens to 32 characters for the
longest name. On SQLite both are rewritten in the schema text, as 0011 rewrites the
CHECK. Downgrading deletes the ladders of these
algorithms (with their ratings and matches), which the older schema cannot hold.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-21 22:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from app.migrations.checks import replace_algorithm_check, rewrite_ladders_sql

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAMES = (
    "bradley_terry_full",
    "bradley_terry_part",
    "thurstone_mosteller_full",
    "thurstone_mosteller_part",
)
OLD = "algorithm IN ('trueskill', 'plackett_luce', 'elo', 'glicko2')"
NEW = (
    "algorithm IN ('trueskill', 'plackett_luce', 'elo', 'glicko2', 'bradley_terry_full', "
    "'bradley_terry_part', 'thurstone_mosteller_full', 'thurstone_mosteller_part')"
)

def _widen(old: int, new: int) -> None:
    if op.get_bind().dialect.name == "sqlite":
        rewrite_ladders_sql(f"algorithm VARCHAR({old})", f"algorithm VARCHAR({new})")
    else:
        op.alter_column("ladders", "algorithm", type_=sa.String(new), existing_nullable=False)


def upgrade() -> None:
    _widen(16, 32)
    replace_algorithm_check(OLD, NEW)


def downgrade() -> None:
    names = ", ".join(f"'{name}'" for name in NAMES)
    op.execute(f"DELETE FROM ladders WHERE algorithm IN ({names})")
    replace_algorithm_check(NEW, OLD)
    _widen(32, 16)
