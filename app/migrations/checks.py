"""What more than one migration does: kept here once, and never changed once released."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

# The SQL of a rating's bucket is fixed for good: the triggers and the service's reads must
# compute the same bucket forever, so the migrations and the service share one text.
from app.storage.blocks import BUCKET_LIMIT as LIMIT
from app.storage.blocks import bucket_sql

__all__ = ["LIMIT", "bucket_sql", "replace_algorithm_check", "rewrite_ladders_sql"]


def rewrite_ladders_sql(old: str, new: str) -> None:
    """On SQLite, replace ``old`` by ``new`` in the schema text of ``ladders`` (SQLite's
    documented ``writable_schema`` way of changing a CHECK or a declared type): rebuilding
    ``ladders`` as ``batch_alter_table`` does would drop the table every other table
    cascades from."""
    bind = op.get_bind()
    version = bind.exec_driver_sql("PRAGMA schema_version").scalar_one()
    bind.exec_driver_sql("PRAGMA writable_schema = ON")
    changed = bind.execute(
        sa.text(
            "UPDATE sqlite_master SET sql = replace(sql, :old, :new) "
            "WHERE type = 'table' AND name = 'ladders' AND instr(sql, :old) > 0"
        ),
        {"old": old, "new": new},
    ).rowcount
    bind.exec_driver_sql(f"PRAGMA schema_version = {int(version) + 1}")
    bind.exec_driver_sql("PRAGMA writable_schema = OFF")
    if changed != 1:
        raise RuntimeError(f"ladders: {old!r} was not found in its schema")


def replace_algorithm_check(old: str, new: str) -> None:
    """Replace the ladders' CHECK of the algorithm ``old`` by ``new``."""
    if op.get_bind().dialect.name == "sqlite":
        rewrite_ladders_sql(old, new)
        return
    name = op.f("ck_ladders_algorithm")
    op.drop_constraint(name, "ladders", type_="check")
    op.create_check_constraint(name, "ladders", new)
