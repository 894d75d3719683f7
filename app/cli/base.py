"""What every command shares: the operator's error, one transaction per command, and the
one-line report of an error meant for the operator."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.errors import ProblemError
from app.storage.engine import get_engine, schema_is_current, session_factory


class CommandError(Exception):
    """A command could not do its work; the message is for the operator."""


@contextmanager
def session_scope(*, need_schema: bool = True) -> Iterator[Session]:
    """One transaction for a command: committed at the end, rolled back on an error."""
    engine = get_engine()
    if need_schema and not schema_is_current(engine):
        raise CommandError(
            "the database schema is not at the newest migration: run `ratings migrate` first"
        )
    session = session_factory(engine)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def report_errors(step: Callable[[], int]) -> int:
    """Run ``step``; an error meant for the operator is printed on one line, status 1."""
    try:
        return step()
    except (CommandError, ProblemError) as exc:
        print(f"ratings: {exc}", file=sys.stderr)
        return 1
    except OperationalError as exc:
        reason = str(exc.orig or exc).strip().splitlines()[0]
        print(f"ratings: the database is unreachable or refused: {reason}", file=sys.stderr)
        return 1
