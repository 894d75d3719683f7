"""Bound the sigmas of participants and history rows as the ratings table bounds its own.

Every stored sigma is NULL (Elo) or a finite positive number: ``sigma > 0`` alone let
``+inf`` through in these two tables.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-21 13:05:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("participants", "rating_history")
BOUNDED = (
    "(sigma_before IS NULL OR (sigma_before > 0 AND sigma_before <= 1.0e308)) AND "
    "(sigma_after IS NULL OR (sigma_after > 0 AND sigma_after <= 1.0e308))"
)
UNBOUNDED = (
    "(sigma_before IS NULL OR sigma_before > 0) AND (sigma_after IS NULL OR sigma_after > 0)"
)


def _replace(condition: str) -> None:
    for table in TABLES:
        name = op.f(f"ck_{table}_sigma_positive")
        with op.batch_alter_table(table) as batch:
            batch.drop_constraint(name, type_="check")
            batch.create_check_constraint(name, condition)


def upgrade() -> None:
    _replace(BOUNDED)


def downgrade() -> None:
    _replace(UNBOUNDED)
