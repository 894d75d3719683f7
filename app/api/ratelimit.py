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

A client is its key: the SHA-256 of the bearer token (the key itself is not kept), once a
request with it has been answered other than 401 (the key is known); until then, and for
requests without a key, the client address. So a client that sends a new made-up token
with every request is counted by its address and limited like any other, and a token is
never looked up before it has a bucket. The address is the peer's, or the
``X-Forwarded-For`` of a proxy named in ``RATINGS_TRUSTED_PROXIES`` (``ratings serve``
believes no other). The tables of buckets and of known keys hold at most
``RATINGS_RATE_LIMIT_MAX_CLIENTS`` entries each, forgetting the least recently seen first
(a forgotten client starts again with a full bucket; a forgotten key is counted by its
address until it is answered again).
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import time
from collections import OrderedDict
from collections.abc import Callable

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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


def client_of(scope: Scope) -> tuple[str, str | None, bool]:
    """(the client's address bucket name, the digest of its bearer token (None: none),
    whether it connects over loopback)."""
    client = scope.get("client")
    host = str(client[0]) if client else ""
    token = bearer_key(Headers(scope=scope).get("authorization"))
    digest = hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()[:32] if token else None
    return f"address:{host}", digest, _is_loopback(host)


class RateLimitMiddleware:
    """Pure ASGI middleware applying :class:`TokenBuckets` before the request is read."""

    def __init__(self, app: ASGIApp, settings: RateLimit | None = None) -> None:
        self.app = app
        self.settings = settings or get_settings().rate_limit
        self.buckets: TokenBuckets | None = None
        #: The digests of the keys answered other than 401 (least recently seen first).
        self.known: OrderedDict[str, None] = OrderedDict()
        if self.settings.per_second > 0:
            self.buckets = TokenBuckets(
                self.settings.per_second, self.settings.capacity, self.settings.max_clients
            )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.buckets is None or scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        address, digest, loopback = client_of(scope)
        if loopback and not self.settings.loopback:
            await self.app(scope, receive, send)
            return
        known = digest is not None and digest in self.known
        wait = self.buckets.take(f"key:{digest}" if known else address)
        if wait <= 0.0:
            if digest is None:
                await self.app(scope, receive, send)
            else:
                await self.app(scope, receive, self._learning(digest, send))
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

    def _learning(self, digest: str, send: Send) -> Send:
        """``send``, noting whether the key of ``digest`` is known by the answer's status:
        401 (unknown or revoked) forgets it, anything else knows it."""
        known = self.known

        async def learn(message: Message) -> None:
            if message["type"] == "http.response.start":
                if message["status"] == 401:
                    known.pop(digest, None)
                else:
                    known[digest] = None
                    known.move_to_end(digest)
                    while len(known) > self.settings.max_clients:
                        known.popitem(last=False)
            await send(message)

        return learn
