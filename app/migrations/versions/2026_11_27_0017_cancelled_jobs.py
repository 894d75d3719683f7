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

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD = "state IN ('queued', 'running', 'succeeded', 'failed')"
NEW = "state IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')"


def _replace_state_check(old: str, new: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        name = op.f("ck_jobs_state")
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
    _replace_state_check(OLD, NEW)


def downgrade() -> None:
    op.execute("UPDATE jobs SET state = 'failed' WHERE state = 'cancelled'")
    _replace_state_check(NEW, OLD)
