"""The API key of a request: FastAPI dependencies that read ``Authorization: Bearer <key>``
and check it (``app.services.auth``) against the scope a route needs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from anyio import to_thread
from fastapi import Depends
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.config import get_settings
from app.errors import Unauthorized
from app.services.auth import SCOPE_RANK, authenticate, too_weak, unknown_key
from app.storage.engine import get_session, mark_read_only
from app.storage.models import ApiKey

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="ratings"'}
_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    description="An API key made with `ratings keys create`: `Authorization: Bearer <key>`.",
)


Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def _missing(needed: str) -> Unauthorized:
    return Unauthorized(
        f"Authorization: this request needs a Bearer key of scope {needed} or higher",
        headers=_CHALLENGE,
    )


def _authorize(
    session: Session, credentials: HTTPAuthorizationCredentials | None, needed: str
) -> ApiKey:
    if credentials is None or not credentials.credentials:
        raise _missing(needed)
    row = authenticate(session, credentials.credentials)
    if row is None:
        raise unknown_key()
    if SCOPE_RANK.get(row.scope, -1) < SCOPE_RANK[needed]:
        raise too_weak(row.prefix, row.scope, needed)
    return row


async def presented_write_key(credentials: Credentials) -> str:
    """FastAPI dependency: the Bearer key of a write request, not yet checked.

    For routes that check it (:func:`app.services.auth.check_key`) in their own trip to the
    thread pool, in the statement that reads their first rows: a missing key is a 401 here,
    at once.
    """
    if credentials is None or not credentials.credentials:
        raise _missing("write")
    return credentials.credentials


def _requirement(needed: str) -> Callable[..., Awaitable[ApiKey | None]]:
    async def dependency(
        credentials: Credentials,
        # The route's own session (same dependency, same scope, so FastAPI hands both the
        # one instance): a second transaction would queue behind the first on SQLite.
        session: Annotated[Session, Depends(get_session, scope="function")],
    ) -> ApiKey | None:
        # Asynchronous, so that open reads and requests without a key are answered without a
        # trip to the thread pool; only the key lookup itself runs in a worker thread.
        if needed == "read":
            # Routes open to read keys only read: on SQLite their transaction then takes no
            # write lock.
            mark_read_only(session)
            if not get_settings().require_read_key:
                return None
        if credentials is None or not credentials.credentials:
            raise _missing(needed)
        return await to_thread.run_sync(_authorize, session, credentials, needed)

    dependency.__name__ = f"require_{needed}"
    dependency.__doc__ = f"FastAPI dependency: a valid key of scope {needed} or higher."
    return dependency


#: Reads: open unless ``RATINGS_REQUIRE_READ_KEY`` is set; then any active key.
require_read = _requirement("read")
#: Recording matches: a key of scope write or admin.
require_write = _requirement("write")
#: Ladder configuration, rating seeds, voiding: an admin key.
require_admin = _requirement("admin")
