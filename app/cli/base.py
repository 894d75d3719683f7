"""What every command shares: the operator's error, the database a command works on (named
in every message about it; only ``migrate`` and ``serve`` create one), one transaction per
command (through the unit of work), and the one-line report of an error meant for the
operator."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.config import get_settings
from app.errors import ProblemError
from app.storage import unit_of_work
from app.storage.engine import (
    current_revisions,
    get_engine,
    migration_heads,
    session_factory,
    shown_url,
    sqlite_file,
)

T = TypeVar("T")


class CommandError(Exception):
    """A command could not do its work; the message is for the operator."""


def database() -> str:
    """The configured database as the operator should read it (no password), and whether
    it is the default one."""
    settings = get_settings()
    shown = shown_url(settings.database_url)
    if settings.database_url_is_default:
        return f"{shown} (the default: RATINGS_DATABASE_URL is not set)"
    return shown


def open_database() -> Engine:
    """The configured database's engine, once it is known to exist at the newest schema.

    Never creates a database: a SQLite file that is not there is a ``CommandError`` naming
    it, before anything connects (connecting would make an empty file), and so is a
    database whose schema is not the newest; both say what to run."""
    url = get_settings().database_url
    path = sqlite_file(url)
    if path is not None and not path.exists():
        raise CommandError(
            f"no database at {database()}; `ratings migrate` creates it "
            "(and `ratings serve` before it serves)"
        )
    engine = get_engine(url)
    current, heads = current_revisions(url), migration_heads()
    if current != heads:
        newest = ", ".join(sorted(heads))
        if not current:
            state = "has no schema yet"
        else:
            state = f"is at schema {', '.join(sorted(current))}, not the newest ({newest})"
        raise CommandError(f"the database {database()} {state}: run `ratings migrate` first")
    return engine


def transaction(work: Callable[[Session], T], *, read_only: bool = False) -> T:
    """Run ``work`` in one transaction of the unit of work (committed when it returns, run
    again after a lost conflict) on the configured database (:func:`open_database`); its
    value. ``read_only``: ``work`` only reads (on SQLite it then takes no write lock)."""
    engine = open_database()
    return unit_of_work.run(work, read_only=read_only, session_factory=session_factory(engine))


def transactor() -> unit_of_work.Transact:
    """:func:`transaction` as a ``Transact``, for a service that runs several in turn."""
    return unit_of_work.transactor(session_factory(open_database()))


def report_errors(step: Callable[[], int]) -> int:
    """Run ``step``; an error meant for the operator is printed on one line, status 1."""
    try:
        return step()
    except (CommandError, ProblemError) as exc:
        print(f"ratings: {exc}", file=sys.stderr)
        return 1
    except OperationalError as exc:
        reason = str(exc.orig or exc).strip().splitlines()[0]
        print(
            f"ratings: the database {shown_url(get_settings().database_url)} is unreachable "
            f"or refused: {reason}",
            file=sys.stderr,
        )
        return 1


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Columns of text, each as wide as its widest cell, two spaces apart."""
    table = [tuple(header), *(tuple(row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
