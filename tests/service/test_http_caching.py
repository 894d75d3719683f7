"""HTTP caching of the reads: every read carries an ``ETag`` made of its ladder's state,
answers ``304`` to a matching ``If-None-Match``, changes with every write, and carries the
operator's ``Cache-Control``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.api.reads import BodyCache, ReadServer, matches_tag
from app.api.router import api_router
from app.config import get_settings
from app.services.auth import hash_key
from tests.service.helpers import assert_problem, create_ladder

LADDER = "/v1/ladders/test"

#: Every GET read of a ladder, with its query.
READS = (
    ("/v1/ladders", {}),
    (LADDER, {}),
    (f"{LADDER}/leaderboard", {"limit": 2}),
    (f"{LADDER}/players/alice", {}),
    (f"{LADDER}/players/alice/history", {"limit": 5}),
    (f"{LADDER}/matches", {"player": "alice"}),
    (f"{LADDER}/matches/m1", {}),
    (f"{LADDER}/accuracy", {"window": 10}),
    (f"{LADDER}/quality", {"teams": json.dumps([["alice"], ["bob"]])}),
    (f"{LADDER}/matchmaking", {"players": json.dumps(["alice", "bob", "carol", "dave"])}),
)


def _seed(client: TestClient) -> None:
    create_ladder(client)
    for n, (winner, loser) in enumerate((("alice", "bob"), ("carol", "alice")), start=1):
        response = client.post(
            f"{LADDER}/matches", json={"match_id": f"m{n}", "teams": [[winner], [loser]]}
        )
        assert response.status_code == 201, response.text


@pytest.fixture
def seeded(client: TestClient) -> TestClient:
    _seed(client)
    return client


def _tag(client: TestClient, path: str = f"{LADDER}/leaderboard", **query: Any) -> str:
    response = client.get(path, params=query)
    assert response.status_code == 200, response.text
    tag = response.headers["etag"]
    assert tag.startswith('"') and tag.endswith('"')
    return tag


@pytest.mark.parametrize(("path", "query"), READS)
def test_every_read_has_a_validator_and_answers_not_modified(
    seeded: TestClient, path: str, query: dict[str, Any]
) -> None:
    first = seeded.get(path, params=query)
    assert first.status_code == 200, first.text
    tag = first.headers["etag"]
    assert first.headers["cache-control"] == "no-cache"
    again = seeded.get(path, params=query, headers={"If-None-Match": tag})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == tag
    # Weak comparison, lists, and *, as RFC 9110 says.
    for header in (f"W/{tag}", f'"other", {tag}', "*"):
        assert seeded.get(path, params=query, headers={"If-None-Match": header}).status_code == 304
    other = seeded.get(path, params=query, headers={"If-None-Match": '"0-0"'})
    assert other.status_code == 200
    assert other.content == first.content


def test_the_get_quality_equals_the_post(seeded: TestClient) -> None:
    body = {"teams": [["alice", "bob"], ["carol", "dave"]], "advantage": [1, 0]}
    posted = seeded.post(f"{LADDER}/quality", json=body)
    got = seeded.get(
        f"{LADDER}/quality",
        params={"teams": json.dumps(body["teams"]), "advantage": json.dumps(body["advantage"])},
    )
    assert posted.status_code == got.status_code == 200
    assert got.json() == posted.json()
    assert_problem(seeded.get(f"{LADDER}/quality", params={"teams": "[["}), 422, "teams")
    assert_problem(
        seeded.get(f"{LADDER}/quality", params={"teams": json.dumps([["a"], ["a"]])}), 422
    )


def test_the_get_matchmaking_equals_the_post(seeded: TestClient) -> None:
    body = {"players": ["alice", "bob", "carol", "dave", "erin", "frank"], "teams": 3}
    posted = seeded.post(f"{LADDER}/matchmaking", json=body)
    got = seeded.get(
        f"{LADDER}/matchmaking",
        params={"players": json.dumps(body["players"]), "teams": json.dumps(body["teams"])},
    )
    assert posted.status_code == got.status_code == 200
    assert got.json() == posted.json() and len(got.json()["teams"]) == 3
    two = seeded.get(f"{LADDER}/matchmaking", params={"players": json.dumps(body["players"])})
    assert (
        two.json() == seeded.post(f"{LADDER}/matchmaking", json={"players": body["players"]}).json()
    )
    assert_problem(seeded.get(f"{LADDER}/matchmaking", params={"players": "["}), 422, "players")
    assert_problem(seeded.get(f"{LADDER}/matchmaking"), 422, "players")
    for teams in ("1", "two", "2.5"):
        query = {"players": json.dumps(body["players"]), "teams": teams}
        assert_problem(seeded.get(f"{LADDER}/matchmaking", params=query), 422, "teams")


def test_a_query_the_route_refuses_is_its_422(seeded: TestClient) -> None:
    for query in ({"limit": 0}, {"limit": "ten"}, {"limit": 1001}, {"min_matches": -1}):
        assert_problem(seeded.get(f"{LADDER}/leaderboard", params=query), 422)
    assert_problem(seeded.get(f"{LADDER}/leaderboard", params={"cursor": "x"}), 422, "cursor")
    assert_problem(seeded.get(f"{LADDER}/accuracy", params={"since": "yesterday"}), 422)
    assert_problem(seeded.get(f"{LADDER}/players/nobody"), 404, "player_id")
    assert_problem(seeded.get("/v1/ladders/nope/leaderboard"), 404, "ladder")
    assert_problem(seeded.get("/v1/ladders/NO PE/players/a"), 404, "ladder")


Write = Callable[[TestClient], Any]

#: Every kind of write of a ladder, each of which must change its validator.
WRITES: dict[str, Write] = {
    "match": lambda c: c.post(f"{LADDER}/matches", json={"teams": [["x"], ["y"]]}),
    "batch": lambda c: c.post(
        f"{LADDER}/matches/batch", json={"matches": [{"teams": [["x"], ["z"]]}]}
    ),
    "void": lambda c: c.delete(f"{LADDER}/matches/m1"),
    "seed": lambda c: c.put(f"{LADDER}/players/newcomer", json={"mu": 30.0, "sigma": 5.0}),
    "erase": lambda c: c.delete(f"{LADDER}/players/bob"),
    "description": lambda c: c.patch(LADDER, json={"description": "new words"}),
    "rebuild": lambda c: c.patch(LADDER, params={"rebuild": "true"}, json={"params": {"tau": 0.1}}),
    "recreate": lambda c: (
        c.delete(LADDER),
        c.post("/v1/ladders", json={"id": "test", "algorithm": "trueskill"}),
    ),
}


@pytest.mark.parametrize("write", WRITES)
def test_every_write_changes_the_validator(seeded: TestClient, write: str) -> None:
    tags = {path: _tag(seeded, path, **query) for path, query in READS[:2]}
    board = _tag(seeded)
    outcome = WRITES[write](seeded)
    for response in outcome if isinstance(outcome, tuple) else (outcome,):
        assert response.status_code < 300, response.text
    assert _tag(seeded) != board
    after = seeded.get(f"{LADDER}/leaderboard", headers={"If-None-Match": board})
    assert after.status_code == 200
    for path, query in READS[:2]:
        assert _tag(seeded, path, **query) != tags[path]


def test_a_refused_write_and_another_ladder_change_nothing(seeded: TestClient) -> None:
    board = _tag(seeded)
    refused = seeded.post(f"{LADDER}/matches", json={"teams": [["x"], ["x"]]})
    assert refused.status_code == 422
    assert _tag(seeded) == board
    create_ladder(seeded, "other")
    response = seeded.post("/v1/ladders/other/matches", json={"teams": [["a"], ["b"]]})
    assert response.status_code == 201
    assert _tag(seeded) == board


def test_a_read_of_a_ladder_made_again_is_not_the_old_one(seeded: TestClient) -> None:
    """A ladder deleted and made again under its id starts over at version 0: its
    validator still differs (its creation time is in it)."""
    create_ladder(seeded, "again")
    tag = _tag(seeded, "/v1/ladders/again")
    assert seeded.delete("/v1/ladders/again").status_code == 200
    create_ladder(seeded, "again")
    assert _tag(seeded, "/v1/ladders/again") != tag


@pytest.fixture
def configured(
    database_url: str, admin_key: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    monkeypatch.setenv("RATINGS_DATABASE_URL", database_url)
    monkeypatch.setenv(
        "RATINGS_CACHE_CONTROL", '{"*": "private, no-cache", "leaderboard": "public, max-age=5"}'
    )
    get_settings.cache_clear()
    from app.main import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as test_client:
        test_client.headers["Authorization"] = f"Bearer {admin_key}"
        yield test_client
    get_settings.cache_clear()


def test_cache_control_is_the_operators_per_read(configured: TestClient) -> None:
    _seed(configured)
    board = configured.get(f"{LADDER}/leaderboard")
    assert board.headers["cache-control"] == "public, max-age=5"
    player = configured.get(f"{LADDER}/players/alice")
    assert player.headers["cache-control"] == "private, no-cache"
    tag = board.headers["etag"]
    again = configured.get(f"{LADDER}/leaderboard", headers={"If-None-Match": tag})
    assert again.status_code == 304
    assert again.headers["cache-control"] == "public, max-age=5"


def test_cache_control_names_only_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RATINGS_CACHE_CONTROL", '{"leaderbord": "max-age=5"}')
    get_settings.cache_clear()
    with pytest.raises(ValueError, match="leaderbord"):
        get_settings()
    monkeypatch.setenv("RATINGS_CACHE_CONTROL", '{"leaderboard": "max-age=5\\r\\nX: y"}')
    get_settings.cache_clear()
    with pytest.raises(ValueError, match="one line"):
        get_settings()
    get_settings.cache_clear()


def test_if_none_match_is_read_as_rfc_9110_says() -> None:
    tag = '"5f-3"'
    assert matches_tag(tag, tag)
    assert matches_tag(f" W/{tag} ", tag)
    assert matches_tag(f'"a", W/"b", {tag}', tag)
    assert matches_tag("*", tag)
    assert not matches_tag(None, tag)
    assert not matches_tag("", tag)
    assert not matches_tag('"5f-4"', tag)
    assert not matches_tag("5f-3", tag)


def test_the_bodies_kept_stay_within_their_bytes() -> None:
    cache = BodyCache(max_bytes=10)
    cache.put("a", b"12345")
    cache.put("b", b"12345")
    assert cache.get("a") == b"12345"  # now the most recently used
    cache.put("c", b"123")
    assert cache.get("b") is None
    assert cache.get("a") == b"12345" and cache.get("c") == b"123"
    cache.put("huge", b"x" * 11)
    assert cache.get("huge") is None
    cache.put("a", b"1")
    assert cache.get("a") == b"1"


def test_a_ladders_bodies_are_kept_for_its_newest_state_only() -> None:
    cache = BodyCache(max_bytes=1000)
    old, new, newer = '"5f-3"', '"5f-4"', '"60-1"'  # a version later, then a new ladder
    cache.put(("card", "l", "alice", old), b"alice", ladder_id="l", tag=old)
    cache.put(("card", "m", "bob", old), b"bob", ladder_id="m", tag=old)
    cache.put(("board", "l", "", new), b"board", ladder_id="l", tag=new)
    assert cache.get(("card", "l", "alice", old)) is None  # the old state's body is gone
    assert cache.get(("card", "m", "bob", old)) == b"bob"  # another ladder's stays
    cache.put(("card", "l", "carol", old), b"carol", ladder_id="l", tag=old)
    assert cache.get(("card", "l", "carol", old)) is None  # a late old state is not kept
    assert cache.get(("board", "l", "", new)) == b"board"
    cache.put(("board", "l", "", newer), b"board2", ladder_id="l", tag=newer)
    assert cache.get(("board", "l", "", new)) is None
    assert cache.get(("board", "l", "", newer)) == b"board2"


def test_the_openapi_document_names_the_validators(client: TestClient) -> None:
    from app.api.reads import READS as SERVED

    paths = client.get("/openapi.json").json()["paths"]
    for read in SERVED:
        operation = paths[read.path]["get"]
        assert "If-None-Match" in {p["name"] for p in operation["parameters"]}
        assert set(operation["responses"]["304"]["headers"]) == {"ETag", "Cache-Control"}
        assert "ETag" in operation["responses"]["200"]["headers"]


def test_a_read_on_a_pinged_connection(
    seeded: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL the pool pings a connection that sat idle before handing it out, which
    leaves it in a transaction: the read path's single statement still runs (it was a 500)."""
    from app.storage import engine

    monkeypatch.setattr(engine, "PING_AFTER_IDLE_S", -1.0)  # every checkout pings
    tag = _tag(seeded)
    for _ in range(3):
        assert (
            seeded.get(f"{LADDER}/leaderboard", headers={"If-None-Match": tag}).status_code == 304
        )
        assert seeded.get(f"{LADDER}/players/alice").status_code == 200


