"""Prometheus metrics: request counts and latencies by route template, matches recorded.

With several uvicorn workers each process counts on its own; ``ratings serve --workers N``
therefore sets ``PROMETHEUS_MULTIPROC_DIR`` (prometheus-client's multiprocess mode) before
the workers start, and ``/metrics`` then sums the files every worker writes there.
"""

from __future__ import annotations

import os
import re
import time

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: The environment variable that switches prometheus-client to multiprocess mode.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

REQUESTS = Counter(
    "ratings_http_requests",
    "HTTP requests answered, by method, route template and status code.",
    ["method", "route", "status"],
)
LATENCY = Histogram(
    "ratings_http_request_duration_seconds",
    "Time from receiving a request to the end of its response, by method and route template.",
    ["method", "route"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
#: Incremented once per match applied to a ladder (an idempotent replay is not counted).
MATCHES_RECORDED = Counter(
    "ratings_matches_recorded",
    "Matches recorded and applied to ratings.",
)

#: Single-match POSTs written together in one transaction (``app.api.writer``).
WRITE_GROUP_SIZE = Histogram(
    "ratings_write_group_size",
    "Single matches written in one transaction by a worker's group commit.",
    buckets=(1, 2, 4, 8, 16, 32, 64),
)

#: The route label of requests that matched no route (keeps the label set small).
UNMATCHED = "unmatched"


def render_metrics() -> tuple[bytes, str]:
    """The exposition text of every metric and its content type.

    In multiprocess mode a fresh registry collects what all workers wrote to
    ``PROMETHEUS_MULTIPROC_DIR``; otherwise this process's default registry is read.
    """
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


_PARAMETER = re.compile(r"{([^}:]+)(?::[^}]*)?}")


def _route_template(scope: Scope) -> str:
    """The matched route's full path template, e.g. ``/v1/ladders/{ladder}/matches``.

    The router leaves the route in the scope; its ``path`` may lack the prefixes of the
    routers it was included through, so the prefix is recovered from the request path: the
    path ends with the template filled with the path parameters, and what comes before is
    the prefix. Requests refused before routing (404, 413) share one label so that the
    label set stays small.
    """
    template = getattr(scope.get("route"), "path", None)
    if not isinstance(template, str):
        return UNMATCHED
    parameters = scope.get("path_params") or {}
    try:
        filled = _PARAMETER.sub(lambda match: str(parameters[match.group(1)]), template)
    except KeyError:
        return template
    path = str(scope.get("path", ""))
    if filled and path.endswith(filled):
        return path[: len(path) - len(filled)] + template
    return template


class MetricsMiddleware:
    """Pure ASGI middleware counting every HTTP request by route template and status."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        started = time.perf_counter()

        async def send_and_record(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_record)
        finally:
            method = str(scope.get("method", ""))
            route = _route_template(scope)
            LATENCY.labels(method, route).observe(time.perf_counter() - started)
            REQUESTS.labels(method, route, str(status)).inc()
