"""What the API promises the clients generated from its OpenAPI document, beyond what FastAPI
derives from the routes: short, stable operation ids (each route's name), the operations
open to anonymous clients declared so, the interactive documents (``/docs``, ``/redoc``)
served with their assets from the service itself, and a root that points at them."""

from __future__ import annotations

from collections.abc import Sequence
from importlib.resources import files
from typing import Any

from fastapi import APIRouter
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, Field
from starlette.routing import BaseRoute

from app.api.routing import needed_scope

OPENAPI_URL = "/openapi.json"
#: Where the documents' scripts, stylesheet and icon are served from (the files of the
#: ``fastapi-offline`` package: Swagger UI and ReDoc, so that no request leaves the machine).
ASSETS_URL = "/docs/assets"
TITLE = "ratings"


def operation_id(route: APIRoute) -> str:
    """An operation's id: its route's name (``record_match``, ``get_leaderboard``), short
    and stable, where FastAPI's default adds the path and method."""
    return route.name


def document_open_operations(
    schema: dict[str, Any], routes: Sequence[BaseRoute], *, open_reads: bool, open_metrics: bool
) -> dict[str, Any]:
    """Declare in ``schema`` the operations a client may call without a key: the reads
    while they are open (``RATINGS_REQUIRE_READ_KEY`` unset), ``/metrics`` while it is open
    too. Each gets the empty security requirement beside the key's, as OpenAPI spells
    "optional", so that a generated client can call it anonymously."""
    paths = schema.get("paths", {})
    for route in iter_route_contexts(routes):
        dependant = getattr(route, "dependant", None)
        if dependant is None or not route.path_format or not route.methods:
            continue
        is_open = (needed_scope(dependant) == "read" and open_reads) or (
            route.path_format == "/metrics" and open_metrics and open_reads
        )
        if not is_open:
            continue
        for method in route.methods:
            operation = paths.get(route.path_format, {}).get(method.lower())
            if operation is not None and {} not in operation.get("security", [{}]):
                operation["security"] = [*operation["security"], {}]
    return schema


class Links(BaseModel):
    """Where to go from the service's root."""

    console: str = Field(examples=["/console"], description="The operators' console.")
    docs: str = Field(examples=["/docs"], description="The API's interactive reference.")
    redoc: str = Field(examples=["/redoc"], description="The API's reference, to read.")
    openapi: str = Field(examples=[OPENAPI_URL], description="The OpenAPI document.")


docs_router = APIRouter(tags=["operations"])


@docs_router.get("/", summary="Where to start: the console and the API's documents")
async def root() -> Links:
    return Links(console="/console", docs="/docs", redoc="/redoc", openapi=OPENAPI_URL)


@docs_router.get("/docs", include_in_schema=False)
async def swagger_ui() -> HTMLResponse:
    return get_swagger_ui_html(
        openapi_url=OPENAPI_URL,
        title=f"{TITLE} API",
        swagger_js_url=f"{ASSETS_URL}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS_URL}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS_URL}/favicon.png",
    )


@docs_router.get("/redoc", include_in_schema=False)
async def redoc() -> HTMLResponse:
    return get_redoc_html(
        openapi_url=OPENAPI_URL,
        title=f"{TITLE} API",
        redoc_js_url=f"{ASSETS_URL}/redoc.standalone.js",
        redoc_favicon_url=f"{ASSETS_URL}/favicon.png",
        with_google_fonts=False,
    )


def docs_assets() -> StaticFiles:
    """The documents' files, to mount at :data:`ASSETS_URL`."""
    return StaticFiles(directory=str(files("fastapi_offline") / "static"))
