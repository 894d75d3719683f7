"""Per-client rate limiting: a token bucket per API key (or per address for anonymous
requests), answering 429 problem+json with ``Retry-After`` when a bucket is empty.

Off by default. ``RATINGS_RATE_LIMIT_PER_SECOND`` (> 0 turns it on) is the sustained rate
of one client and ``RATINGS_RATE_LIMIT_BURST`` how many requests it may send at once
(default: one second's worth, at least 1). Loopback clients (127.0.0.0/8, ::1) are not
limited unless ``RATINGS_RATE_LIMIT_LOOPBACK`` is true: a proxy on the same host, the health
checks and the operator are not clients to throttle. The probes (``/healthz``,
``/readyz``, ``/metrics``) are never limited.

With ``RATINGS_REDIS_URL`` the buckets live in Redis, shared by every worker of every
instance: the configured rate is the client's, whatever worker or instance takes its
requests. Each request takes a token with one server-side script (``_TAKE``), atomic in
Redis and timed by Redis's own clock, so no two workers can both spend the last token
and the instances' clocks do not matter; a bucket's key expires once it would be full
again. Redis down or slow (over ``REDIS_TIMEOUT_S``): the request goes on unlimited
(fail open), counted in ``ratings_rate_limit_unavailable_total``, the first failure after
Redis last answered is logged, once, and for ``REDIS_RETRY_S`` the requests do not ask it
(so a Redis that hangs costs one request its timeout a second, not every request).

Without Redis the buckets live in each worker process's memory: nothing is shared, so a
request costs no round trip and no lock. With ``W`` workers (``RATINGS_WORKERS``) behind
one address a client that spreads its connections over them may get up to ``W`` times
the configured rate, so set the rate per worker to the total divided by the workers (a
total of 100/s on 4 workers: ``RATINGS_RATE_LIMIT_PER_SECOND=25``). uvicorn hands each
new connection to one worker and a keep-alive connection stays with it, so a client on
one connection meets exactly the configured rate.

Every answer of a limited client carries ``RateLimit-Limit`` (the burst),
``RateLimit-Remaining`` (the tokens left) and ``RateLimit-Reset`` (seconds until the bucket
is full), the IETF draft's fields; a 429 also ``Retry-After``.

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
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.metrics import RATE_LIMIT_UNAVAILABLE
from app.api.problems import problem_response
from app.api.security import bearer_key
from app.config import RateLimit, get_settings

_log = logging.getLogger(__name__)

#: The longest a request waits for Redis before it goes on unlimited.
REDIS_TIMEOUT_S = 0.25
#: After Redis failed, how long requests go on unlimited without asking it again.
REDIS_RETRY_S = 1.0


class Grant(NamedTuple):
    """What taking a token gave: the seconds until one is free (0: granted) and the tokens
    left."""

    wait: float
    remaining: float


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
        return self.acquire(client).wait

    async def grant(self, client: str) -> Grant | None:
        """:meth:`acquire` (never None: the buckets are this process's own)."""
        return self.acquire(client)

    def acquire(self, client: str) -> Grant:
        """Take a token for ``client``: the wait (0.0 if granted) and the tokens left."""
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
        return Grant(wait, tokens)


#: Take a token from the bucket KEYS[1] (ARGV: rate per second, capacity): refill it for the
#: time since it was last touched by Redis's clock, take one if there is one, keep it for
#: as long as it takes to fill up; returns {wait, tokens left} as strings (exact floats).
_TAKE = """
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or capacity
local at = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - at) * rate)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / rate * 1000) + 1000)
return {tostring(wait), tostring(tokens)}
"""


class RedisBuckets:
    """The token buckets in Redis, shared by every worker of every instance (``_TAKE``)."""

    def __init__(self, url: str, rate: float, capacity: float, prefix: str) -> None:
        from redis.asyncio import Redis

        self.rate = rate
        self.capacity = capacity
        self.prefix = prefix
        self._redis = Redis.from_url(
            url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S
        )
        self._take = self._redis.register_script(_TAKE)
        #: Whether the last call failed (the next failure is then not logged again).
        self.failing = False
        #: While Redis fails, when it is asked again (until then requests do not wait for
        #: it: a Redis that hangs would cost every request the timeout).
        self.retry_at = 0.0

    async def grant(self, client: str) -> Grant | None:
        """Take a token for ``client``; None when Redis did not answer (fail open)."""
        from redis.exceptions import RedisError

        if self.failing and time.monotonic() < self.retry_at:
            RATE_LIMIT_UNAVAILABLE.inc()
            return None
        try:
            wait, tokens = await self._take(
                keys=[self.prefix + client], args=[repr(self.rate), repr(self.capacity)]
            )
        except (RedisError, OSError) as exc:
            RATE_LIMIT_UNAVAILABLE.inc()
            self.retry_at = time.monotonic() + REDIS_RETRY_S
            if not self.failing:
                self.failing = True
                _log.warning(
                    "rate limit: Redis did not answer (%s); requests go on unlimited until it does",
                    type(exc).__name__,
                )
            return None
        if self.failing:
            self.failing = False
            _log.warning("rate limit: Redis answers again; requests are limited again")
        return Grant(float(wait), float(tokens))


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
        self.buckets: TokenBuckets | RedisBuckets | None = None
        #: The digests of the keys answered other than 401 (least recently seen first).
        self.known: OrderedDict[str, None] = OrderedDict()
        limit = self.settings
        if limit.per_second > 0 and limit.redis_url:
            self.buckets = RedisBuckets(
                limit.redis_url, limit.per_second, limit.capacity, limit.redis_prefix
            )
        elif limit.per_second > 0:
            self.buckets = TokenBuckets(limit.per_second, limit.capacity, limit.max_clients)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.buckets is None or scope["type"] != "http" or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        address, digest, loopback = client_of(scope)
        if loopback and not self.settings.loopback:
            await self.app(scope, receive, send)
            return
        known = digest is not None and digest in self.known
        grant = await self.buckets.grant(f"key:{digest}" if known else address)
        if grant is None:  # the shared limit's Redis did not answer: fail open
            await self.app(scope, receive, send if digest is None else self._learning(digest, send))
            return
        headers = self._headers(grant)
        if grant.wait <= 0.0:
            await self.app(scope, receive, self._answering(digest, headers, send))
            return
        retry_after = max(1, math.ceil(grant.wait))
        response = problem_response(
            status=429,
            title="Too Many Requests",
            type_="/problems/rate-limited",
            detail=(
                f"rate: more than {self.settings.per_second:g} requests per second "
                f"(burst {self.settings.capacity:g}); retry after {retry_after} s"
            ),
            headers={"Retry-After": str(retry_after), **dict(headers)},
        )
        await response(scope, receive, send)

    def _headers(self, grant: Grant) -> list[tuple[str, str]]:
        """The draft's RateLimit fields for ``grant``: the burst, the tokens left, and the
        seconds until the bucket is full."""
        capacity = self.settings.capacity
        remaining = max(0, math.floor(grant.remaining))
        reset = math.ceil(max(0.0, capacity - grant.remaining) / self.settings.per_second)
        return [
            ("RateLimit-Limit", str(math.floor(capacity))),
            ("RateLimit-Remaining", str(remaining)),
            ("RateLimit-Reset", str(reset)),
        ]

    def _answering(self, digest: str | None, headers: list[tuple[str, str]], send: Send) -> Send:
        """``send`` with the RateLimit fields added to the answer (and, for a request with a
        key, :meth:`_learning` whether the key is known)."""
        raw = [(name.lower().encode(), value.encode()) for name, value in headers]
        inner = send if digest is None else self._learning(digest, send)

        async def answer(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *raw]}
            await inner(message)

        return answer

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