def test_concurrent_reads_share_one_validator_statement(
    seeded: TestClient, admin_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reads that wait for a validator together are answered by one statement, each with
    the ladder's current validator; a write between two rounds shows in the next."""
    from app.api import reads

    rounds: list[list[tuple[str, str | None]]] = []
    original = reads._read_states

    async def noting(pairs: list[tuple[str, str | None]], **where: Any) -> Any:
        rounds.append(list(pairs))
        return await original(pairs, **where)

    monkeypatch.setattr(reads, "_read_states", noting)
    app = seeded.app
    headers = {"Authorization": f"Bearer {admin_key}"}
    paths = [f"{LADDER}/leaderboard", f"{LADDER}/players/alice", "/v1/ladders/other"] * 10

    async def read_all() -> list[Any]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://test", headers=headers
        ) as http:
            return await asyncio.gather(*(http.get(path) for path in paths))

    before = _tag(seeded)
    rounds.clear()
    responses = asyncio.run(read_all())
    assert [r.status_code for r in responses] == [200, 200, 404] * 10
    assert {r.headers["etag"] for r in responses if r.status_code == 200} == {before}
    # One statement for the thirty, one pair per (ladder, key).
    digest = hash_key(admin_key)
    assert rounds == [[("test", digest), ("other", digest)]]
    response = seeded.post(f"{LADDER}/matches", json={"teams": [["bob"], ["carol"]]})
    assert response.status_code == 201
    responses = asyncio.run(read_all())
    after = {r.headers["etag"] for r in responses if r.status_code == 200}
    assert after == {_tag(seeded)} and after != {before}


