"""What more than one migration does: kept here once, and never changed once released."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


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


#: Rating buckets are clamped to +-2**53 (exact as doubles and as integers); the outermost
#: two are open-ended.
LIMIT = 2**53


def bucket_sql(value: str, width: str, dialect: str) -> str:
    """SQL for ``floor(value / width)`` clamped to +-LIMIT, never dividing a value below
    the width (PostgreSQL raises on a quotient that underflows or overflows)."""
    low, high = ("GREATEST", "LEAST") if dialect == "postgresql" else ("max", "min")
    if dialect == "postgresql":
        above = f"floor({high}({value}, {LIMIT}.0 * {width}) / {width})"
        below = f"floor({low}({value}, -{LIMIT}.0 * {width}) / {width})"
        cast = "bigint"
    else:
        # SQLite may lack floor(): truncate, then step down where that rounded up.
        q_above = f"({high}({value}, {LIMIT}.0 * {width}) / {width})"
        q_below = f"({low}({value}, -{LIMIT}.0 * {width}) / {width})"
        above = f"CAST({q_above} AS INTEGER)"
        below = f"(CAST({q_below} AS INTEGER) - ({q_below} < CAST({q_below} AS INTEGER)))"
        cast = "INTEGER"
    return (
        f"CAST(CASE WHEN {value} >= {width} THEN {above} WHEN {value} >= 0 THEN 0 "
        f"WHEN {value} >= -{width} THEN -1 ELSE {below} END AS {cast})"
    )
