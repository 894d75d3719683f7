"""Jobs: long re-ratings (voids, rebuilds with new parameters) run in the background.

A void or a rebuild over many matches outlasts an HTTP request behind a load balancer's
timeout; it becomes a job that the worker which accepted it runs in a transaction of its
own, while clients poll ``GET /v1/jobs/{id}``. The row holds what to run, its state and
progress, the worker running it with its last heartbeat, and the result or the error.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-21 19:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.Column("request", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("owner", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('void', 'rebuild')", name=op.f("ck_jobs_kind")),
        sa.CheckConstraint(
            "state IN ('queued', 'running', 'succeeded', 'failed')", name=op.f("ck_jobs_state")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    op.create_index("ix_jobs_ladder_id", "jobs", ["ladder_id", "state"])


def downgrade() -> None:
    op.drop_index("ix_jobs_ladder_id", table_name="jobs")
    op.drop_table("jobs")
