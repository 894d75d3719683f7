"""What more than one migration does: kept here once, and never changed once released."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

# The SQL of a rating's bucket is fixed for good: the triggers and the service's reads must
# compute the same bucket forever, so the migrations and the service share one text.
from app.storage.blocks import BUCKET_LIMIT as LIMIT
from app.storage.blocks import bucket_sql

__all__ = [
    "LIMIT",
    "bucket_sql",
    "replace_algorithm_check",
    "replace_check",
    "rewrite_ladders_sql",
    "rewrite_table_sql",
]


def rewrite_table_sql(table: str, old: str, new: str) -> None:
    """On SQLite, replace ``old`` by ``new`` in the schema text of ``table`` (SQLite's
    documented ``writable_schema`` way of changing a CHECK or a declared type): rebuilding
    a table as ``batch_alter_table`` does would drop the table others cascade from."""
    bind = op.get_bind()
    version = bind.exec_driver_sql("PRAGMA schema_version").scalar_one()
    bind.exec_driver_sql("PRAGMA writable_schema = ON")
    changed = bind.execute(
        sa.text(
            "UPDATE sqlite_master SET sql = replace(sql, :old, :new) "
            "WHERE type = 'table' AND name = :table AND instr(sql, :old) > 0"
        ),
        {"old": old, "new": new, "table": table},
    ).rowcount
    bind.exec_driver_sql(f"PRAGMA schema_version = {int(version) + 1}")
    bind.exec_driver_sql("PRAGMA writable_schema = OFF")
    if changed != 1:
        raise RuntimeError(f"{table}: {old!r} was not found in its schema")


def rewrite_ladders_sql(old: str, new: str) -> None:
    """:func:`rewrite_table_sql` of ``ladders``."""
    rewrite_table_sql("ladders", old, new)


def replace_check(table: str, name: str, old: str, new: str) -> None:
    """Replace the CHECK ``name`` (its short name, as the naming convention completes it)
    of ``table``, ``old``, by ``new``."""
    if op.get_bind().dialect.name == "sqlite":
        rewrite_table_sql(table, old, new)
        return
    constraint = op.f(f"ck_{table}_{name}")
    op.drop_constraint(constraint, table, type_="check")
    op.create_check_constraint(constraint, table, new)


def replace_algorithm_check(old: str, new: str) -> None:
    """Replace the ladders' CHECK of the algorithm ``old`` by ``new``."""
    replace_check("ladders", "algorithm", old, new)
