"""Prometheus metrics: request counts and latencies by route template, matches recorded.

With several uvicorn workers each process counts on its own; ``ratings serve --workers N``
therefore sets ``PROMETHEUS_MULTIPROC_DIR`` (prometheus-client's multiprocess mode) before
the workers start, and ``/metrics`` then sums the files every worker writes there.

What a process counts is what it did itself: matches recorded by ``ratings import`` (its
own process) or by another instance are not in ``ratings_matches_recorded_total``. The
database's own figure, ``ratings_database_matches_recorded_total``, is read at each scrape
(:func:`database_metrics`), and so are the ladders' prediction accuracy gauges
(``ratings_ladder_*``, labelled by ladder; :data:`LADDER_GAUGES`).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.domain.accuracy import Tally

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
#: Incremented once per match this process applied to a ladder through the API (an
#: idempotent replay is not counted); ``ratings import`` runs in a process of its own.
MATCHES_RECORDED = Counter(
    "ratings_matches_recorded",
    "Matches this process (all its workers) recorded through the API since it started; "
    "not those of ratings import or of other instances (see "
    "ratings_database_matches_recorded_total).",
)

#: Requests let through because the shared rate limit's Redis did not answer (it fails
#: open: a client is never refused for the limiter's own trouble).
RATE_LIMIT_UNAVAILABLE = Counter(
    "ratings_rate_limit_unavailable",
    "Requests let through unlimited because Redis (RATINGS_REDIS_URL) did not answer.",
)

#: The name and help of the figure read from the database at each scrape.
DATABASE_MATCHES = "ratings_database_matches_recorded"
DATABASE_MATCHES_HELP = (
    "Matches recorded in the database by every process (API workers of every instance, "
    "ratings import), all ladders, voided ones included: the newest match's seq, read at "
    "scrape time. On PostgreSQL a recording that rolled back leaves its numbers unused, so "
    "it may run ahead of the rows by those."
)

#: The most ladders the accuracy gauges report, those with the most matches scored first:
#: each ladder is one series of each gauge, so this bounds the series a scrape adds.
METRICS_LADDERS = 1000

#: The accuracy gauges of each ladder (``app.domain.accuracy``), read from the ladders'
#: running tallies at each scrape: (name, help, value of a tally or None to leave it out).
#: The averages cover every match that counts; the sums let PromQL take any window, e.g.
#: ``delta(ratings_ladder_log_loss_sum[1d]) / delta(ratings_ladder_decided_matches[1d])``.
LADDER_GAUGES: tuple[tuple[str, str, Callable[[Tally], float | None]], ...] = (
    (
        "ratings_ladder_predicted_matches",
        "Matches of the ladder scored by their stored pre-match win probabilities (those "
        "that count and have them).",
        lambda t: t.matches,
    ),
    (
        "ratings_ladder_prediction_error",
        "Fraction of the pairs of teams that did not draw which the win probabilities "
        "ordered wrongly (an even pair counts one half), over every match scored.",
        Tally.prediction_error,
    ),
    (
        "ratings_ladder_log_loss",
        "Mean -log P(winner) over the scored matches with a single winner.",
        Tally.log_loss,
    ),
    (
        "ratings_ladder_brier",
        "Mean Brier score (half the sum over teams of (p - y)^2) over the scored matches "
        "with a single winner.",
        Tally.brier,
    ),
    (
        "ratings_ladder_decisive_pairs",
        "Pairs of teams that did not draw, over the scored matches.",
        lambda t: t.pairs,
    ),
    (
        "ratings_ladder_wrong_pairs",
        "Pairs ordered wrongly by the win probabilities (an even pair counts one half).",
        lambda t: t.wrong_pairs,
    ),
    (
        "ratings_ladder_decided_matches",
        "Scored matches with a single winner: the log loss and Brier score are over these.",
        lambda t: t.decided,
    ),
    (
        "ratings_ladder_log_loss_sum",
        "Sum of -log P(winner) over the decided matches.",
        lambda t: t.log_loss_sum,
    ),
    (
        "ratings_ladder_brier_sum",
        "Sum of the Brier scores of the decided matches.",
        lambda t: t.brier_sum,
    ),
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


class _Read:
    """A collector of figures read already (``collect`` hands them over as they are)."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return self._families


def database_metrics(
    last_match_seq: int | None, tallies: dict[str, list[int]] | None = None
) -> bytes:
    """The exposition text of the figures read from the database at this scrape: the
    newest match's seq, and each ladder's accuracy gauges from its tally (by ladder id);
    nothing when the database could not be read (``None``)."""
    if last_match_seq is None:
        return b""
    registry = CollectorRegistry(auto_describe=False)
    families: list[Metric] = [
        CounterMetricFamily(DATABASE_MATCHES, DATABASE_MATCHES_HELP, value=last_match_seq)
    ]
    if tallies:
        read = {ladder: Tally.of(values) for ladder, values in sorted(tallies.items())}
        read = {ladder: tally for ladder, tally in read.items() if tally.matches}
        for name, text, value_of in LADDER_GAUGES:
            gauge = GaugeMetricFamily(name, text, labels=["ladder"])
            for ladder, tally in read.items():
                value = value_of(tally)
                if value is not None:
                    gauge.add_metric([ladder], value)
            families.append(gauge)
    registry.register(_Read(families))
    return generate_latest(registry)


_PARAMETER = re.compile(r"{([^}:]+)(?::[^}]*)?}")


@dataclass(frozen=True, slots=True)
class Template:
    """A matched route whose ``path`` is already its full template (the read path's):
    what the metrics read of ``scope["route"]``."""

    path: str


def _route_template(scope: Scope) -> str:
    """The matched route's full path template, e.g. ``/v1/ladders/{ladder}/matches``.

    The router leaves the route in the scope; its ``path`` may lack the prefixes of the
    routers it was included through, so the prefix is recovered from the request path: the
    path ends with the template filled with the path parameters, and what comes before is
    the prefix. Requests refused before routing (404, 413) share one label so that the
    label set stays small.
    """
    route = scope.get("route")
    if isinstance(route, Template):
        return route.path
    template = getattr(route, "path", None)
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
        # The children of the two metrics by their labels (a few hundred at most: route
        # templates, not paths), found without the registry's lock.
        self._latency: dict[tuple[str, str], Any] = {}
        self._requests: dict[tuple[str, str, int], Any] = {}

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
            latency = self._latency.get((method, route))
            if latency is None:
                latency = self._latency[(method, route)] = LATENCY.labels(method, route)
            latency.observe(time.perf_counter() - started)
            requests = self._requests.get((method, route, status))
            if requests is None:
                requests = self._requests[(method, route, status)] = REQUESTS.labels(
                    method, route, str(status)
                )
            requests.inc()
