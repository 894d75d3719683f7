"""Webhooks: ``webhooks`` (receivers, each leased by the worker that sends its events),
``webhook_cursors`` (where each stands in each ladder's events) and
``webhook_deliveries`` (each event sent: delivered, retrying or failed).

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-28 04:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _ladder_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["ladder_id"], ["ladders.id"], name=op.f(f"fk_{table}_ladder_id_ladders"), ondelete="CASCADE"
    )


def _hook_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["webhook_id"],
        ["webhooks.id"],
        name=op.f(f"fk_{table}_webhook_id_webhooks"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("ladders", sa.JSON(), nullable=True),
        sa.Column("secret", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("owner", sa.String(length=32), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhooks")),
    )
    op.create_table(
        "webhook_cursors",
        sa.Column("webhook_id", sa.String(length=32), nullable=False),
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.Column("after_seq", sa.BigInteger(), nullable=False),
        _hook_fk("webhook_cursors"),
        _ladder_fk("webhook_cursors"),
        sa.PrimaryKeyConstraint("webhook_id", "ladder_id", name=op.f("pk_webhook_cursors")),
    )
    op.create_table(
        "webhook_deliveries",
        sa.Column("webhook_id", sa.String(length=32), nullable=False),
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.Column("event_seq", sa.BigInteger(), nullable=False),
        sa.Column("event_id", sa.String(length=32), nullable=False),
        sa.Column("event_type", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("first_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('delivered', 'retrying', 'failed')",
            name=op.f("ck_webhook_deliveries_status"),
        ),
        _hook_fk("webhook_deliveries"),
        _ladder_fk("webhook_deliveries"),
        sa.PrimaryKeyConstraint(
            "webhook_id", "ladder_id", "event_seq", name=op.f("pk_webhook_deliveries")
        ),
    )
    op.create_index(
        "ix_webhook_deliveries_latest", "webhook_deliveries", ["webhook_id", "last_attempt_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_webhook_deliveries_latest", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_table("webhook_cursors")
    op.drop_table("webhooks")
