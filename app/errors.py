"""Domain errors: each carries the HTTP status it is answered with; ``app.api.problems``
renders them as problem+json (RFC 9457). :func:`problem_of` gives the same document for an
error met outside a request (a job's), to be stored and shown later."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from sqlalchemy import exc as sqlalchemy_exc
from sqlalchemy.exc import DisconnectionError, IntegrityError, InterfaceError, OperationalError

from app.rating.base import RatingInputError

_log = logging.getLogger("app.errors")

#: Longest pydantic message echoed in a 422 detail; longer ones are cut.
_MAX_MESSAGE = 300
#: At most this many validation errors are listed in one detail.
_MAX_ERRORS = 10


class ProblemError(Exception):
    """An error a client can act on. ``detail`` names the offending field or thing."""

    status: int = 400
    title: str = "Bad Request"
    type: str = "about:blank"

    def __init__(self, detail: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.headers = headers or {}


class InvalidInput(ProblemError):
    status = 422
    title = "Unprocessable Content"
    type = "/problems/invalid-input"


class NotFound(ProblemError):
    status = 404
    title = "Not Found"
    type = "/problems/not-found"


class Conflict(ProblemError):
    status = 409
    title = "Conflict"
    type = "/problems/conflict"


class Unauthorized(ProblemError):
    status = 401
    title = "Unauthorized"
    type = "/problems/unauthorized"


class Forbidden(ProblemError):
    status = 403
    title = "Forbidden"
    type = "/problems/forbidden"


class RequestTimeout(ProblemError):
    status = 408
    title = "Request Timeout"
    type = "/problems/request-timeout"


class PayloadTooLarge(ProblemError):
    status = 413
    title = "Content Too Large"
    type = "/problems/payload-too-large"


class ServiceUnavailable(ProblemError):
    status = 503
    title = "Service Unavailable"
    type = "/problems/unavailable"


class NotInstalled(ProblemError):
    """What the request asks for needs an optional package this server does not have."""

    status = 501
    title = "Not Implemented"
    type = "/problems/not-installed"


def problem_of(exc: BaseException) -> dict[str, Any]:
    """The problem document ``app.api.problems`` would answer ``exc`` with: for an error met
    outside a request (a job's), to be stored and shown later. An unexpected one is logged."""
    if isinstance(exc, ProblemError):
        return {"type": exc.type, "title": exc.title, "status": exc.status, "detail": exc.detail}
    if isinstance(exc, RatingInputError):
        return {
            "type": InvalidInput.type,
            "title": InvalidInput.title,
            "status": InvalidInput.status,
            "detail": f"{exc.argument}: {exc.message}",
        }
    if isinstance(
        exc, DisconnectionError | OperationalError | InterfaceError | sqlalchemy_exc.TimeoutError
    ):
        _log.warning("database unavailable: %s", type(exc).__name__)
        return {
            "type": ServiceUnavailable.type,
            "title": ServiceUnavailable.title,
            "status": ServiceUnavailable.status,
            "detail": "database: unavailable or busy; nothing was changed, submit it again",
        }
    if isinstance(exc, IntegrityError):
        _log.warning("integrity error: %s", type(exc).__name__)
        return {
            "type": Conflict.type,
            "title": Conflict.title,
            "status": Conflict.status,
            "detail": "request: it conflicted with a concurrent write; submit it again",
        }
    _log.error("unexpected error in a job", exc_info=exc)
    return {
        "type": "/problems/internal",
        "title": HTTPStatus(500).phrase,
        "status": 500,
        "detail": "server: an unexpected error; it has been logged",
    }


# -- validation errors, in words -----------------------------------------------------------------


def _location(loc: Sequence[Any]) -> str:
    return ".".join(str(part) for part in loc) or "body"


def validation_detail(errors: Sequence[Mapping[str, Any]]) -> str:
    """``loc: message`` for each pydantic error, e.g. ``body.teams.1: List should have at
    least 1 item``. The input value is never echoed: it may be huge, secret or not
    representable in JSON (NaN)."""
    parts = []
    for error in errors[:_MAX_ERRORS]:
        message = str(error.get("msg", "invalid"))
        if error.get("type") == "value_error":
            # A validator's own message: pydantic prefixes "Value error, ", which says nothing.
            message = message.removeprefix("Value error, ")
        elif error.get("type") == "json_invalid":
            reason = (error.get("ctx") or {}).get("error")
            message = f"not valid JSON ({reason})" if reason else "not valid JSON"
        loc = tuple(error.get("loc", ()))
        if loc:
            # A validator that names its field ("ranks: expected ...") is not named twice.
            message = message.removeprefix(f"{loc[-1]}: ")
        if len(message) > _MAX_MESSAGE:
            message = message[: _MAX_MESSAGE - 3] + "..."
        parts.append(f"{_location(loc)}: {message}")
    if len(errors) > _MAX_ERRORS:
        parts.append(f"and {len(errors) - _MAX_ERRORS} more")
    return "; ".join(parts) or "invalid request"
