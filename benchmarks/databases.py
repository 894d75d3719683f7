"""What the database benchmarks share: a fresh database per run, and printing a table."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from app.storage.engine import dispose_engines


@contextmanager
def fresh_database(kind: str, server: str, tag: str) -> Iterator[str]:
    """A new, empty database of ``kind`` ("sqlite" or "postgresql"), removed afterwards:
    a temporary SQLite file, or a database made on the PostgreSQL ``server`` and dropped."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            try:
                yield f"sqlite:///{folder}/bench.db"
            finally:
                dispose_engines()
        return
    if kind != "postgresql":
        raise SystemExit(f"unknown database {kind!r}: sqlite or postgresql")
    import psycopg
    from psycopg import sql

    name = f"ratings_bench_{tag}_{os.getpid()}"
    admin = f"{server.rstrip('/')}/postgres"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield f"{server.rstrip('/')}/{name}"
    finally:
        dispose_engines()
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]], style: str) -> None:
    """Columns aligned (``table``) or a Markdown table (``markdown``)."""
    if style == "markdown":
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in rows:
            print("| " + " | ".join(row) + " |")
        return
    widths = [max(len(str(c)) for c in column) for column in zip(header, *rows, strict=True)]
    for row in [header, *rows]:
        print("  ".join(str(c).rjust(w) for c, w in zip(row, widths, strict=True)))
