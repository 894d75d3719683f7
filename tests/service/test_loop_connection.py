"""The validators' statements on the event loop (``LoopConnection``, PostgreSQL): the same
states as the pooled path, the pool's settings and bounds, a new connection after a loss
and on each event loop, and none left open once the engines are disposed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from app.config import get_settings
from app.services.auth import hash_key
from app.storage import versions
from app.storage.engine import LoopConnection, dispose_engines, get_engine, read_connection


@pytest.fixture
def postgres(client: TestClient, database_url: str) -> Iterator[TestClient]:
    if not database_url.startswith("postgresql"):
        pytest.skip("PostgreSQL only: SQLite's validators are read in the thread pool")
    assert client.post("/v1/ladders", json={"id": "loop", "algorithm": "elo"}).status_code == 201
    yield client


async def _backend(connection: Any) -> int:
    row = await (await connection.execute("SELECT pg_backend_pid()")).fetchone()
    return int(row[0])


def test_the_states_are_the_pooled_paths(postgres: TestClient, admin_key: str) -> None:
    match = {"teams": [["a"], ["b"]], "ranks": [1, 2]}
    assert postgres.post("/v1/ladders/loop/matches", json=match).status_code == 201
    pairs: list[tuple[str, str | None]] = [
        ("loop", hash_key(admin_key)),
        ("loop", None),
        ("nowhere", hash_key("not a key")),
    ]
    loop_connection = LoopConnection(primary=True)

    async def states() -> list[versions.State]:
        return await loop_connection.run(lambda c: versions.read_states_async(c, pairs))

    on_loop = asyncio.run(states())
    with read_connection(primary=True) as (dbapi, dialect):
        pooled = versions.read_states(dbapi, dialect, pairs)
    assert on_loop == pooled
    assert on_loop[0].version > 0 and on_loop[0].key_hash == hash_key(admin_key)
    assert on_loop[2].created_at is None and on_loop[2].key_hash is None


def test_the_pools_settings_and_autocommit(
    postgres: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATINGS_STATEMENT_TIMEOUT_MS", "4321")
    get_settings.cache_clear()
    loop_connection = LoopConnection(primary=True)

    async def settings(connection: Any) -> tuple[Any, ...]:
        cursor = await connection.execute("SELECT current_setting('statement_timeout')")
        row = await cursor.fetchone()
        libpq = connection.info.get_parameters()
        return row[0], libpq, connection.autocommit, connection.reply_timeout_s

    timeout, libpq, autocommit, bound = asyncio.run(loop_connection.run(settings))
    settings_now = get_settings()
    assert timeout == "4321ms"
    assert libpq["connect_timeout"] == str(settings_now.connect_timeout_s)
    assert libpq["tcp_user_timeout"] == str(settings_now.tcp_user_timeout_ms)
    assert libpq["keepalives_idle"] == str(settings_now.tcp_keepalives_idle_s)
    assert autocommit is True
    assert bound == pytest.approx((4321 + settings_now.reply_grace_ms) / 1000)


def test_a_lost_connection_fails_one_statement_and_the_next_connects_anew(
    postgres: TestClient, database_url: str
) -> None:
    loop_connection = LoopConnection(primary=True)

    async def first_then_after_loss() -> tuple[int, int]:
        before = await loop_connection.run(_backend)
        with get_engine(database_url).begin() as sql:
            sql.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": before})
        with pytest.raises(OperationalError):  # the handlers' 503
            await loop_connection.run(_backend)
        return before, await loop_connection.run(_backend)

    before, after = asyncio.run(first_then_after_loss())
    assert after != before


def test_a_reply_that_never_comes_is_bounded(postgres: TestClient) -> None:
    """The client's own bound (a frozen server or network): the statement fails after it,
    not after the statement, and the connection is closed and replaced."""
    loop_connection = LoopConnection(primary=True)

    async def sleep_past_the_bound() -> tuple[float, int, int]:
        before = await loop_connection.run(_backend)
        assert loop_connection._connection is not None
        loop_connection._connection.reply_timeout_s = 0.2
        started = time.monotonic()
        with pytest.raises(OperationalError, match=r"no reply from the database within 0\.2 s"):
            await loop_connection.run(lambda c: c.execute("SELECT pg_sleep(3)"))
        took = time.monotonic() - started
        return took, before, await loop_connection.run(_backend)

    took, before, after = asyncio.run(sleep_past_the_bound())
    assert took < 2.5
    assert after != before


def test_one_connection_per_event_loop_and_none_left_after_dispose(postgres: TestClient) -> None:
    loop_connection = LoopConnection(primary=True)

    async def twice() -> list[int]:
        return [await loop_connection.run(_backend), await loop_connection.run(_backend)]

    first = asyncio.run(twice())
    assert first[0] == first[1]  # the same connection on one loop
    second = asyncio.run(twice())
    assert second[0] == second[1] != first[0]  # a new loop: a new connection
    connection = loop_connection._connection
    assert connection is not None and not connection.closed
    dispose_engines()
    assert connection.closed and loop_connection._connection is None
