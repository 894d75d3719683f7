"""The API key of a request: FastAPI dependencies that read ``Authorization: Bearer <key>``
and check it (``app.services.auth``) against the scope a route needs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from app.config import get_settings
from app.errors import Unauthorized
from app.services.auth import SCOPE_RANK, authenticate, console_key, too_weak, unknown_key
from app.storage import unit_of_work
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


def _authorize(session: Session, key: str, needed: str) -> ApiKey:
    row = authenticate(session, key, transact=unit_of_work.transactor())
    if row is None:
        raise unknown_key()
    if SCOPE_RANK.get(row.scope, -1) < SCOPE_RANK[needed]:
        raise too_weak(row.prefix, row.scope, needed)
    return row


@dataclass(frozen=True, slots=True)
class Access:
    """A request's Bearer key, not yet checked, and the scope its route needs. The key is
    checked in the route's own transaction (:meth:`check`, ``app.api.deps.answer``), so
    a request costs one trip to the thread pool; a missing key is a 401 at once. ``key``
    is None on a read open to all (``RATINGS_REQUIRE_READ_KEY`` false)."""

    key: str | None
    needed: str
    #: A read asked for the primary database (``Ratings-Read-From: primary``), not a replica.
    primary: bool = False
    #: A console session's token (its cookie) in place of a key: it reads with its key.
    console_token: str | None = None

    @property
    def reads(self) -> bool:
        """Whether the route only reads (on SQLite its transaction takes no write lock)."""
        return self.needed == "read"

    def check(self, session: Session) -> None:
        """The key allows the route, or its 401 or 403."""
        if self.key is not None:
            _authorize(session, self.key, self.needed)
        elif self.console_token is not None:
            row = console_key(session, self.console_token)
            if row is None:
                raise unknown_key()
            if SCOPE_RANK.get(row.scope, -1) < SCOPE_RANK[self.needed]:
                raise too_weak(row.prefix, row.scope, self.needed)


def access_of(presented: str, needed: str, *, primary: bool = False) -> Access:
    """The access of a request that presented the Bearer key ``presented`` ("" for none)
    to a route of scope ``needed``; a missing key where one is needed is a 401 at once."""
    if not presented:
        if needed == "read" and not get_settings().require_read_key:
            return Access(None, needed, primary)
        raise _missing(needed)
    # A key presented on an open read is checked too: an unknown or revoked one is a 401
    # (a client must learn its key is wrong before the day reads need one).
    return Access(presented, needed, primary)


def console_access(token: str) -> Access:
    """The access of a console page read with the session ``token`` of its cookie ("" for
    none): none needed while reads are open; a 401 at once where one is needed."""
    if not token:
        return access_of("", "read")
    return Access(None, "read", console_token=token)


def bearer_key(authorization: str | None) -> str:
    """The key of an ``Authorization`` header, read as FastAPI's ``HTTPBearer`` reads it;
    "" when there is none (no header, another scheme, nothing after the scheme)."""
    scheme, _, credentials = (authorization or "").partition(" ")
    credentials = credentials.strip()
    if not (scheme and credentials) or scheme.lower() != "bearer":
        return ""
    return credentials


#: ``Ratings-Read-From``: ``primary`` sends a read to the primary database when reads go to
#: a replica (``RATINGS_READ_DATABASE_URL``).
ReadFrom = Annotated[
    str | None,
    Header(
        alias="Ratings-Read-From",
        description="`primary`: read from the primary database rather than the read "
        "replica (a client reading its own write); any other value, and this header "
        "without a replica, changes nothing.",
    ),
]


def _access(needed: str) -> Callable[..., Awaitable[Access]]:
    async def dependency(credentials: Credentials) -> Access:
        # Asynchronous: no trip to the thread pool; the key is checked in the route's
        # transaction.
        return access_of(credentials.credentials if credentials is not None else "", needed)

    dependency.__name__ = f"require_{needed}"
    dependency.__doc__ = f"FastAPI dependency: the Bearer key of a route of scope {needed}."
    return dependency


async def require_read(credentials: Credentials, read_from: ReadFrom = None) -> Access:
    """FastAPI dependency: the Bearer key of a read (open unless
    ``RATINGS_REQUIRE_READ_KEY`` is set; then any active key), and the database it reads."""
    presented = credentials.credentials if credentials is not None else ""
    return access_of(presented, "read", primary=read_from == "primary")


#: Recording matches: a key of scope write or admin.
require_write = _access("write")
#: Ladder configuration, rating seeds, voiding: an admin key.
require_admin = _access("admin")
