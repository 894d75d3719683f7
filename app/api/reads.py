"""The read path: the API's GET reads, answered with a validator, and without rebuilding
what nobody changed.

Every read of a ladder carries an ``ETag`` made of the ladder's creation time and version
(:mod:`app.storage.versions`: a counter that every transaction changing the ladder moves as
it commits), so it changes with every write, in every worker and replica at once, and a
request whose ``If-None-Match`` names it is answered ``304 Not Modified`` after one indexed
statement. A worker also keeps the bodies it answered (:class:`BodyCache`, by route,
arguments and validator): the same read of an unchanged ladder costs that one statement
and no rendering. ``Cache-Control`` is the operator's, per read (``RATINGS_CACHE_CONTROL``).

:class:`ReadPath` serves these reads ahead of FastAPI's routing, which for a short read
cost more than its queries: it matches the path against :data:`READS` and reads the query
with the routes' own rules. The validator and the key's row are read by
:class:`Gathered`, which gathers the requests of a worker waiting for one into one
statement, sent on PostgreSQL from the event loop itself (``LoopConnection``: no thread
hand-off); a ``304`` or a kept body is then answered on the event loop, and only a body
to make goes to the thread pool (the route's service call in a read transaction). A read
with a direct form (:attr:`Read.direct`: a player's card) makes its body without a
session instead, gathered with the worker's other such reads into one statement. The
routes stay declared on the FastAPI app with the same services, for the OpenAPI document
and for the requests this path does not take: one whose query it cannot read as the route
would (FastAPI then answers, with its 422 where the query is wrong).

With ``RATINGS_READ_DATABASE_URL`` reads go to a streaming replica; ``Ratings-Read-From:
primary`` sends one to the primary (a client that must read its own write).
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar
from urllib.parse import parse_qsl

from anyio import to_thread
from pydantic import BaseModel
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.metrics import Template
from app.api.predictions import query_body
from app.api.problems import error_response
from app.api.security import Access, access_of, bearer_key
from app.config import READ_NAMES, Settings, get_settings
from app.domain.documents.matchmaking import MatchmakingRequest
from app.domain.documents.predictions import QualityRequest
from app.domain.documents.shared import DEFAULT_PAGE, ID_PATTERN, MAX_PAGE, parse_time
from app.domain.ladders import LADDER_ID
from app.errors import InvalidInput, NotFound
from app.services import accuracy, ladders, matches, players, predictions
from app.services.auth import hash_key, passes_quietly
from app.services.matchmaking import matchmake
from app.storage import unit_of_work, versions
from app.storage.engine import (
    LoopConnection,
    on_postgres,
    read_connection,
    read_session_factory,
    read_url,
)
from app.storage.models import Ladder

#: The header a client sends to read from the primary rather than a replica.
READ_FROM = "ratings-read-from"

_ID = re.compile(ID_PATTERN)
_NUMBER = re.compile(r"[0-9]{1,10}")


class Unread(Exception):
    """The read path cannot read this request's query as its route does: FastAPI answers."""


# -- the query's parameters, read as the routes read them -------------------------------------


def _integer(query: dict[str, str], name: str, low: int, high: int) -> int | None:
    value = query.get(name)
    if value is None:
        return None
    if not _NUMBER.fullmatch(value) or not low <= int(value) <= high:
        raise Unread(name)
    return int(value)


def _text(query: dict[str, str], name: str, max_length: int) -> str | None:
    value = query.get(name)
    if value is not None and len(value) > max_length:
        raise Unread(name)
    return value


def _page(query: dict[str, str]) -> dict[str, Any]:
    limit = _integer(query, "limit", 1, MAX_PAGE)
    return {
        "limit": DEFAULT_PAGE if limit is None else limit,
        "cursor": _text(query, "cursor", 1024),
    }


def _id(value: str) -> str:
    if not 1 <= len(value) <= 128 or not _ID.match(value):
        raise Unread("id")
    return value


# -- the reads ----------------------------------------------------------------------------------

