"""What the routers share: the request's access, its one transaction, paging, the time.

Every route has one shape: its access (the Bearer key and the scope it needs: ``ReadAccess``,
``WriteAccess``, ``AdminAccess``) and its inputs, and one call, :func:`answer`, that runs
the key check and the route's work in ONE transaction (``app.storage.unit_of_work``: it
commits, rolls back, and runs the work again after a lost deadlock or serialization
conflict) in ONE trip to the thread pool, and renders what the work returned. The work
loads the ladder it needs with :func:`ladder_of`. Each thread hand-off costs more on a
busy worker than the queries of a short read, so nothing else of a request goes there.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any, TypeVar

import anyio
from anyio import to_thread
from fastapi import Depends, Header
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel
from sqlalchemy.orm import Session

from app.api.security import Access, require_admin, require_read, require_write
from app.config import get_settings
from app.domain.documents.jobs import JobOut
from app.errors import ServiceUnavailable
from app.services import jobs, ladders
from app.services.rerate import Rerating
from app.storage import unit_of_work
from app.storage.engine import SessionLocal, is_read_only, on_postgres, read_session_factory
from app.storage.models import Ladder

T = TypeVar("T")

#: The access of a route that reads, records matches, or configures (admin).
ReadAccess = Annotated[Access, Depends(require_read)]
WriteAccess = Annotated[Access, Depends(require_write)]
AdminAccess = Annotated[Access, Depends(require_admin)]


def ladder_of(session: Session, ladder_id: str) -> Ladder:
    """The ladder named in the path; an unknown one is a 404. A read's is only looked at,
    so it is read without being loaded into the session."""
    return ladders.get_ladder(session=session, ladder_id=ladder_id, detached=is_read_only(session))


def _checked(access: Access, work: Callable[[Session], T], session: Session) -> T:
    access.check(session)
    return work(session)


#: Threads of a worker's pool that SQLite's writers may hold at once (each waits its turn
#: for the one write lock in a thread): the rest stay for reads, which never wait for it.
SQLITE_WRITE_THREADS = 4

_write_threads: dict[int, anyio.Semaphore] = {}


def _write_threads_of_this_loop() -> anyio.Semaphore:
    loop = id(asyncio.get_running_loop())
    semaphore = _write_threads.get(loop)
    if semaphore is None:
        semaphore = _write_threads[loop] = anyio.Semaphore(SQLITE_WRITE_THREADS)
    return semaphore


async def run(
    access: Access,
    work: Callable[[Session], T],
    *,
    read_only: bool = False,
    bulk: bool = False,
) -> T:
    """Check the key and run ``work`` in one transaction, committed when it returns (run
    again after a lost conflict), in one trip to the thread pool; its value. ``read_only``:
    an admin route that only reads (a read route is one already). ``bulk``: a large write
    (a batch), which on SQLite lets small writes go first (``engine.TurnLock``).

    On SQLite a write waits for a thread of its own among :data:`SQLITE_WRITE_THREADS`
    first (at most the busy timeout, then 503), so that writers queued behind a long one
    never hold every thread of the pool: reads and ``/readyz`` keep theirs."""
    reads = access.reads or read_only
    call = partial(
        unit_of_work.run,
        partial(_checked, access, work),
        read_only=reads,
        bulk=bulk,
        session_factory=(
            read_session_factory(primary=access.primary) if access.reads else SessionLocal
        ),
    )
    if reads or on_postgres(get_settings().database_url):
        return await to_thread.run_sync(call)
    semaphore = _write_threads_of_this_loop()
    acquired = False
    with anyio.move_on_after(max(get_settings().sqlite_busy_timeout_ms, 1) / 1000):
        await semaphore.acquire()
        acquired = True
    if not acquired:
        raise ServiceUnavailable(
            "database: busy with other writes; retry shortly", headers={"Retry-After": "1"}
        )
    try:
        return await to_thread.run_sync(call)
    finally:
        semaphore.release()


async def answer(
    access: Access,
    work: Callable[[Session], BaseModel | str],
    *,
    status_code: int = 200,
    read_only: bool = False,
) -> Response:
    """:func:`run`, and the model ``work`` returned as JSON (or its JSON text as it is: a
    stored result document goes out byte for byte). The model is built by the service from
    typed values, so it is rendered without being validated again; the route's
    ``response_model`` documents it."""
    out = await run(access, work, read_only=read_only)
    text = out if isinstance(out, str) else out.model_dump_json()
    return Response(content=text, status_code=status_code, media_type="application/json")


async def stream(
    access: Access, work: Callable[[Session], Iterator[bytes]], *, media_type: str
) -> StreamingResponse:
    """The chunks ``work`` yields, as the body of the answer, read in one snapshot
    (:func:`unit_of_work.streamed`). The key is checked and the first chunk read before the
    answer starts, so a 401, 403 or 404 is answered as any route's; each later chunk is
    read in the thread pool as the client takes the one before (memory: a chunk's), and a
    client that goes away ends the transaction."""
    chunks = unit_of_work.streamed(partial(_checked_chunks, access, work))
    first = await to_thread.run_sync(next, chunks, None)

    async def body() -> AsyncIterator[bytes]:
        try:
            if first is None:
                return
            yield first
            while (chunk := await to_thread.run_sync(next, chunks, None)) is not None:
                yield chunk
        finally:
            with anyio.CancelScope(shield=True):
                await to_thread.run_sync(chunks.close)

    return StreamingResponse(body(), media_type=media_type)


def _checked_chunks(
    access: Access, work: Callable[[Session], Iterator[bytes]], session: Session
) -> Iterator[bytes]:
    access.check(session)
    yield from work(session)


#: ``Prefer`` (RFC 7240) of a route that may re-rate many matches.
PreferHeader = Annotated[
    str | None,
    Header(
        max_length=1024,
        description="`respond-async`: answer at once with `202 Accepted` and a job to poll "
        "(`Location: /v1/jobs/{id}`), however few matches the re-rating takes.",
    ),
]


def prefers_async(prefer: str | None) -> bool:
    """Whether a ``Prefer`` header asks for ``respond-async`` (RFC 7240: comma-separated
    preferences, each a token with optional ``=value`` and ``;`` parameters)."""
    return any(
        part.split(";", 1)[0].split("=", 1)[0].strip().lower() == "respond-async"
        for part in (prefer or "").split(",")
    )


#: What ``202 Accepted`` of a re-rating route is (its OpenAPI ``responses``).
ACCEPTED: dict[int | str, dict[str, Any]] = {
    202: {
        "model": JobOut,
        "description": "The re-rating runs in the background as a job (it was asked with "
        "`Prefer: respond-async`, re-rates more matches than `RATINGS_REBUILD_INLINE_MAX`, "
        "or its ladder has a job pending); poll `Location` (`GET /v1/jobs/{id}`).",
        "headers": {
            "Location": {"description": "The job: `/v1/jobs/{id}`.", "schema": {"type": "string"}},
            "Preference-Applied": {
                "description": "`respond-async` when it was asked for.",
                "schema": {"type": "string"},
            },
        },
    }
}


async def rerating(
    access: Access,
    plan: Callable[[Session], Rerating | BaseModel | None],
    inline: Callable[[Session], BaseModel],
    *,
    prefer: str | None,
    now: datetime,
) -> Response:
    """A re-rating route (void, rebuild): in one transaction, ``plan`` looks at it (its
    404, 409 or 422 come at once; a model is the answer as it is). A large one (more than
    ``RATINGS_REBUILD_INLINE_MAX`` matches), one asked with ``Prefer: respond-async``, or
    one of a ladder with a job pending becomes a job, started once committed: 202 with
    the job and ``Location``. Any other runs ``inline`` in that same transaction: 200."""
    wants_async = prefers_async(prefer)
    inline_max = get_settings().rebuild_inline_max

    def work(session: Session) -> BaseModel:
        planned = plan(session)
        if isinstance(planned, BaseModel):
            return planned
        if planned is not None and (
            wants_async
            or planned.size > inline_max
            or jobs.pending(session=session, ladder_id=planned.ladder_id, now=now)
        ):
            return jobs.submit(session=session, rerating=planned, now=now)
        return inline(session)

    out = await run(access, work)
    if not isinstance(out, JobOut):
        return Response(content=out.model_dump_json(), media_type="application/json")
    jobs.start(out.id, transact=unit_of_work.transactor())
    headers = {"Location": f"/v1/jobs/{out.id}", "Retry-After": "1"}
    if wants_async:
        headers["Preference-Applied"] = "respond-async"
    return Response(
        content=out.model_dump_json(),
        status_code=202,
        headers=headers,
        media_type="application/json",
    )


async def utc_now() -> datetime:
    # Asynchronous: a plain function dependency would cost a trip to the thread pool.
    return datetime.now(UTC)


#: The request's time (one value for everything the request writes).
NowDep = Annotated[datetime, Depends(utc_now)]
