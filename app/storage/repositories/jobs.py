"""Jobs as stored (``jobs``): added, read, and written while they run and when they end."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    insert,
    select,
    text,
    update,
)
from sqlalchemy.orm import Session

from app.storage.models import (
    Job,
)
from app.storage.repositories.sql import dialect_of

#: The states of a job that has not ended.
UNFINISHED = ("queued", "running")


class JobRow(NamedTuple):
    id: str
    kind: str
    ladder_id: str
    request: dict[str, Any]
    state: str
    done: int
    total: int | None
    result: dict[str, Any] | None
    error: dict[str, Any] | None
    owner: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime


def _job_columns() -> tuple[Any, ...]:
    return tuple(getattr(Job, name) for name in JobRow._fields)


def add_job(*, session: Session, row: Mapping[str, Any]) -> None:
    session.execute(insert(Job).values(**row))


def get_job(*, session: Session, job_id: str) -> JobRow | None:
    row = session.execute(select(*_job_columns()).where(Job.id == job_id)).first()
    return None if row is None else JobRow(*row)


def job_documents(
    *, session: Session, ladder_id: str
) -> list[tuple[str, dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]]:
    """Every job of the ladder: its id, request, result and problem."""
    query = select(Job.id, Job.request, Job.result, Job.error).where(Job.ladder_id == ladder_id)
    return [(str(a), b, c, d) for a, b, c, d in session.execute(query)]


def rewrite_job_documents(*, session: Session, rows: Sequence[Mapping[str, Any]]) -> None:
    """Write jobs' ``request``, ``result`` and ``error`` by ``id``."""
    if rows:
        session.execute(update(Job), [dict(row) for row in rows])


def unfinished_jobs(*, session: Session, ladder_id: str) -> list[JobRow]:
    """The ladder's jobs that have not ended (queued or running; stale ones too)."""
    query = select(*_job_columns()).where(Job.ladder_id == ladder_id, Job.state.in_(UNFINISHED))
    return [JobRow(*row) for row in session.execute(query)]


def every_unfinished_job(*, session: Session) -> list[JobRow]:
    """Every job that has not ended, of every ladder (the reaper's round)."""
    query = select(*_job_columns()).where(Job.state.in_(UNFINISHED))
    return [JobRow(*row) for row in session.execute(query)]


def backend_pid(*, session: Session) -> int | None:
    """The PostgreSQL server process behind the connection this transaction uses (None
    on SQLite)."""
    if dialect_of(session) != "postgresql":
        return None
    return int(session.scalar(text("SELECT pg_backend_pid()")) or 0) or None


def cancel_backend_statement(*, session: Session, pid: int) -> None:
    """Cancel what PostgreSQL's server process ``pid`` is running (its transaction then
    fails and rolls back): a cancelled job's statement."""
    session.execute(text("SELECT pg_cancel_backend(:pid)"), {"pid": pid})


def update_unfinished_job(
    *, session: Session, job_id: str, values: Mapping[str, Any], beat_before: datetime | None = None
) -> bool:
    """Write ``values`` into the job if it has not ended (and, with ``beat_before``, if its
    last heartbeat is older than that); whether it had not."""
    condition = [Job.id == job_id, Job.state.in_(UNFINISHED)]
    if beat_before is not None:
        condition.append(Job.heartbeat_at < beat_before)
    outcome = session.execute(update(Job).where(*condition).values(**values))
    return bool(getattr(outcome, "rowcount", 0))