#: A read's keyword arguments for its service, in order (hashable: they are part of the key
#: of the bodies kept).
Args = tuple[tuple[str, Any], ...]
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
Parse = Callable[[dict[str, str], dict[str, str]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Read:
    """A GET read of the API: its name (for ``RATINGS_CACHE_CONTROL``), its route template
    (the metrics' label), its path, how its arguments are read from the path parameters
    and the query (:class:`Unread` when not as the route would), and the service that
    answers it (called with the session, the path's ladder when it names one, and the
    arguments)."""

    name: str
    path: str
    pattern: re.Pattern[str]
    parse: Parse
    service: Callable[..., BaseModel | str]
    #: What the metrics read of the matched route.
    route: Template
    #: The bodies of many requests in one statement on a DB-API connection, without a
    #: session (called with the connection, its dialect and a list of (ladder id,
    #: arguments); a body or the exception to answer with for each), when the read has
    #: such a form: its cost is then a share of a statement's, not a transaction's.
    direct: Callable[..., list[bytes | Exception]] | None = None

    def args(self, params: dict[str, str], query: dict[str, str]) -> Args:
        return tuple(self.parse(params, query).items())


def _read(
    name: str,
    path: str,
    parse: Parse,
    service: Callable[..., BaseModel | str],
    direct: Callable[..., list[bytes | Exception]] | None = None,
) -> Read:
    pattern = re.compile(re.sub(r"{(\w+)}", r"(?P<\1>[^/]+)", path) + "$")
    return Read(name, path, pattern, parse, service, Template(path), direct)


def _leaderboard_args(params: dict[str, str], query: dict[str, str]) -> dict[str, Any]:
    min_matches = _integer(query, "min_matches", 0, 2**31 - 1)
    return {**_page(query), "min_matches": min_matches or 0}


def _quality_args(params: dict[str, str], query: dict[str, str]) -> dict[str, Any]:
    # The GET form of the quality query: the POST body's fields as JSON values.
    try:
        body = query_body(
            QualityRequest, {name: query.get(name) for name in ("teams", "weights", "advantage")}
        )
    except InvalidInput:
        raise Unread("teams") from None
    return {"body": body.model_dump_json()}


def _quality(*, session: Session, ladder: Ladder, body: str) -> BaseModel:
    return predictions.predict(
        session=session, ladder=ladder, body=QualityRequest.model_validate_json(body)
    )


def _matchmaking_args(params: dict[str, str], query: dict[str, str]) -> dict[str, Any]:
    # The GET form of the matchmaking query: the POST body's fields as JSON values.
    try:
        body = query_body(
            MatchmakingRequest, {"players": query.get("players"), "teams": query.get("teams")}
        )
    except InvalidInput:
        raise Unread("players") from None
    return {"body": body.model_dump_json()}


def _matchmaking(*, session: Session, ladder: Ladder, body: str) -> BaseModel:
    return matchmake(
        session=session, ladder=ladder, body=MatchmakingRequest.model_validate_json(body)
    )


def _accuracy_args(params: dict[str, str], query: dict[str, str]) -> dict[str, Any]:
    window = _integer(query, "window", 1, accuracy.MAX_WINDOW)
    since = _text(query, "since", 64)
    try:
        return {"window": window, "since": None if since is None else parse_time(since, "since")}
    except ValueError:
        raise Unread("since") from None


def _player(params: dict[str, str], query: dict[str, str]) -> dict[str, Any]:
    return {"player_id": _id(params["player_id"])}


def _player_matches(params: dict[str, str], query: dict[str, str]) -> dict[str, Any]:
    player = query.get("player")
    return {"player_id": None if player is None else _id(player), **_page(query)}


READS: tuple[Read, ...] = (
    _read("ladders", "/v1/ladders", lambda p, q: _page(q), ladders.list_ladders),
    _read("ladder", "/v1/ladders/{ladder}", lambda p, q: {}, ladders.ladder_view),
    _read(
        "leaderboard", "/v1/ladders/{ladder}/leaderboard", _leaderboard_args, players.leaderboard
    ),
    _read(
        "player",
        "/v1/ladders/{ladder}/players/{player_id}",
        _player,
        players.get_player,
        players.player_bodies,
    ),
    _read(
        "history",
        "/v1/ladders/{ladder}/players/{player_id}/history",
        lambda p, q: {**_player(p, q), **_page(q)},
        players.player_history,
    ),
    _read("matches", "/v1/ladders/{ladder}/matches", _player_matches, matches.list_matches),
    _read(
        "match",
        "/v1/ladders/{ladder}/matches/{match_id}",
        lambda p, q: {"match_id": _id(p["match_id"])},
        matches.match_result,
    ),
    _read("accuracy", "/v1/ladders/{ladder}/accuracy", _accuracy_args, accuracy.ladder_accuracy),
    _read("quality", "/v1/ladders/{ladder}/quality", _quality_args, _quality),
    _read("matchmaking", "/v1/ladders/{ladder}/matchmaking", _matchmaking_args, _matchmaking),
)

assert tuple(read.name for read in READS) == READ_NAMES, "app.config names every read"


# -- the OpenAPI document ----------------------------------------------------------------------

_VALIDATOR_HEADERS = {
    "ETag": {
        "description": "The validator of the ladder's state (every ladder's, for the list): "
        "it changes with every write of the ladder.",
        "schema": {"type": "string"},
    },
    "Cache-Control": {
        "description": "As configured for this read (`RATINGS_CACHE_CONTROL`; `no-cache` "
        "by default).",
        "schema": {"type": "string"},
    },
}
_IF_NONE_MATCH = {
    "name": "If-None-Match",
    "in": "header",
    "required": False,
    "description": "An `ETag` of an earlier answer (or a list, or `*`): `304 Not Modified` "
    "while it is the ladder's current validator.",
    "schema": {"type": "string"},
}


def document_validators(schema: dict[str, Any]) -> dict[str, Any]:
    """Document in the OpenAPI ``schema`` what every read of :data:`READS` carries and
    answers: ``ETag`` and ``Cache-Control``, ``If-None-Match`` and ``304``."""
    paths = schema.get("paths", {})
    for read in READS:
        operation = paths.get(read.path, {}).get("get")
        if operation is None:
            continue
        parameters = operation.setdefault("parameters", [])
        if all(p.get("name") != "If-None-Match" for p in parameters):
            parameters.append(_IF_NONE_MATCH)
        responses = operation.setdefault("responses", {})
        responses.setdefault("200", {"description": "Successful Response"})["headers"] = (
            _VALIDATOR_HEADERS
        )
        responses["304"] = {
            "description": "Not Modified: `If-None-Match` names the current validator; no body.",
            "headers": _VALIDATOR_HEADERS,
        }
    return schema


# -- the answers kept ---------------------------------------------------------------------------


class BodyCache:
    """The bodies of the reads a worker answered, by read, arguments and validator, the
    least recently used dropped first once they pass ``max_bytes``. A validator changes
    with every change of its ladder, so a body kept is never stale: it is found only by
    a request of the same ladder state. Shared by the worker's threads.

    A ladder's bodies are kept for its newest state only: a body of a newer state drops
    those of the older ones (and one of an older state is not kept), so what a change
    removed (an erased player's card) leaves the worker's memory as soon as it serves the
    ladder again, not when the bytes run out."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._bodies: OrderedDict[Hashable, bytes] = OrderedDict()
        self._bytes = 0
        #: Per ladder: the state whose bodies are kept, and their keys.
        self._states: dict[str, tuple[tuple[int, int], set[Hashable]]] = {}
        self._ladder_of: dict[Hashable, str] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> bytes | None:
        with self._lock:
            body = self._bodies.get(key)
            if body is not None:
                self._bodies.move_to_end(key)
            return body

    def put(
        self, key: Hashable, body: bytes, *, ladder_id: str | None = None, tag: str = ""
    ) -> None:
        """Keep ``body`` under ``key``; with ``ladder_id``, as a body of the ladder's state
        named by its validator ``tag``."""
        if len(body) > self.max_bytes:
            return
        with self._lock:
            if ladder_id is not None and not self._newest_state(ladder_id, tag):
                return
            self._drop(key)
            if ladder_id is not None:
                self._states[ladder_id][1].add(key)
                self._ladder_of[key] = ladder_id
            self._bodies[key] = body
            self._bytes += len(body)
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._bodies)))

    def _newest_state(self, ladder_id: str, tag: str) -> bool:
        """Whether ``tag`` names the ladder's newest state seen; a newer one than before
        drops the bodies of the older."""
        state = state_order(tag)
        kept = self._states.get(ladder_id)
        if kept is not None and kept[0] > state:
            return False
        if kept is None or kept[0] < state:
            for old in list(kept[1]) if kept is not None else ():
                self._drop(old)
            self._states[ladder_id] = (state, set())
        return True

    def _drop(self, key: Hashable) -> None:
        old = self._bodies.pop(key, None)
        if old is not None:
            self._bytes -= len(old)
        ladder_id = self._ladder_of.pop(key, None)
        if ladder_id is not None:
            self._states[ladder_id][1].discard(key)

    def clear(self) -> None:
        with self._lock:
            self._bodies.clear()
            self._states.clear()
            self._ladder_of.clear()
            self._bytes = 0


def state_order(tag: str) -> tuple[int, int]:
    """A ladder validator (``versions.etag``: creation and version in hex) as numbers that
    order its states: a later creation, then a higher version, is newer."""
    created, _, version = tag.strip('"').partition("-")
    try:
        return int(created, 16), int(version, 16)
    except ValueError:
        return (0, 0)


def matches_tag(if_none_match: str | None, tag: str) -> bool:
    """Whether ``If-None-Match`` names ``tag`` (RFC 9110 13.1.2: ``*``, or a list of
    entity tags compared weakly)."""
    if not if_none_match:
        return False
    for candidate in if_none_match.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == tag:
            return True
    return False


@dataclass(frozen=True, slots=True)
class Answer:
    """A read's validator and body (None: ``304 Not Modified``)."""

    tag: str
    body: bytes | None


def _body_key(read: Read, ladder_id: str | None, args: Args, tag: str) -> Hashable:
    """Where a read's body is kept: under the validator of the state it was made from."""
    return (read.name, ladder_id, args, tag)


def _unknown_ladder(ladder_id: str) -> NotFound:
    return NotFound(f"ladder: no ladder {ladder_id[:64]!r}")


def serve(
    session: Session,
    *,
    read: Read,
    ladder_id: str | None,
    args: Args,
    access: Access,
    if_none_match: str | None,
    cache: BodyCache | None,
    tag: str | None = None,
) -> Answer:
    """The read in ``session``'s transaction: the key, the validator, then the body kept
    for it or the route's work rendered. ``tag``: the validator :class:`Gathered` read,
    with the key it checked; the body is then made in a snapshot no older than that
    validator's, so it is never older than the state the validator names."""
    if tag is None:
        access.check(session)
        if ladder_id is None:
            tag = versions.combined_etag(versions.ladder_states(session))
        else:
            state = versions.session_state(session, ladder_id)
            if state.created_at is None:
                raise _unknown_ladder(ladder_id)
            tag = versions.etag(state.created_at, state.version)
        if matches_tag(if_none_match, tag):
            return Answer(tag, None)
    key = _body_key(read, ladder_id, args, tag)
    body = cache.get(key) if cache is not None else None
    if body is None:
        if ladder_id is None:
            out = read.service(session=session, **dict(args))
        else:
            ladder = ladders.get_ladder(session=session, ladder_id=ladder_id, detached=True)
            out = read.service(session=session, ladder=ladder, **dict(args))
        body = (out if isinstance(out, str) else out.model_dump_json()).encode()
        if cache is not None:
            cache.put(key, body, ladder_id=ladder_id, tag=tag)
    return Answer(tag, body)


async def _read_states_now(
    pairs: list[tuple[str, str | None]], *, primary: bool, connection: LoopConnection
) -> list[versions.State]:
    """:func:`_read_states` as the module holds it at the call (a test may replace it)."""
    return await _read_states(pairs, primary=primary, connection=connection)


async def _read_states(
    pairs: list[tuple[str, str | None]], *, primary: bool, connection: LoopConnection
) -> list[versions.State]:
    """The validators of ``pairs``: on PostgreSQL on the event loop (``connection``), on
    SQLite in the thread pool."""
    if on_postgres(read_url(primary=primary)):
        return await connection.run(partial(versions.read_states_async, pairs=pairs))
    return await to_thread.run_sync(partial(_read_states_in_thread, pairs, primary=primary))


def _read_states_in_thread(
    pairs: list[tuple[str, str | None]], *, primary: bool
) -> list[versions.State]:
    with read_connection(primary=primary) as (dbapi, dialect):
        return versions.read_states(dbapi, dialect, pairs)


class Gathered(Generic[K, V]):
    """A worker's requests for one kind of row, gathered: every request that needs one
    joins the next statement, which starts when the one under way is answered, and one
    call of ``fetch`` (one statement: on the event loop, or on a pooled connection in one
    trip to the thread pool) answers them all, each with its value or its own exception.
    Under load a worker thus pays one round trip to the database for many reads, not one
    each.

    Never stale: a request joins only a statement that has not started yet, so the state
    it is answered from was read after it arrived, and a write whose response was sent
    before that is in it."""

    def __init__(self, fetch: Callable[[list[K]], Awaitable[Sequence[V | Exception]]]) -> None:
        self._fetch = fetch
        self._waiting: dict[K, asyncio.Future[V]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reading: asyncio.Task[None] | None = None

    async def get(self, key: K) -> V:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new event loop (a test client's): start afresh
            self._loop, self._waiting, self._reading = loop, {}, None
        future = self._waiting.get(key)
        if future is None:
            future = self._waiting[key] = loop.create_future()
        if self._reading is None:
            self._reading = loop.create_task(self._read())
        # Shielded: a request that goes away must not cancel the others' answer.
        return await asyncio.shield(future)

    async def _read(self) -> None:
        batch: dict[K, asyncio.Future[V]] = {}
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, {}
                keys = list(batch)
                try:
                    found = await self._fetch(keys)
                except Exception as exc:
                    found = [exc] * len(keys)
                for key, value in zip(keys, found, strict=True):
                    future = batch[key]
                    if future.done():
                        continue
                    if isinstance(value, Exception):
                        future.set_exception(value)
                        future.exception()  # retrieved: its waiter may have gone
                    else:
                        future.set_result(value)
        finally:
            self._reading = None
            for future in batch.values():  # cancelled itself (the loop closing)
                future.cancel()


async def _players(
    keys: list[tuple[str, Args]], *, direct: Callable[..., list[bytes | Exception]], primary: bool
) -> list[bytes | Exception]:
    """The bodies of gathered direct reads (:attr:`Read.direct`), in one statement, in the
    thread pool (their work is mostly the database's and the rendering's)."""

    def made() -> list[bytes | Exception]:
        with read_connection(primary=primary) as (dbapi, dialect):
            return direct(dbapi, dialect, [(ladder_id, dict(args)) for ladder_id, args in keys])

    return await to_thread.run_sync(made)


def _settle(
    state: versions.State,
    *,
    digest: str | None,
    read: Read,
    ladder_id: str,
    args: Args,
    if_none_match: str | None,
    cache: BodyCache | None,
) -> Answer | str | None:
    """The answer that needs no session, from the ladder's validator and the key's row:
    ``304`` or a body kept for the validator; the validator alone when nothing is kept for
    it (:func:`serve` makes the body); None when :func:`serve` must answer from the start:
    no such ladder, or a key to refuse or whose use is to be recorded."""
    if state.created_at is None:
        return None
    if digest is not None and not passes_quietly(
        state.key_hash, state.revoked, state.last_used_at, digest
    ):
        return None
    tag = versions.etag(state.created_at, state.version)
    if matches_tag(if_none_match, tag):
        return Answer(tag, None)
    body = cache.get(_body_key(read, ladder_id, args, tag)) if cache is not None else None
    return tag if body is None else Answer(tag, body)


#: A read, its path's parameters and its arguments.
Parsed = tuple[Read, dict[str, str], Args]
#: Requests whose reading :class:`ReadPath` keeps (all are dropped when it is full).
PARSED_KEPT = 2048
#: ... of a path and query of at most this many bytes (a few MB in all).
PARSED_KEPT_LENGTH = 1024


def _parse(path: str, query_string: bytes) -> Parsed | None:
    """The read of :data:`READS` that ``path`` names, with its parameters and the query's
    arguments; None when the path names none or the query cannot be read as its route
    reads it."""
    if not path.startswith("/v1/ladders"):
        return None
    for read in READS:
        found = read.pattern.match(path)
        if found is not None:
            params = found.groupdict()
            query = dict(parse_qsl(query_string.decode("latin-1"), keep_blank_values=True))
            try:
                return read, params, read.args(params, query)
            except Unread:
                return None
    return None


def _headers(scope: Scope) -> dict[bytes, bytes]:
    return {name.lower(): value for name, value in scope.get("headers", ())}


class ReadPath:
    """Pure ASGI: the reads of :data:`READS` served here, every other request passed on."""

    def __init__(self, app: ASGIApp, settings: Settings | None = None) -> None:
        self.app = app
        settings = settings or get_settings()
        self.cache = (
            BodyCache(int(settings.read_cache_mb * 1024 * 1024))
            if settings.read_cache_mb > 0
            else None
        )
        default = settings.cache_control.get("*", "no-cache")
        self.cache_control = {
            read.name: settings.cache_control.get(read.name, default).encode("latin-1")
            for read in READS
        }
        #: PostgreSQL's connections for the validators, on the event loop.
        self.connections = {primary: LoopConnection(primary=primary) for primary in (False, True)}
        self.validators = {
            primary: Gathered[tuple[str, str | None], versions.State](
                partial(_read_states_now, primary=primary, connection=self.connections[primary])
            )
            for primary in (False, True)
        }
        #: Gathered direct reads, by read and by database (primary or not).
        self.direct: dict[tuple[str, bool], Gathered[tuple[str, Args], bytes]] = {
            (read.name, primary): Gathered(partial(_players, direct=read.direct, primary=primary))
            for read in READS
            if read.direct is not None
            for primary in (False, True)
        }
        self._parsed: dict[tuple[str, bytes], Parsed | None] = {}

    async def _answer(
        self,
        *,
        read: Read,
        ladder_id: str | None,
        args: Args,
        access: Access,
        if_none_match: str | None,
    ) -> Answer:
        """The validator (gathered with the worker's other requests', on the event loop),
        then ``304`` or a kept body, else the body made in the thread pool."""
        tag: str | None = None
        if ladder_id is not None:
            if not LADDER_ID.fullmatch(ladder_id):  # it cannot exist: not even looked up
                raise _unknown_ladder(ladder_id)
            digest = hash_key(access.key) if access.key else None
            state = await self.validators[access.primary].get((ladder_id, digest))
            found = _settle(
                state,
                digest=digest,
                read=read,
                ladder_id=ladder_id,
                args=args,
                if_none_match=if_none_match,
                cache=self.cache,
            )
            if isinstance(found, Answer):
                return found
            tag = found
        if read.direct is not None and ladder_id is not None and tag is not None:
            body = await self.direct[read.name, access.primary].get((ladder_id, args))
            if self.cache is not None:
                self.cache.put(
                    _body_key(read, ladder_id, args, tag), body, ladder_id=ladder_id, tag=tag
                )
            return Answer(tag, body)
        work = partial(
            serve,
            read=read,
            ladder_id=ladder_id,
            args=args,
            access=access,
            if_none_match=if_none_match,
            cache=self.cache,
            tag=tag,
        )
        return await to_thread.run_sync(
            partial(
                unit_of_work.run,
                work,
                read_only=True,
                session_factory=read_session_factory(primary=access.primary),
            )
        )

    def _parse(self, path: str, query_string: bytes) -> Parsed | None:
        """The read a request's path and query name, and its arguments; None when this
        path does not take it. Kept by path and query (a client repeats its reads, and
        reading a quality query's teams costs more than answering it from a kept body)."""
        key = (path, query_string)
        if key in self._parsed:
            return self._parsed[key]
        parsed = _parse(path, query_string)
        if len(path) + len(query_string) <= PARSED_KEPT_LENGTH:
            if len(self._parsed) >= PARSED_KEPT:
                self._parsed.clear()
            self._parsed[key] = parsed
        return parsed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        parsed = self._parse(scope["path"], scope["query_string"])
        if parsed is None:
            await self.app(scope, receive, send)
            return
        read, params, args = parsed
        scope["path_params"] = dict(params)
        scope["route"] = read.route
        headers = _headers(scope)
        try:
            primary = _text_of(headers.get(READ_FROM.encode())) == "primary"
            key = bearer_key(_text_of(headers.get(b"authorization")))
            access = access_of(key, "read", primary=primary)
            answer = await self._answer(
                read=read,
                ladder_id=params.get("ladder"),
                args=args,
                access=access,
                if_none_match=_text_of(headers.get(b"if-none-match")),
            )
        except Exception as exc:  # rendered exactly as the app's handlers render it
            response = await error_response(Request(scope), exc)
            await response(scope, receive, send)
            return
        out_headers = [
            (b"etag", answer.tag.encode("latin-1")),
            (b"cache-control", self.cache_control[read.name]),
        ]
        if answer.body is None:
            await send({"type": "http.response.start", "status": 304, "headers": out_headers})
            await send({"type": "http.response.body", "body": b""})
            return
        out_headers += [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(answer.body)).encode("latin-1")),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": out_headers})
        await send({"type": "http.response.body", "body": answer.body})


def _text_of(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")
