"""SQLite's rating update trigger looks up its ladder's pause before anything else.

A season's opening rewrites its players' ratings in steps with the row triggers paused
for the ladder (``rating_trigger_pauses``, migration 0025); the trigger's condition
looked the pause up last, after computing each row's old and new rank bucket with a
dozen reads of the ladder's row, so a paused update still paid for most of the trigger.
Looked up first, a paused row costs one probe of an empty table: a step's update of
20,000 ratings takes about half the time. The counts are the same either way.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28 00:30:00.000000
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
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


def _sqlite_triggers(pause_first: bool) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    blocks = _blocks_migration()
    for statement in blocks._buckets_migration().SQLITE_DROPS:
        op.execute(statement)
    for statement in blocks._sqlite_triggers(placed=True, pausable=True, pause_first=pause_first):
        op.execute(statement)


def upgrade() -> None:
    _sqlite_triggers(pause_first=True)


def downgrade() -> None:
    _sqlite_triggers(pause_first=False)