def test_concurrent_player_reads_share_one_statement(
    seeded: TestClient, admin_key: str, monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    """Player cards read together are made by one statement (one per request on SQLite),
    each with its own rank, and a player the ladder lacks gets its own 404."""
    from app.services import players

    statements: list[list[tuple[str, str]]] = []
    original = players.rating_repo.read_players

    def noting(dbapi: Any, dialect: str, pairs: list[tuple[str, str]]) -> Any:
        statements.append(list(pairs))
        return original(dbapi, dialect, pairs)

    monkeypatch.setattr(players.rating_repo, "read_players", noting)
    for teams in ([["dave"], ["erin"]], [["erin", "frank"], ["alice", "gina"]]):
        response = seeded.post(f"{LADDER}/matches", json={"teams": teams})
        assert response.status_code == 201, response.text
    names = ["alice", "bob", "carol", "dave", "erin", "frank", "gina", "nobody"] * 4

    async def read_all() -> list[Any]:
        transport = httpx.ASGITransport(app=seeded.app)
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://test",
            headers={"Authorization": f"Bearer {admin_key}"},
        ) as http:
            return await asyncio.gather(*(http.get(f"{LADDER}/players/{n}") for n in names))

    responses = asyncio.run(read_all())
    board = seeded.get(f"{LADDER}/leaderboard", params={"limit": 100}).json()["entries"]
    expected = {entry["player_id"]: entry for entry in board}
    assert len(expected) == 7
    for name, response in zip(names, responses, strict=True):
        if name == "nobody":
            assert_problem(response, 404, "nobody")
            continue
        assert response.status_code == 200, response.text
        found = response.json()
        for field in ("rank", "mu", "sigma", "conservative", "matches"):
            assert found[field] == expected[name][field], (name, field)
    pairs = sorted({("test", name) for name in names})
    if database_url.startswith("postgresql"):
        assert [sorted(pairs_of) for pairs_of in statements] == [pairs]
    else:
        assert sorted(pair for pairs_of in statements for pair in pairs_of) == pairs


