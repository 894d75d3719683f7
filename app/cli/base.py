"""What every command shares: the operator's error, one transaction per command (through
the unit of work), and the one-line report of an error meant for the operator."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.errors import ProblemError
from app.storage import unit_of_work
from app.storage.engine import get_engine, schema_is_current, session_factory

T = TypeVar("T")


class CommandError(Exception):
    """A command could not do its work; the message is for the operator."""


def transaction(work: Callable[[Session], T], *, need_schema: bool = True) -> T:
    """Run ``work`` in one transaction of the unit of work (committed when it returns, run
    again after a lost conflict) on the configured database; its value."""
    engine = get_engine()
    if need_schema and not schema_is_current(engine):
        raise CommandError(
            "the database schema is not at the newest migration: run `ratings migrate` first"
        )
    return unit_of_work.run(work, session_factory=session_factory(engine))


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
