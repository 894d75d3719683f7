"""Request bodies: who may send one, how large, and the checks every JSON body passes before
a route sees it (``BodyGate``).

A body costs the worker that reads it: its bytes, then the CPU of parsing it. So the gate
looks at the route first, from the request line and headers alone:

- a route that needs a key (every write, every admin route, and the reads when
  ``RATINGS_REQUIRE_READ_KEY`` is set), asked without one, and a path or method no route
  takes, get the route's own answer (401, 404, 405) without the body read: what the
  client goes on sending is dropped as it arrives (uvicorn discards what follows an
  answer), never parsed or kept;
- a request without a key may send at most ``RATINGS_MAX_KEYLESS_BODY_BYTES`` (the open
  POSTs, the quality and matchmaking queries and the console's sign-in, need a few
  kilobytes at the contract's limits); with a key, ``RATINGS_MAX_BODY_BYTES``. Past the
  limit: 413, as soon as it is declared or counted. A body larger than a keyless one has
  its key checked first (one short transaction), so a made-up key is a 401 before the
  rest is read;
- a JSON body must be UTF-8 and hold no key twice in one object; a large one is checked
  in the thread pool, where the parser gives the event loop its turn every few
  milliseconds, so the worker's other requests (``/healthz``) are answered meanwhile.
"""

from __future__ import annotations

import ctypes
import json
from collections.abc import Awaitable, Callable

import anyio
import anyio.to_thread
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.problems import problem_response
from app.api.routing import Route, route_scope, route_table
from app.api.security import bearer_key
from app.config import get_settings
from app.domain.jsontext import DuplicateKey, unique_keys
from app.errors import InvalidInput, PayloadTooLarge, ProblemError, RequestTimeout
from app.services import auth
from app.storage import unit_of_work

#: A JSON body from this size on is checked in the thread pool.
CHECK_IN_THREAD_BYTES = 64 * 1024
#: A request body from this size on (a large batch) makes the worker hand the memory it
#: freed back to the operating system once the request is answered.
RELEASE_AFTER_BYTES = 1 << 20
#: Methods whose requests carry no body to look at.
_BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})


def _is_json(content_type: str | None) -> bool:
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def json_problem(body: bytes) -> str | None:
    """What is wrong with a JSON body before any route sees it: not UTF-8, or a key twice
    in one object (a parser keeps the last value silently: ``{"ranks": [NaN, 1], "ranks":
    [2, 1]}`` would pass as the second). A body that is not JSON at all is left to the
    route's own validation, which names where."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"body: not UTF-8 (invalid byte at offset {exc.start}); JSON must be UTF-8"
    try:
        json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        return f"body: the key {str(exc)[:64]!r} appears twice in one object"
    except (ValueError, RecursionError):
        return None
    return None


def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # not glibc
        return None
    return trim


_MALLOC_TRIM = _malloc_trim()


def release_free_memory() -> None:
    """Return the heap's free pages to the operating system (glibc's ``malloc_trim``).

    What a large request allocated is freed when it is answered, but glibc keeps freed
    memory inside its heap for later use: after a batch of 50,000 player slots a worker
    kept about 100 MB more than before it. A trim gives most of it back, in a few
    milliseconds (in a thread, so the event loop does not wait). Elsewhere than glibc,
    nothing."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


async def _send_problem(send: Send, problem: ProblemError, *, close: bool = True) -> None:
    """``problem`` as the answer, the connection closed after it unless ``close`` is false
    (then uvicorn drops the rest of the body as it arrives, for its keep-alive timeout at
    most, and the client reads the answer once it has sent all)."""
    response = problem_response(
        status=problem.status,
        title=problem.title,
        type_=problem.type,
        detail=problem.detail,
        headers={**problem.headers, **({"Connection": "close"} if close else {})},
    )
    await send(
        {
            "type": "http.response.start",
            "status": response.status_code,
            "headers": response.raw_headers,
        }
    )
    await send({"type": "http.response.body", "body": response.body})


def _known_key(key: str) -> bool:
    """Whether ``key`` is an active key (its use recorded, as every check records it)."""
    return unit_of_work.run(lambda session: auth.is_active(session, key))


