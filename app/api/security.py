"""The API key of a request: FastAPI dependencies that read ``Authorization: Bearer <key>``
and check it (``app.services.auth``) against the scope a route needs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.security import HTTPBearer
from sqlalchemy.orm import Session

from app.api.consistency import ConsistencyToken, reads_primary
from app.config import get_settings
from app.errors import Unauthorized
from app.services.auth import authorize, console_key
from app.storage import unit_of_work

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="ratings"'}


def bearer_key(authorization: str | None) -> str:
    """The key of an ``Authorization`` header ("" when there is none: no header, another
    scheme, nothing after the scheme). The API's one reading of it: the routes', the read
    path's, the body gate's and the rate limiter's."""
    scheme, _, credentials = (authorization or "").partition(" ")
    credentials = credentials.strip()
    if not (scheme and credentials) or scheme.lower() != "bearer":
        return ""
    return credentials


class _BearerKey(HTTPBearer):
    """FastAPI's Bearer scheme, for the OpenAPI document; the key read by
    :func:`bearer_key`."""

    async def __call__(self, request: Request) -> str:  # type: ignore[override]
        return bearer_key(request.headers.get("authorization"))


_bearer = _BearerKey(
    auto_error=False,
    scheme_name="ApiKey",
    description="An API key made with `POST /v1/keys` or `ratings keys create`: "
    "`Authorization: Bearer <key>`.",
)

#: The presented key ("" for none).
Credentials = Annotated[str, Depends(_bearer)]


def _missing(needed: str) -> Unauthorized:
    return Unauthorized(
        f"Authorization: this request needs a Bearer key of scope {needed} or higher",
        headers=_CHALLENGE,
    )


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
    #: The ladder of the route (its ``{ladder}``; None: a route that is not one ladder's),
    #: for a key limited to some ladders.
    ladder: str | None = None
    #: Where the ladder is only known in the transaction (a job's): reads it there.
    ladder_from: Callable[[Session], str | None] | None = None

    @property
    def reads(self) -> bool:
        """Whether the route only reads (on SQLite its transaction takes no write lock)."""
        return self.needed == "read"

    def check(self, session: Session) -> None:
        """The key allows the route (on its ladder), or its 401 or 403."""
        if self.key is None and self.console_token is None:
            return
        ladder = self.ladder if self.ladder_from is None else self.ladder_from(session)
        if self.key is not None:
            authorize(
                session,
                self.key,
                self.needed,
                ladder=ladder,
                transact=unit_of_work.transactor(),
            )
        elif self.console_token is not None:
            console_key(session, self.console_token, self.needed, ladder)


def access_of(
    presented: str, needed: str, *, primary: bool = False, ladder: str | None = None
) -> Access:
    """The access of a request that presented the Bearer key ``presented`` ("" for none)
    to a route of scope ``needed`` (of ``ladder``); a missing key where one is needed is a
    401 at once."""
    if not presented:
        if needed == "read" and not get_settings().require_read_key:
            return Access(None, needed, primary, ladder=ladder)
        raise _missing(needed)
    # A key presented on an open read is checked too: an unknown or revoked one is a 401
    # (a client must learn its key is wrong before the day reads need one).
    return Access(presented, needed, primary, ladder=ladder)


def _ladder_of(request: Request) -> str | None:
    """The ladder a route is of: its ``{ladder}`` path parameter (None: it has none)."""
    ladder = request.path_params.get("ladder")
    return ladder if isinstance(ladder, str) else None


def console_access(token: str, request: Request) -> Access:
    """The access of a console page read with the session ``token`` of its cookie ("" for
    none): none needed while reads are open; a 401 at once where one is needed."""
    if not token:
        return access_of("", "read")
    return Access(None, "read", console_token=token, ladder=_ladder_of(request))


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
    async def dependency(credentials: Credentials, request: Request) -> Access:
        # Asynchronous: no trip to the thread pool; the key is checked in the route's
        # transaction.
        return access_of(credentials, needed, ladder=_ladder_of(request))

    dependency.__name__ = f"require_{needed}"
    dependency.__doc__ = f"FastAPI dependency: the Bearer key of a route of scope {needed}."
    return dependency


async def require_read(
    credentials: Credentials,
    request: Request,
    read_from: ReadFrom = None,
    token: ConsistencyToken = None,
) -> Access:
    """FastAPI dependency: the Bearer key of a read (open unless
    ``RATINGS_REQUIRE_READ_KEY`` is set; then any active key), and the database it reads
    (:func:`app.api.consistency.reads_primary`)."""
    primary = await reads_primary(
        request.app.state.reads.replay, asked=read_from == "primary", token=token
    )
    return access_of(credentials, "read", primary=primary, ladder=_ladder_of(request))


#: Recording matches: a key of scope write or admin.
require_write = _access("write")
#: Ladder configuration, rating seeds, voiding: an admin key.
require_admin = _access("admin")
