"""Errors as HTTP answers: every error rendered as ``application/problem+json`` (RFC 9457),
the handlers FastAPI calls, and the error statuses of every operation documented in the
OpenAPI document. The errors themselves are the domain's (``app.errors``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy import exc as sqlalchemy_exc
from sqlalchemy.exc import DisconnectionError, IntegrityError, InterfaceError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.api.logs import redacted_path
from app.errors import (
    Conflict,
    InvalidInput,
    ProblemError,
    ServiceUnavailable,
    validation_detail,
)
from app.rating.base import RatingInputError

# -- rendering -----------------------------------------------------------------------------

PROBLEM_JSON = "application/problem+json"

_log = logging.getLogger("app.errors")


def problem_response(
    *,
    status: int,
    detail: str,
    title: str | None = None,
    type_: str = "about:blank",
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """An RFC 9457 problem document: ``{"type", "title", "status", "detail"}``."""
    body = {
        "type": type_,
        "title": title or HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    return JSONResponse(
        body, status_code=status, headers=dict(headers or {}), media_type=PROBLEM_JSON
    )


async def _problem_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ProblemError)
    return problem_response(
        status=exc.status, title=exc.title, type_=exc.type, detail=exc.detail, headers=exc.headers
    )


async def _request_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return problem_response(
        status=InvalidInput.status,
        title=InvalidInput.title,
        type_=InvalidInput.type,
        detail=validation_detail(exc.errors()),
    )


async def _rating_input_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RatingInputError)
    return problem_response(
        status=InvalidInput.status,
        title=InvalidInput.title,
        type_=InvalidInput.type,
        detail=f"{exc.argument}: {exc.message}",
    )


#: FastAPI's detail when the body could not be decoded at all (``fastapi.routing``).
_UNPARSABLE_BODY = "There was an error parsing the body"


async def _http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"path: no route {request.url.path}"
    elif exc.status_code == 405 and detail == "Method Not Allowed":
        # Every method of every route of the path (``app.api.routing.allowed_methods``,
        # set by ``create_app``): Starlette names only those of the first route it met.
        allowed = request.app.state.allowed_methods(request.url.path)
        detail = f"method: {request.method} is not allowed on {request.url.path}"
        return problem_response(
            status=405, detail=detail, headers={**(exc.headers or {}), "Allow": ", ".join(allowed)}
        )
    elif exc.status_code == 400 and detail == _UNPARSABLE_BODY:
        # FastAPI's answer when the JSON decoder itself gives up (nesting deeper than the
        # interpreter's recursion limit, an integer of thousands of digits): a malformed
        # body, which the contract answers with 422 like any other.
        return problem_response(
            status=InvalidInput.status,
            title=InvalidInput.title,
            type_=InvalidInput.type,
            detail="body: not a JSON document this service can read (nested too deeply, "
            "or a number too long)",
        )
    return problem_response(status=exc.status_code, detail=detail, headers=exc.headers)


async def _database_unavailable(request: Request, exc: Exception) -> Response:
    # The message may carry a host name or SQL; only the class reaches the log, not the client.
    _log.warning("database unavailable: %s", type(exc).__name__)
    return problem_response(
        status=ServiceUnavailable.status,
        title=ServiceUnavailable.title,
        type_=ServiceUnavailable.type,
        detail="database: unavailable or busy; retry shortly",
        headers={"Retry-After": "1"},
    )


async def _integrity_error(request: Request, exc: Exception) -> Response:
    # A unique key raced by a concurrent request (two writers of one new row).
    _log.warning("integrity error: %s", type(exc).__name__)
    return problem_response(
        status=Conflict.status,
        title=Conflict.title,
        type_=Conflict.type,
        detail="request: it conflicts with a concurrent write; retry it",
    )


async def _unexpected(request: Request, exc: Exception) -> Response:
    path = redacted_path(request.url.path)
    _log.error("unhandled error on %s %s", request.method, path, exc_info=exc)
    return problem_response(
        status=500,
        type_="/problems/internal",
        detail="server: an unexpected error; it has been logged",
    )


# -- the OpenAPI document ------------------------------------------------------------------

PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "description": "An RFC 9457 problem document; `detail` names the offending field.",
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "examples": ["/problems/invalid-input"]},
        "title": {"type": "string", "examples": ["Unprocessable Content"]},
        "status": {"type": "integer", "examples": [422]},
        "detail": {"type": "string", "examples": ["teams.1: List should have at least 1 item"]},
    },
}

#: Every error status an operation may answer, with when (documented on each operation
#: that can give it; the routes document their own 409s and the like).
_PROBLEMS = {
    "401": "No key, or an unknown or revoked key, where the operation needs one.",
    "403": "The key's scope is too small for the operation.",
    "404": "Unknown ladder, player or match.",
    "409": "A conflict with what is recorded, or with a concurrent write; see `detail`.",
    "413": "The body is larger than the service's limit.",
    "422": "A malformed or impossible request; `detail` names the field.",
    "429": "Too many requests from this key or address; retry after `Retry-After` seconds.",
    "503": "The database is unavailable or busy; retry after `Retry-After` seconds.",
}
_PROBES = frozenset({"/healthz", "/readyz", "/metrics"})


def _statuses(path: str, method: str, operation: Mapping[str, Any]) -> list[str]:
    if path in _PROBES:
        return ["503"] if path == "/readyz" else []
    statuses = ["429", "503"]
    if operation.get("security"):
        statuses += ["401", "403"]
    if "{" in path:
        statuses.append("404")
    if method in ("post", "put", "patch", "delete"):
        statuses.append("409")
    if "requestBody" in operation:
        statuses.append("413")
    if "requestBody" in operation or operation.get("parameters"):
        statuses.append("422")
    return statuses


def document_problems(schema: dict[str, Any]) -> dict[str, Any]:
    """Document in the OpenAPI ``schema`` every error status each operation can answer,
    each as ``application/problem+json`` (what the handlers above send)."""
    schema.setdefault("components", {}).setdefault("schemas", {})["Problem"] = PROBLEM_SCHEMA
    content = {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for path, item in schema.get("paths", {}).items():
        for method, operation in item.items():
            responses = operation.setdefault("responses", {})
            for status in _statuses(path, method, operation):
                responses.setdefault(status, {"description": _PROBLEMS[status]})
            for status, response in responses.items():
                if status[0] in "45":
                    response["content"] = content
    return schema


def extend_openapi(app: FastAPI, transform: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Make ``app``'s OpenAPI document pass through ``transform`` once, when first made."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = transform(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


#: Each error class the service renders, with its handler; the first that matches wins.
_HANDLERS: tuple[tuple[type[Exception], Any], ...] = (
    (ProblemError, _problem_error),
    (RequestValidationError, _request_validation_error),
    (RatingInputError, _rating_input_error),
    (StarletteHTTPException, _http_exception),
    (DisconnectionError, _database_unavailable),
    (OperationalError, _database_unavailable),
    (InterfaceError, _database_unavailable),
    (sqlalchemy_exc.TimeoutError, _database_unavailable),
    (IntegrityError, _integrity_error),
    (Exception, _unexpected),
)


async def error_response(request: Request, exc: Exception) -> Response:
    """The answer to ``exc`` met while serving ``request`` outside FastAPI's routing (the
    read path, ``app.api.reads``): exactly what the handlers installed on the app give."""
    for error_type, handler in _HANDLERS:
        if isinstance(exc, error_type):
            response: Response = await handler(request, exc)
            return response
    raise exc


def install_error_handlers(app: FastAPI) -> None:
    """Render every error of ``app`` as ``application/problem+json`` (RFC 9457), and
    document them so in its OpenAPI document."""
    extend_openapi(app, document_problems)
    for error_type, handler in _HANDLERS:
        app.add_exception_handler(error_type, handler)
