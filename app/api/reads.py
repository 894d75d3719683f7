"""The API's reads, its GETs: each declared once (:data:`READS`) and served one way.

A :class:`Read` declares a GET: its path, its query (a model of :mod:`app.api.params`), the
service that answers it and what the OpenAPI document says of it. Two things are made
from :data:`READS`:

- the FastAPI routes (:func:`read_routes`): the OpenAPI document, the route table (a
  405's ``Allow``, the body gate's scopes), and the requests the read path passes on;
- the read path (:class:`ReadPath`), pure ASGI ahead of FastAPI's routing, which for a
  short read costs more than its queries: it matches the path with the route's own
  pattern and reads the query with the route's own model. A request it cannot read so
  (a query the model refuses) goes on to FastAPI, which answers it: its 422.

Both answer through one :class:`ReadServer`, with one Bearer parser and one key check (the
rest of the API's). Every read of a ladder carries its validator (``ETag``,
:mod:`app.api.caching`), and ``If-None-Match`` naming it is a ``304``. The validator and
the key's row are read by :class:`~app.api.gathering.Gathered`, which gathers the requests
of a worker waiting for one into one statement, sent on PostgreSQL from the event loop
itself (``LoopConnection``: no thread hand-off); a ``304`` or a kept body is then answered
on the event loop, and only a body to make goes to the thread pool (the service in a read
transaction). A read with a direct form (:attr:`Read.direct`: a player's card) makes its
body without a session instead, gathered with the worker's other such reads into one
statement. ``Cache-Control`` is the operator's, per read (``RATINGS_CACHE_CONTROL``).

With ``RATINGS_READ_DATABASE_URL`` reads go to a streaming replica; one sent with a write's
``Ratings-Consistency-Token`` sees that write (:mod:`app.api.consistency`), and
``Ratings-Read-From: primary`` sends one to the primary.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Annotated, Any
from urllib.parse import parse_qsl

from anyio import to_thread
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, TypeAdapter, ValidationError
from sqlalchemy.orm import Session
from starlette.routing import compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.caching import Answer, BodyCache, matches_tag
from app.api.consistency import TOKEN_HEADER, Replay, reads_primary, replicated
from app.api.deps import ReadAccess
from app.api.gathering import Gathered
from app.api.metrics import Template
from app.api.params import (
    PATH_PARAMS,
    AccuracyQuery,
    EventsQuery,
    LeaderboardQuery,
    MatchesQuery,
    MatchmakingQuery,
    PageQuery,
    QualityQuery,
    ReadQuery,
)
from app.api.problems import error_response
from app.api.security import Access, access_of, bearer_key
from app.config import READ_NAMES, Settings
from app.domain.documents.accuracy import AccuracyOut
from app.domain.documents.events import EventPage
from app.domain.documents.ladders import LadderOut, LadderPage
from app.domain.documents.matches import MatchPage, MatchResult
from app.domain.documents.matchmaking import MatchmakingOut, MatchmakingRequest
from app.domain.documents.players import HistoryPage, LeaderboardPage, PlayerOut
from app.domain.documents.predictions import QualityOut, QualityRequest
from app.domain.documents.seasons import SeasonPage
from app.domain.ladders import LADDER_ID
from app.errors import InvalidInput, NotFound
from app.services import accuracy, events, ladders, matches, players, predictions, seasons
from app.services.auth import check_key, hash_key, use_due
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

__all__ = ["READS", "BodyCache", "Read", "ReadPath", "ReadServer", "matches_tag", "read_routes"]

#: The header a client sends to read from the primary rather than a replica.
READ_FROM = "ratings-read-from"

#: The header of a read that must see a write (its answer's token).
TOKEN = TOKEN_HEADER.lower().encode()

#: A read's keyword arguments for its service, in order (hashable: they are part of the key
#: of the bodies kept).
Args = tuple[tuple[str, Any], ...]
#: How the path's ids are read (the ladder's is any text: an unknown one is a 404).
_PATH_IDS = {name: TypeAdapter(kind) for name, kind in PATH_PARAMS.items() if name != "ladder"}


# -- the declarations --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Read:
    """A GET read of the API, declared once.

    ``name`` names it in ``RATINGS_CACHE_CONTROL``; ``operation`` is its route's name (the
    OpenAPI operation's). The ``service`` answers it, called with the session, the path's
    ladder when it names one, the path's other ids and the query's arguments
    (:meth:`ReadQuery.arguments`)."""

    name: str
    path: str
    operation: str
    service: Callable[..., BaseModel | str]
    response_model: type[BaseModel]
    summary: str
    tag: str
    query: type[ReadQuery] | None = None
    description: str | None = None
    #: The bodies of many requests in one statement on a DB-API connection, without a
    #: session (called with the connection, its dialect and a list of (ladder id,
    #: arguments); a body or the exception to answer with for each), when the read has
    #: such a form: its cost is then a share of a statement's, not a transaction's.
    direct: Callable[..., list[bytes | Exception]] | None = None
    #: The path as a pattern, as FastAPI's route matches it.
    pattern: re.Pattern[str] = field(init=False)
    #: What the metrics read of the matched route.
    route: Template = field(init=False)
    #: The path's parameters, in order.
    params: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        pattern, _, convertors = compile_path(self.path)
        object.__setattr__(self, "pattern", pattern)
        object.__setattr__(self, "route", Template(self.path))
        object.__setattr__(self, "params", tuple(convertors))

    def arguments(self, params: dict[str, Any], query: ReadQuery | None) -> Args:
        """The service's arguments for the path's ``params`` (read) and ``query``."""
        values = {name: value for name, value in params.items() if name != "ladder"}
        if query is not None:
            values.update(query.arguments())
        return tuple(values.items())

    def read(self, params: dict[str, str], query: dict[str, str]) -> Args:
        """The service's arguments for a request's path parameters and query, read by the
        route's rules (``ValidationError`` or ``InvalidInput`` where it refuses them)."""
        for name, value in params.items():
            adapter = _PATH_IDS.get(name)
            if adapter is not None:
                adapter.validate_python(value)
        return self.arguments(
            params, None if self.query is None else self.query.model_validate(query)
        )


