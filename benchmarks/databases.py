"""What the database benchmarks share: a fresh database per run, a big ladder in it,
printing a table, and the HTTP benchmark's helpers."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session, sessionmaker

from app.domain.documents.ladders import LadderCreate
from app.services import ladders
from app.storage.engine import dispose_engines, get_engine, session_factory, upgrade


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


def http_benchmark() -> Any:
    """``benchmarks/http.py`` as a module (``bench_http``): its name is the standard
    library's ``http``, so it cannot be imported by name."""
    spec = importlib.util.spec_from_file_location("bench_http", Path(__file__).parent / "http.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def big_ladder(url: str, body: LadderCreate, players: int) -> sessionmaker[Session]:
    """The database at ``url`` migrated, the ladder of ``body`` made in it and given
    ``players`` rated players of one match each, written straight into ``ratings``
    (``benchmarks/http.py``'s rows); the database's sessions."""
    upgrade(url)
    sessions = session_factory(get_engine(url))
    with sessions() as session:
        ladders.create_ladder(session=session, body=body, now=datetime.now(UTC))
        session.commit()
    http = http_benchmark()
    http.insert_ratings(url, body.id, http.big_ratings(players, 1))
    return sessions


def without_timeout(session: Session, url: str) -> None:
    """No statement timeout for the rest of the session's transaction (PostgreSQL): a
    benchmark's setup that rewrites a million rows runs past the service's."""
    if url.startswith("postgresql"):
        session.execute(text("SET LOCAL statement_timeout = 0"))
