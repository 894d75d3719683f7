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

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD = "kind IN ('void', 'rebuild')"
NEW = "kind IN ('void', 'rebuild', 'fit')"


def _replace_kind_check(old: str, new: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        name = op.f("ck_jobs_kind")
        op.drop_constraint(name, "jobs", type_="check")
        op.create_check_constraint(name, "jobs", new)
        return
    version = bind.exec_driver_sql("PRAGMA schema_version").scalar_one()
    bind.exec_driver_sql("PRAGMA writable_schema = ON")
    changed = bind.execute(
        sa.text(
            "UPDATE sqlite_master SET sql = replace(sql, :old, :new) "
            "WHERE type = 'table' AND name = 'jobs' AND instr(sql, :old) > 0"
        ),
        {"old": old, "new": new},
    ).rowcount
    bind.exec_driver_sql(f"PRAGMA schema_version = {int(version) + 1}")
    bind.exec_driver_sql("PRAGMA writable_schema = OFF")
    if changed != 1:
        raise RuntimeError(f"jobs: {old!r} was not found in its schema")


def upgrade() -> None:
    _replace_kind_check(OLD, NEW)


def downgrade() -> None:
    op.execute("DELETE FROM jobs WHERE kind = 'fit'")
    _replace_kind_check(NEW, OLD)