class BodyGate:
    """Pure ASGI middleware: the module's rules, before any route reads a body."""

    def __init__(self, app: ASGIApp, max_body_bytes: int, max_keyless_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_keyless_body_bytes = min(max_keyless_body_bytes, max_body_bytes)
        self._routes: list[Route] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        key = bearer_key(headers.get("authorization"))
        declared = headers.get("content-length", "")
        if scope["method"] not in _BODILESS and not key and self._refused_unread(scope):
            # A body the server would take is left to uvicorn, which drops what follows an
            # answer as it arrives and keeps the connection (its client reads the answer
            # once it has sent all); a larger one closes the connection at once.
            huge = declared.isdigit() and int(declared) > self.max_body_bytes
            await self.app(scope, _no_body(), _closing(send) if huge else send)
            return
        limit = self.max_body_bytes if key else self.max_keyless_body_bytes
        if declared.isdigit() and int(declared) > limit:
            await _send_problem(send, self._too_large(limit, bool(key)))
            return

        async def key_checked() -> bool:
            return await anyio.to_thread.run_sync(_known_key, key)

        body: bytes | int | ProblemError | None = RequestTimeout(
            f"body: not received whole within {get_settings().body_timeout_s:g} s"
        )
        with anyio.move_on_after(get_settings().body_timeout_s):
            body = await _read(receive, limit, self.max_keyless_body_bytes, key_checked)
        if body is None:  # the client went away
            return
        if isinstance(body, RequestTimeout):  # a slow client: its partial body is let go
            await _send_problem(send, body)
            return
        if isinstance(body, ProblemError):  # a made-up key: no more of its body is read
            await _send_problem(send, body, close=False)
            return
        if isinstance(body, int):
            await _send_problem(send, self._too_large(limit, bool(key)))
            return
        if body and _is_json(headers.get("content-type")):
            if len(body) >= CHECK_IN_THREAD_BYTES:
                problem = await anyio.to_thread.run_sync(json_problem, body)
            else:
                problem = json_problem(body)
            if problem is not None:
                await _send_problem(send, InvalidInput(problem))
                return
        size = len(body)
        await self.app(scope, _replay(body, receive), send)
        if size >= RELEASE_AFTER_BYTES:
            await anyio.to_thread.run_sync(release_free_memory)

    def _refused_unread(self, scope: Scope) -> bool:
        """Whether the route answers this keyless request without its body: it needs a
        key, or no route takes the method and path (their 401, 404 and 405)."""
        if self._routes is None:
            self._routes = route_table(scope["app"].routes)
        path = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :]
        found, needed = route_scope(self._routes, scope["method"], path)
        if not found:
            return True
        if needed is None:
            return False
        return needed != "read" or get_settings().require_read_key

    def _too_large(self, limit: int, keyed: bool) -> PayloadTooLarge:
        which = "" if keyed else " of a request without a key"
        return PayloadTooLarge(f"body: larger than the limit{which} of {limit} bytes")


async def _read(
    receive: Receive, limit: int, free: int, key_checked: Callable[[], Awaitable[bool]]
) -> bytes | int | ProblemError | None:
    """The whole body; its size so far once past ``limit``; the 401 of an unknown key, asked
    (``key_checked``) once a body passes ``free``, the most a request without a key may
    send, so that a made-up key costs no more than none; or None if the client left."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        if size <= free < size + len(chunk) and limit > free and not await key_checked():
            return auth.unknown_key()
        size += len(chunk)
        if size > limit:
            return size
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the route ``body`` whole, then the client's next message."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed, body
        if not replayed:
            replayed = True
            message: Message = {"type": "http.request", "body": body, "more_body": False}
            body = b""  # the route's request holds it now, and lets it go when done
            return message
        return await receive()

    return replay


def _no_body() -> Receive:
    """A receive for a route that answers without the body: an empty one, then nothing
    (the client's bytes are never read)."""
    given = False

    async def receive() -> Message:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    return receive


def _closing(send: Send) -> Send:
    """``send`` with ``Connection: close`` on the response: the body left unread is never
    drained, the connection goes."""

    async def closing(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"]
            message = {**message, "headers": [*headers, (b"connection", b"close")]}
        await send(message)

    return closing
