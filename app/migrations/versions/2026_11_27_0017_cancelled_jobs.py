"""Jobs that were cancelled (``DELETE /v1/jobs/{id}``): a fifth state, ``cancelled``.

Only the jobs' CHECK of the state changes, in the same way 0014 changed the CHECK of the
kind (on SQLite in the table's schema text). Downgrading writes the cancelled jobs as
failed, which the older schema can hold.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27 12:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from app.migrations.checks import replace_check

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD = "state IN ('queued', 'running', 'succeeded', 'failed')"
NEW = "state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')"


def upgrade() -> None:
    replace_check("jobs", "state", OLD, NEW)


def downgrade() -> None:
    op.execute("UPDATE jobs SET state = 'failed' WHERE state = 'cancelled'")
    replace_check("jobs", "state", NEW, OLD)