def _quality(*, session: Session, ladder: Ladder, body: str) -> BaseModel:
    return predictions.predict(
        session=session, ladder=ladder, body=QualityRequest.model_validate_json(body)
    )


def _matchmaking(*, session: Session, ladder: Ladder, body: str) -> BaseModel:
    return matchmake(
        session=session, ladder=ladder, body=MatchmakingRequest.model_validate_json(body)
    )


_ACCURACY = f"""\
How well the ladder's predictions did: every match is stored with each team's probability
of finishing first, as the ladder's model gave it before the match, and scored against the
outcome (prediction error, log loss, Brier score, calibration). Without parameters the
figures cover every match that counts (voided ones do not), from a running tally kept in
the same transaction as each recording, void and rebuild, so the answer costs no scan.
`window=N` looks at the ladder's N newest matches that count instead (at most
{accuracy.MAX_WINDOW:,}); `since=T` keeps those of them played at or after T (a window of
{accuracy.MAX_WINDOW:,} when `window` is not given). Matches recorded before win
probabilities were stored are not scored until the ladder is rebuilt.
"""
_EVENTS = """\
Every change a consumer acts on, written in the same transaction as the change (a
rolled-back change has none): `match.recorded`, `match.voided`, `ladder.rebuilt`,
`season.started`, `player.erased`, `player.tier_changed` (tiers by threshold). Oldest
first; pass `next_cursor` as `after` for the next page, and poll with it: it never skips
an event, whatever commits meanwhile (a ladder's events are numbered in the order their
transactions commit).
"""
_GET_FORM = """\
The answer of `POST /v1/ladders/{{ladder}}/{name}` for the body whose fields are the
query's JSON values (URL-encoded), with an `ETag` like every read: a client or cache that
asks again with `If-None-Match` gets `304 Not Modified` until the ladder changes."""

