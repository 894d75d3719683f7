"""The application's routes as plain data: their path patterns, methods and the key scope
each needs, read from the routes' own declarations (their access dependencies). For what
must be known before a route runs: whether a body may be read (``bodies.BodyGate``), and
every method a path allows (a 405's ``Allow``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import iter_route_contexts
from starlette.routing import BaseRoute

from app.api.security import require_admin, require_read, require_write

#: The scope each access dependency stands for.
_ACCESS: dict[Callable[..., Any], str] = {
    require_read: "read",
    require_write: "write",
    require_admin: "admin",
}


def needed_scope(dependant: Dependant) -> str | None:
    """The key scope a route's dependencies ask for (``read``, ``write``, ``admin``), or
    None for a route open to all (the console's sign-in, the documents)."""
    for dependency in dependant.dependencies:
        if dependency.call in _ACCESS:
            return _ACCESS[dependency.call]
        found = needed_scope(dependency)
        if found is not None:
            return found
    return None


@dataclass(frozen=True, slots=True)
class Route:
    """What the gate knows of a route: its path, methods (None: any) and needed scope."""

    path: re.Pattern[str]
    methods: frozenset[str] | None
    needed: str | None


#: Tables already read, by the top-level routes they were read from (:func:`_shape`).
_tables: dict[tuple[tuple[str, str | None, int | None], ...], list[Route]] = {}


def _shape(routes: list[BaseRoute]) -> tuple[tuple[str, str | None, int | None], ...]:
    """What decides a table: each top-level route's kind and path, and the router an
    included router wraps (the module's own, the same in every application)."""
    return tuple(
        (
            type(route).__name__,
            getattr(route, "path", None),
            id(router) if (router := getattr(route, "original_router", None)) else None,
        )
        for route in routes
    )


def route_table(routes: list[BaseRoute]) -> list[Route]:
    """Every route of the application (the included routers' too), as the gate reads it;
    read once per process for applications made alike (each read builds every route's
    dependencies, which FastAPI otherwise builds for a route on its first request)."""
    shape = _shape(routes)
    table = _tables.get(shape)
    if table is None:
        table = _tables[shape] = _read_table(routes)
    return table


def _read_table(routes: list[BaseRoute]) -> list[Route]:
    table = []
    for context in iter_route_contexts(routes):
        path = getattr(context, "path_regex", None)
        if path is None:
            continue
        methods = context.methods
        dependant = getattr(context, "dependant", None)
        table.append(
            Route(
                path=path,
                methods=frozenset(methods) if methods is not None else None,
                needed=needed_scope(dependant) if dependant is not None else None,
            )
        )
    return table


def route_scope(table: list[Route], method: str, path: str) -> tuple[bool, str | None]:
    """Whether a route takes this method and path, and the scope it needs."""
    for route in table:
        if (route.methods is None or method in route.methods) and route.path.match(path):
            return True, route.needed
    return False, None


def allowed_methods(table: Sequence[Route], path: str) -> list[str]:
    """Every method some route takes on ``path`` (HEAD wherever GET is: it is answered as
    GET), sorted: a 405's ``Allow``."""
    methods: set[str] = set()
    for route in table:
        if route.methods is not None and route.path.match(path):
            methods |= route.methods
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)
