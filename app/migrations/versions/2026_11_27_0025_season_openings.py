"""Opening a season in short steps: ``season_openings``, the one opening under way
per ladder, and ``ladders.opening_from``, the new season's first history id while it is.

The opening's first transaction moves the ladder into the new season; then steps of
players by id archive the closing season's standings and apply the soft reset (the
cursor ``after_id``), and a last phase ranks the archive in steps (``ranked``). A
recording, a batch or a seed that reaches a player the steps have not reset yet resets
that player first, in its own transaction: a player is not reset yet while no history
row of theirs has an id from ``opening_from`` on (read with the ladder's row, which every
writer locks first). The worker running the steps holds a lease; another takes over when
it runs out.

On SQLite, whose row triggers count every rating's move between rank buckets and blocks
in statements of their own, a step moves its range of ratings out of the counts and back
in with two grouped statements instead: SQLite's update trigger now skips a ladder with a
row in ``rating_trigger_pauses``, which a step writes and deletes inside its own
transaction (no other writer runs meanwhile). PostgreSQL's statement triggers group the
moves already.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-27 21:00:00.000000
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _blocks_migration() -> ModuleType:
    """Migration 0016, whose trigger definitions this one extends."""
    path = Path(__file__).with_name("2026_11_24_0016_rating_blocks.py")
    spec = importlib.util.spec_from_file_location("rating_blocks_0016", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sqlite_triggers(pausable: bool) -> None:
    """SQLite's rating triggers (0016, as 0023 left them), ``pausable`` or not."""
    if op.get_bind().dialect.name != "sqlite":
        return
    blocks = _blocks_migration()
    for statement in blocks._buckets_migration().SQLITE_DROPS:
        op.execute(statement)
    for statement in blocks._sqlite_triggers(placed=True, pausable=pausable):
        op.execute(statement)


def upgrade() -> None:
    # A plain ALTER TABLE (in place on SQLite): a batch copy would drop the rating triggers.
    op.add_column("ladders", sa.Column("opening_from", sa.BigInteger(), nullable=True))
    op.create_table(
        "season_openings",
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.Column("season", sa.Integer(), nullable=False),
        sa.Column("after_id", sa.String(length=128), nullable=False),
        sa.Column("ranked", sa.BigInteger(), nullable=True),
        sa.Column("owner", sa.String(length=64), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["ladder_id"],
            ["ladders.id"],
            name=op.f("fk_season_openings_ladder_id_ladders"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("ladder_id", name=op.f("pk_season_openings")),
    )
    op.create_table(
        "rating_trigger_pauses",
        sa.Column("ladder_id", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("ladder_id", name=op.f("pk_rating_trigger_pauses")),
    )
    _sqlite_triggers(pausable=True)


def downgrade() -> None:
    _sqlite_triggers(pausable=False)
    op.drop_table("rating_trigger_pauses")
    op.drop_table("season_openings")
    op.drop_column("ladders", "opening_from")
