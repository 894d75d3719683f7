"""The one place a transaction is begun, committed, rolled back and run again.

:func:`run` hands ``work`` a new session, commits what it did when it returns and rolls
back when it raises. A transaction that lost a deadlock (SQLSTATE 40P01) or a serialization
conflict (40001), or that found SQLite's database locked, was rolled back whole, so nothing
of it was applied: ``run`` runs ``work`` again from the start, at most
:data:`app.storage.retry.MAX_ATTEMPTS` times in all, after a short random pause, and counts each new
run in ``ratings_transaction_retries_total`` by reason. Services and repositories never
commit. Just before the commit, every ladder the transaction changed gets its next version
(:mod:`app.storage.versions`), the validator of the ladder's reads, and then the events it
emitted are numbered and written (:mod:`app.storage.outbox`). After the commit, now
and then, a changed ladder's rating blocks that grew large are cut (:mod:`app.storage.blocks`)
in a transaction of their own.

On SQLite a writing transaction is one turn of the process's writers
(:func:`app.storage.engine.writer_turn`), taken before ``BEGIN IMMEDIATE`` and given back after the
commit or rollback. Where reads go to a replica, a write's commit is noted with where the
primary's log then stood (:mod:`app.storage.consistency`), the token of its answer.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Generator, Iterable, Iterator
from functools import partial
from typing import Protocol, TypeVar

from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from app.storage import blocks, consistency, outbox, versions
from app.storage.engine import (
    SessionLocal,
    mark_bulk,
    mark_read_only,
    snapshot_reads,
    writer_turn,
)
from app.storage.retry import BACKOFF_S, MAX_ATTEMPTS, RETRIES, retry_reason

T = TypeVar("T")

_log = logging.getLogger(__name__)


def run(
    work: Callable[[Session], T],
    *,
    read_only: bool = False,
    bulk: bool = False,
    attempts: int = MAX_ATTEMPTS,
    session_factory: Callable[[], Session] = SessionLocal,
) -> T:
    """``work(session)`` in one transaction, committed when it returns; run again (bounded,
    counted) when the transaction lost a conflict. Blocking: call it from a worker thread."""
    for attempt in range(1, attempts + 1):
        session = session_factory()
        if read_only:
            mark_read_only(session)
        if bulk:
            mark_bulk(session)
        try:
            with writer_turn(session):
                try:
                    answer = work(session)
                    changed = versions.bump(session)
                    outbox.flush(session)
                    thorough = bulk or blocks.was_filled(session)
                    session.commit()
                except BaseException:
                    session.rollback()
                    raise
            if not read_only and consistency.wanted():
                consistency.note_commit(session)
            _tend_blocks(changed, session_factory, thorough=thorough)
            return answer
        except DBAPIError as exc:
            reason = retry_reason(exc.orig) if exc.orig is not None else None
            if reason is None or attempt == attempts:
                raise
            RETRIES.labels(reason=reason).inc()
        finally:
            session.close()
        time.sleep(random.uniform(0.0, BACKOFF_S * attempt))
    raise AssertionError("unreachable: the last attempt returns or raises")


def streamed(
    work: Callable[[Session], Iterator[T]],
    *,
    session_factory: Callable[[], Session] = SessionLocal,
) -> Generator[T, None, None]:
    """What ``work(session)`` yields, read in one read-only transaction that sees one
    snapshot of the database from its first statement to its last (an export: every page
    of it as of one moment, whatever commits meanwhile), ended when the iteration ends or
    is closed (a client that went away). Not run again on a conflict: what was yielded is
    gone. Each step blocks: iterate it from a worker thread."""
    session = session_factory()
    mark_read_only(session)
    try:
        snapshot_reads(session)
        yield from work(session)
    finally:
        session.rollback()
        session.close()


class Transact(Protocol):
    """Runs ``work`` in one transaction of its own (:func:`run` bound to a database): what
    a caller hands a use case that needs transactions of its own (a job, an import, a
    fit), which never opens one itself."""

    def __call__(
        self, work: Callable[[Session], T], /, *, read_only: bool = False, bulk: bool = False
    ) -> T: ...


def transactor(session_factory: Callable[[], Session] = SessionLocal) -> Transact:
    """:func:`run` on the database of ``session_factory`` (the settings' by default)."""

    def transact(
        work: Callable[[Session], T], /, *, read_only: bool = False, bulk: bool = False
    ) -> T:
        return run(work, read_only=read_only, bulk=bulk, session_factory=session_factory)

    return transact


def _tend_blocks(
    ladders: Iterable[str], session_factory: Callable[[], Session], *, thorough: bool = False
) -> None:
    """Cut the full rating blocks of the ladders a commit changed, when :func:`blocks.due`
    picks the commit; after a commit that wrote many ratings (``thorough``: a bulk write,
    or one that said :func:`blocks.filled`), until none is full, in rounds of
    :func:`blocks.cut_full`, each its own transaction. The commit stands whatever happens
    here: a failure is logged, and a later commit tries again."""
    for ladder_id in sorted(ladders):
        if not (thorough or blocks.due(ladder_id)):
            continue
        try:
            for _ in range(blocks.FILLED_ROUNDS if thorough else 1):
                cut = run(
                    partial(blocks.cut_full, ladder_id=ladder_id), session_factory=session_factory
                )
                if not cut:
                    break
        except Exception:
            _log.exception("cutting the rating blocks of ladder %r failed", ladder_id)
