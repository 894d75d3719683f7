"""Per-client rate limiting: a token bucket per API key (or per address for anonymous
requests), answering 429 problem+json with ``Retry-After`` when a bucket is empty.

Off by default. ``RATINGS_RATE_LIMIT_PER_SECOND`` (> 0 turns it on) is the sustained rate
of one client and ``RATINGS_RATE_LIMIT_BURST`` how many requests it may send at once
(default: one second's worth, at least 1). Loopback clients (127.0.0.0/8, ::1) are not
limited unless ``RATINGS_RATE_LIMIT_LOOPBACK`` is true: a proxy on the same host, the health
checks and the operator are not clients to throttle. The probes (``/healthz``,
``/readyz``, ``/metrics``) are never limited.

The buckets live in each worker process's memory: nothing is shared, so a request costs no
database round trip and no lock. With ``W`` workers (``RATINGS_WORKERS``) behind one
address a client that spreads its connections over them may get up to ``W`` times the
configured rate, so set the rate per worker to the total divided by the workers (a total
of 100/s on 4 workers: ``RATINGS_RATE_LIMIT_PER_SECOND=25``). uvicorn hands each new
connection to one worker and a keep-alive connection stays with it, so a client on one
connection meets exactly the configured rate.

A client is its key: the SHA-256 of the bearer token (the key itself is not kept), or for
requests without one the client address. The table of buckets holds at most
``RATINGS_RATE_LIMIT_MAX_CLIENTS`` entries, forgetting the least recently seen first (a
forgotten client starts again with a full bucket).
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.problems import problem_response
from app.api.security import bearer_key
from app.config import RateLimit, get_settings

#: Paths never limited: the load balancer's and the monitoring's probes.
EXEMPT_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


class TokenBuckets:
    """One token bucket per client: ``capacity`` tokens, refilled at ``rate`` per second."""

    def __init__(
        self,
        rate: float,
        capacity: float,
        max_clients: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.capacity = capacity
        self.max_clients = max_clients
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def take(self, client: str) -> float:
        """Take a token for ``client``: 0.0 if granted, else the seconds until one is free."""
        now = self.clock()
        tokens, then = self._buckets.pop(client, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - then) * self.rate)
        wait = 0.0
        if tokens >= 1.0:
            tokens -= 1.0
        else:
            wait = (1.0 - tokens) / self.rate
        self._buckets[client] = (tokens, now)
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)
        return wait


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def client_of(scope: Scope) -> tuple[str, bool]:
    """(the client's bucket name, whether it connects over loopback)."""
    client = scope.get("client")
    host = str(client[0]) if client else ""
    token = bearer_key(Headers(scope=scope).get("authorization"))
    if token:
        digest = hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()[:32]
        return f"key:{digest}", _is_loopback(host)
    return f"address:{host}", _is_loopback(host)


class RateLimitMiddleware:
    """Pure ASGI middleware applying :class:`TokenBuckets` before the request is read."""

    def __init__(self, app: ASGIApp, settings: RateLimit | None = None) -> None:
        self.app = app
        self.settings = settings or get_settings().rate_limit
        self.buckets: TokenBuckets | None = None
        if self.settings.per_second > 0:
            self.buckets = TokenBuckets(
                self.settings.per_second, self.settings.capacity, self.settings.max_clients
            )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.buckets is None or scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        client, loopback = client_of(scope)
        if loopback and not self.settings.loopback:
            await self.app(scope, receive, send)
            return
        wait = self.buckets.take(client)
        if wait <= 0.0:
            await self.app(scope, receive, send)
            return
        retry_after = max(1, math.ceil(wait))
        response = problem_response(
            status=429,
            title="Too Many Requests",
            type_="/problems/rate-limited",
            detail=(
                f"rate: more than {self.settings.per_second:g} requests per second "
                f"(burst {self.settings.capacity:g}); retry after {retry_after} s"
            ),
            headers={"Retry-After": str(retry_after)},
        )
        await response(scope, receive, send)