def test_a_failed_validator_statement_fails_its_reads_alone(
    seeded: TestClient, admin_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database refuses the statement of one round: every read waiting on it gets the
    same 503, and the next round answers as usual."""
    from sqlalchemy.exc import OperationalError

    from app.api import reads

    original = reads._read_states
    failures = [OperationalError("SELECT", {}, Exception("the server went away"))]

    async def failing_once(pairs: list[tuple[str, str | None]], **where: Any) -> Any:
        if failures:
            raise failures.pop()
        return await original(pairs, **where)

    monkeypatch.setattr(reads, "_read_states", failing_once)
    app = seeded.app
    headers = {"Authorization": f"Bearer {admin_key}"}

    async def read_all(n: int) -> list[Any]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://test", headers=headers
        ) as http:
            return await asyncio.gather(*(http.get(f"{LADDER}/leaderboard") for _ in range(n)))

    failed = asyncio.run(read_all(5))
    assert [r.status_code for r in failed] == [503] * 5
    assert_problem(failed[0], 503)
    assert [r.status_code for r in asyncio.run(read_all(5))] == [200] * 5


def test_head_answers_as_get_without_the_body(seeded: TestClient) -> None:
    """HEAD works wherever GET does: the same status and headers, no body."""
    for path in (f"{LADDER}/leaderboard", "/console", "/healthz", "/console/static/console.css"):
        got = seeded.get(path)
        head = seeded.head(path)
        assert head.status_code == got.status_code == 200, path
        assert head.content == b""
        assert head.headers.get("content-length") == got.headers.get("content-length")
        assert head.headers.get("etag") == got.headers.get("etag")
    tag = _tag(seeded)
    assert seeded.head(f"{LADDER}/leaderboard", headers={"If-None-Match": tag}).status_code == 304
    assert seeded.head(f"{LADDER}/players/nobody").status_code == 404
    assert seeded.head(f"{LADDER}/fit").status_code == 405  # POST alone


@pytest.mark.parametrize(("path", "query"), READS)
def test_a_read_served_by_its_route_answers_as_the_read_path_does(
    seeded: TestClient, path: str, query: dict[str, Any]
) -> None:
    """Each read is declared once: its FastAPI route (what the read path passes on) answers
    with the same body, validator, ``Cache-Control`` and ``304`` as the read path."""
    # The API's routes alone, without the read path in front of them, with a server (and
    # its kept bodies) of their own.
    routes_alone = FastAPI()
    routes_alone.include_router(api_router)
    routes_alone.state.reads = ReadServer(get_settings())
    fast = seeded.get(path, params=query)
    with TestClient(routes_alone) as routes:
        first = routes.get(path, params=query)
        assert first.status_code == 200, first.text
        assert first.content == fast.content
        assert first.headers["etag"] == fast.headers["etag"]
        assert first.headers["cache-control"] == fast.headers["cache-control"] == "no-cache"
        again = routes.get(path, params=query, headers={"If-None-Match": fast.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
        assert again.headers["etag"] == fast.headers["etag"]
