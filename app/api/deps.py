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

from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, TypeVar

from anyio import to_thread
from fastapi import Depends, Path, Query
from fastapi.responses import Response
from pydantic import BaseModel
from sqlalchemy.orm import Session

from app.api.schemas import DEFAULT_PAGE, MAX_PAGE
from app.api.security import Access, require_admin, require_read, require_write
from app.services import ladders
from app.storage import unit_of_work
from app.storage.engine import is_read_only
from app.storage.models import Ladder

T = TypeVar("T")

#: The access of a route that reads, records matches, or configures (admin).
ReadAccess = Annotated[Access, Depends(require_read)]
WriteAccess = Annotated[Access, Depends(require_write)]
AdminAccess = Annotated[Access, Depends(require_admin)]

#: The ladder's id from the path (loaded in the route's transaction: :func:`ladder_of`).
LadderPath = Annotated[str, Path(description="The ladder's id.")]


def ladder_of(session: Session, ladder_id: str) -> Ladder:
    """The ladder named in the path; an unknown one is a 404. A read's is only looked at,
    so it is read without being loaded into the session."""
    return ladders.get_ladder(session=session, ladder_id=ladder_id, detached=is_read_only(session))


def _checked(access: Access, work: Callable[[Session], T], session: Session) -> T:
    access.check(session)
    return work(session)


async def run(access: Access, work: Callable[[Session], T]) -> T:
    """Check the key and run ``work`` in one transaction, committed when it returns (run
    again after a lost conflict), in one trip to the thread pool; its value."""
    return await to_thread.run_sync(
        partial(unit_of_work.run, partial(_checked, access, work), read_only=access.reads)
    )


async def answer(
    access: Access, work: Callable[[Session], BaseModel | str], *, status_code: int = 200
) -> Response:
    """:func:`run`, and the model ``work`` returned as JSON (or its JSON text as it is: a
    stored result document goes out byte for byte). The model is built by the service from
    typed values, so it is rendered without being validated again; the route's
    ``response_model`` documents it."""
    out = await run(access, work)
    text = out if isinstance(out, str) else out.model_dump_json()
    return Response(content=text, status_code=status_code, media_type="application/json")


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
