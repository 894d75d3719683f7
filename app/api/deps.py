"""Dependencies shared by the routers: the request's session, the ladder, paging."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, TypeVar

from anyio import to_thread
from fastapi import Depends, Path, Query
from fastapi.responses import Response
from pydantic import BaseModel
from sqlalchemy.orm import Session

from app.api.schemas import DEFAULT_PAGE, MAX_PAGE
from app.api.security import presented_write_key, require_admin, require_read, require_write
from app.services import ladders
from app.storage.engine import get_session, is_read_only
from app.storage.models import Ladder

T = TypeVar("T")

#: The request's session. Function scope: the transaction commits before the response is
#: sent, so a client that has its 201 can read what it wrote.
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


def _ladder(
    session: SessionDep,
    ladder: Annotated[str, Path(description="The ladder's id.")],
) -> Ladder:
    return ladders.get_ladder(session=session, ladder_id=ladder)


#: The ladder named in the path; an unknown one is a 404.
LadderDep = Annotated[Ladder, Depends(_ladder)]

#: The ladder's id from the path, for routes that load it in their own worker thread
#: (:func:`answer`).
LadderPath = Annotated[str, Path(description="The ladder's id.")]


async def answer(
    session: Session,
    ladder_id: str,
    work: Callable[[Ladder], BaseModel],
    *,
    status_code: int = 200,
) -> Response:
    """Load the ladder, run ``work`` on it, commit, and render the model it returns as JSON,
    all in ONE trip to the thread pool.

    A plain route with ``LadderDep`` costs a trip for the ladder, one for the route, one for
    FastAPI's check of the returned model and one for the commit; each trip is a thread
    hand-off, which on a busy worker costs more than the queries of a short read. The model
    returned is built by the service from typed values, so it is rendered without being
    validated again; the route's ``response_model`` still documents it.
    """

    def run() -> str:
        # A read route's session is marked read-only by its key check: the ladder is then
        # only looked at, and read without loading it into the session.
        ladder = ladders.get_ladder(
            session=session, ladder_id=ladder_id, detached=is_read_only(session)
        )
        text = work(ladder).model_dump_json()
        session.commit()
        return text

    text = await to_thread.run_sync(run)
    return Response(content=text, status_code=status_code, media_type="application/json")


#: Route guards (``dependencies=[...]``): reads, match recording, configuration.
READ = [Depends(require_read)]
WRITE = [Depends(require_write)]
ADMIN = [Depends(require_admin)]

#: The Bearer key of a write request, for a route that checks it in its own worker trip
#: (the group writer, ``app.api.writer``); a missing key is a 401 at once.
WriteKey = Annotated[str, Depends(presented_write_key)]

Limit = Annotated[
    int, Query(ge=1, le=MAX_PAGE, description=f"Entries per page (at most {MAX_PAGE}).")
]
Cursor = Annotated[
    str | None,
    Query(max_length=1024, description="`next_cursor` of the previous page."),
]
LIMIT_DEFAULT = DEFAULT_PAGE


async def utc_now() -> datetime:
    # Asynchronous: a plain function dependency would cost a trip to the thread pool.
    return datetime.now(UTC)


#: The request's time (one value for everything the request writes).
NowDep = Annotated[datetime, Depends(utc_now)]