READS: tuple[Read, ...] = (
    Read(
        "ladders",
        "/v1/ladders",
        "list_ladders",
        ladders.list_ladders,
        LadderPage,
        "List ladders",
        "ladders",
        query=PageQuery,
    ),
    Read(
        "ladder",
        "/v1/ladders/{ladder}",
        "get_ladder",
        ladders.ladder_view,
        LadderOut,
        "A ladder with its counts",
        "ladders",
    ),
    Read(
        "leaderboard",
        "/v1/ladders/{ladder}/leaderboard",
        "get_leaderboard",
        players.leaderboard,
        LeaderboardPage,
        "Players by conservative rating, highest first",
        "leaderboards",
        query=LeaderboardQuery,
    ),
    Read(
        "player",
        "/v1/ladders/{ladder}/players/{player_id}",
        "get_player",
        players.get_player,
        PlayerOut,
        "A player's rating",
        "players",
        direct=players.player_bodies,
    ),
    Read(
        "seasons",
        "/v1/ladders/{ladder}/seasons",
        "list_seasons",
        seasons.list_seasons,
        SeasonPage,
        "The ladder's seasons, newest first",
        "seasons",
        query=PageQuery,
    ),
    Read(
        "season_leaderboard",
        "/v1/ladders/{ladder}/seasons/{season}/leaderboard",
        "get_season_leaderboard",
        seasons.standings,
        LeaderboardPage,
        "A closed season's final standings, best first",
        "seasons",
        query=PageQuery,
        description="The archive of a closed season: every player rated when the next "
        "season opened, with the rating the reset started from, the season's matches "
        "that count and the rank among them, paged like the leaderboard. The current "
        "season has no archive yet (409): its standings are the leaderboard.",
    ),
    Read(
        "history",
        "/v1/ladders/{ladder}/players/{player_id}/history",
        "get_player_history",
        players.player_history,
        HistoryPage,
        "A player's rating changes, newest first",
        "players",
        query=PageQuery,
    ),
    Read(
        "matches",
        "/v1/ladders/{ladder}/matches",
        "list_matches",
        matches.list_matches,
        MatchPage,
        "Recorded matches, newest first",
        "matches",
        query=MatchesQuery,
        description="Newest first by `seq`, the order of recording (seqs count across all "
        "ladders, so a ladder's have gaps); voided matches stay listed, marked `voided`.",
    ),
    Read(
        "match",
        "/v1/ladders/{ladder}/matches/{match_id}",
        "get_match",
        matches.match_result,
        MatchResult,
        "A recorded match",
        "matches",
    ),
    Read(
        "accuracy",
        "/v1/ladders/{ladder}/accuracy",
        "get_accuracy",
        accuracy.ladder_accuracy,
        AccuracyOut,
        "Prediction accuracy of the ladder (read)",
        "predictions",
        query=AccuracyQuery,
        description=_ACCURACY,
    ),
    Read(
        "quality",
        "/v1/ladders/{ladder}/quality",
        "get_quality",
        _quality,
        QualityOut,
        "Quality of proposed teams, as a GET a cache can keep (read)",
        "predictions",
        query=QualityQuery,
        description=_GET_FORM.format(name="quality"),
    ),
    Read(
        "matchmaking",
        "/v1/ladders/{ladder}/matchmaking",
        "get_matchmaking",
        _matchmaking,
        MatchmakingOut,
        "Split players into the most balanced teams, as a GET a cache can keep (read)",
        "predictions",
        query=MatchmakingQuery,
        description=_GET_FORM.format(name="matchmaking"),
    ),
    Read(
        "events",
        "/v1/ladders/{ladder}/events",
        "list_events",
        events.event_page,
        EventPage,
        "The ladder's events, oldest first",
        "events",
        query=EventsQuery,
        description=_EVENTS,
    ),
)

assert tuple(read.name for read in READS) == READ_NAMES, "app.config names every read"


