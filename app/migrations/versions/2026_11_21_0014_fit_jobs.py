"""Jobs of a third kind: ``fit`` (``POST /v1/ladders/{ladder}/fit``), a ladder's parameters
fitted on its own matches in the background, and applied with a rebuild when asked.

Only the jobs' CHECK of the kind changes. On SQLite it is rewritten in the table's schema
text (SQLite's documented ``writable_schema`` way, as 0011 and 0012 change the ladders'
CHECK); ``jobs`` has no key another table refers to, so nothing else is touched.
Downgrading deletes the fit jobs, which the older schema cannot hold.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-21 23:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from app.migrations.checks import replace_check

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD = "kind IN ('void', 'rebuild')"
NEW = "kind IN ('void', 'rebuild', 'fit')"


def upgrade() -> None:
    replace_check("jobs", "kind", OLD, NEW)


def downgrade() -> None:
    op.execute("DELETE FROM jobs WHERE kind = 'fit'")
    replace_check("jobs", "kind", NEW, OLD)