# -- the answer --------------------------------------------------------------------------------


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
    the key's 401 (:func:`check_key`), the ladder's 404, ``304`` or a body kept for the
    validator; the validator alone when nothing is kept for it (:func:`serve` makes the
    body); None when the key's use is to be recorded (:func:`serve` answers from the
    start, in a transaction)."""
    if digest is not None:
        key = check_key(state.key, digest, "read", ladder_id)
        if use_due(key, datetime.now(UTC)):
            return None
    if state.created_at is None:
        raise _unknown_ladder(ladder_id)
    tag = versions.etag(state.created_at, state.version)
    if matches_tag(if_none_match, tag):
        return Answer(tag, None)
    body = cache.get(_body_key(read, ladder_id, args, tag)) if cache is not None else None
    return tag if body is None else Answer(tag, body)


class ReadServer:
    """The reads' one way of answering, shared by a worker's read path and routes: the
    bodies it kept, the validators and direct reads it gathers, ``Cache-Control``."""

    def __init__(self, settings: Settings) -> None:
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
        #: How far the replica has replayed, for reads sent with a consistency token.
        self.replay = (
            Replay(self.connections[False], settings.consistency_wait_ms / 1000)
            if replicated(settings)
            else None
        )
        self.validators = {
            primary: Gathered[tuple[str, str | None], versions.State](
                partial(self._states, primary=primary)
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

    async def _states(
        self, pairs: list[tuple[str, str | None]], *, primary: bool
    ) -> list[versions.State]:
        return await _read_states(pairs, primary=primary, connection=self.connections[primary])

    async def answer(
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

    def headers(self, read: Read, answer: Answer) -> list[tuple[bytes, bytes]]:
        """The answer's headers: its validator and ``Cache-Control``, and for a body its
        type and length."""
        headers = [
            (b"etag", answer.tag.encode("latin-1")),
            (b"cache-control", self.cache_control[read.name]),
        ]
        if answer.body is not None:
            headers += [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(answer.body)).encode("latin-1")),
            ]
        return headers


# -- the routes --------------------------------------------------------------------------------


def _endpoint(read: Read) -> Callable[..., Awaitable[Response]]:
    """The route of ``read``: FastAPI reads the path and the query by the declaration (its
    422s are its own), the server answers."""

    async def endpoint(request: Request, access: Access, **values: Any) -> Response:
        query = values.pop("query", None)
        args = read.arguments(values, query)
        server: ReadServer = request.app.state.reads
        answer = await server.answer(
            read=read,
            ladder_id=values.get("ladder"),
            args=args,
            access=access,
            if_none_match=request.headers.get("if-none-match"),
        )
        response = Response(answer.body, status_code=200 if answer.body is not None else 304)
        response.raw_headers = server.headers(read, answer)
        return response

    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [
        inspect.Parameter("request", keyword, annotation=Request),
        inspect.Parameter("access", keyword, annotation=ReadAccess),
        *(inspect.Parameter(name, keyword, annotation=PATH_PARAMS[name]) for name in read.params),
    ]
    if read.query is not None:
        parameters.append(
            inspect.Parameter("query", keyword, annotation=Annotated[read.query, Query()])
        )
    endpoint.__signature__ = inspect.Signature(parameters, return_annotation=Response)  # type: ignore[attr-defined]
    endpoint.__name__ = endpoint.__qualname__ = read.operation
    endpoint.__doc__ = read.description
    return endpoint


def read_routes() -> APIRouter:
    """The routes of :data:`READS`."""
    router = APIRouter()
    for read in READS:
        router.add_api_route(
            read.path,
            _endpoint(read),
            methods=["GET"],
            response_model=read.response_model,
            summary=read.summary,
            description=read.description or "",
            tags=[read.tag],
            name=read.operation,
        )
    return router


# -- the read path -----------------------------------------------------------------------------


#: A read, its path's parameters and its arguments.
Parsed = tuple[Read, dict[str, str], Args]
#: Requests whose reading :class:`ReadPath` keeps (all are dropped when it is full).
PARSED_KEPT = 2048
#: ... of a path and query of at most this many bytes (a few MB in all).
PARSED_KEPT_LENGTH = 1024


def _parse(path: str, query_string: bytes) -> Parsed | None:
    """The read of :data:`READS` that ``path`` names, with its parameters and the query's
    arguments; None when the path names none or its route refuses the path or query."""
    if not path.startswith("/v1/ladders"):
        return None
    for read in READS:
        found = read.pattern.match(path)
        if found is not None:
            params = found.groupdict()
            query = dict(parse_qsl(query_string.decode("latin-1"), keep_blank_values=True))
            try:
                return read, params, read.read(params, query)
            except (ValidationError, InvalidInput):
                return None
    return None


def _headers(scope: Scope) -> dict[bytes, bytes]:
    return {name.lower(): value for name, value in scope.get("headers", ())}


class ReadPath:
    """Pure ASGI: the reads of :data:`READS` served here, every other request passed on."""

    def __init__(self, app: ASGIApp, server: ReadServer) -> None:
        self.app = app
        self.server = server
        self._parsed: dict[tuple[str, bytes], Parsed | None] = {}

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
            primary = await reads_primary(
                self.server.replay,
                asked=_text_of(headers.get(READ_FROM.encode())) == "primary",
                token=_text_of(headers.get(TOKEN)),
            )
            key = bearer_key(_text_of(headers.get(b"authorization")))
            ladder_id = params.get("ladder")
            access = access_of(key, "read", primary=primary, ladder=ladder_id)
            answer = await self.server.answer(
                read=read,
                ladder_id=ladder_id,
                args=args,
                access=access,
                if_none_match=_text_of(headers.get(b"if-none-match")),
            )
        except Exception as exc:  # rendered exactly as the app's handlers render it
            response = await error_response(Request(scope), exc)
            await response(scope, receive, send)
            return
        status = 200 if answer.body is not None else 304
        out_headers = self.server.headers(read, answer)
        await send({"type": "http.response.start", "status": status, "headers": out_headers})
        await send({"type": "http.response.body", "body": answer.body or b""})


def _text_of(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")
