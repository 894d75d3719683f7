"""Guarantee 4, database loss: with PostgreSQL unreachable or frozen every request that needs
it gets a 503 problem+json with Retry-After within the configured bound, never a hang,
``/readyz`` says 503, and the service recovers by itself when the database comes back (a
connection found dead is dropped with every other one opened before it, and the pool
connects anew).

The database "goes away" behind a loopback TCP proxy (tests/reliability/proxy.py), never by
stopping the shared PostgreSQL server. The served process gets small bounds so that each case
takes seconds; every client call has a timeout far above them, so a hang fails the test
instead of blocking it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from sqlalchemy import Connection, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from app.config import get_settings
from app.storage.engine import BoundedConnection, dispose_engines, get_engine
from app.storage.repositories.rerating import lift_statement_timeout
from tests.reliability import faults
from tests.reliability.conftest import Server, create_ladder, report
from tests.reliability.invariants import check_ladder
from tests.reliability.proxy import TcpProxy

#: The client gives up after this long: far more than any answer of a live service takes.
CLIENT_TIMEOUT_S = 30.0

#: The served process's bounds, small so that a frozen database costs seconds.
STATEMENT_TIMEOUT_MS = 2000
REPLY_GRACE_MS = 1000
CONNECT_TIMEOUT_S = 2
POOL_TIMEOUT_S = 2.0
READINESS_TIMEOUT_S = 2.0
BOUNDS = {
    "RATINGS_STATEMENT_TIMEOUT_MS": str(STATEMENT_TIMEOUT_MS),
    "RATINGS_REPLY_GRACE_MS": str(REPLY_GRACE_MS),
    "RATINGS_CONNECT_TIMEOUT_S": str(CONNECT_TIMEOUT_S),
    "RATINGS_POOL_TIMEOUT_S": str(POOL_TIMEOUT_S),
    "RATINGS_READINESS_TIMEOUT_S": str(READINESS_TIMEOUT_S),
}
#: The longest wait for one reply on an open connection.
REPLY_TIMEOUT_S = (STATEMENT_TIMEOUT_MS + REPLY_GRACE_MS) / 1000
#: The longest a request holding a connection may wait on a lost database: one reply, or
#: the ping of an idle connection and a new connection in its place.
BOUND_S = max(REPLY_TIMEOUT_S, 2 * CONNECT_TIMEOUT_S)
#: Room for a loaded machine: the bounds are checked, never the machine's speed.
MARGIN_S = BOUND_S + 5.0


def _within_bound(took: float, bound: float = BOUND_S) -> None:
    assert took < bound + MARGIN_S, f"{took:.1f} s, bound {bound:g} s"


@pytest.fixture
def proxied(database_url: str, admin_key: str) -> Iterator[Callable[..., tuple[Server, TcpProxy]]]:
    """``proxied(**env)``: a server with :data:`BOUNDS` (and ``env``) whose every connection
    to PostgreSQL goes through a proxy the test can cut, freeze and restore."""
    if not database_url.startswith("postgresql"):
        pytest.skip("PostgreSQL only: SQLite has no network to lose")
    started: list[tuple[Server, TcpProxy]] = []

    def start(**env: str) -> tuple[Server, TcpProxy]:
        url = make_url(database_url)
        proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432)
        through = url.set(host="127.0.0.1", port=proxy.port)
        server = Server(
            through.render_as_string(hide_password=False), admin_key, **{**BOUNDS, **env}
        )
        started.append((server, proxy))
        server.start()
        return server, proxy

    yield start
    for server, proxy in started:
        server.stop()
        proxy.close()


def _assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.headers["retry-after"] == "1"
    assert response.json()["detail"] == "database: unavailable or busy; retry shortly"


def _assert_not_ready(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"].startswith("database: ")


def _timed(call: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def _wait_ready(http: httpx.Client) -> int:
    for attempt in range(200):
        if http.get("/readyz").status_code == 200:
            return attempt
        time.sleep(0.1)
    raise AssertionError("the service did not recover")


@pytest.mark.parametrize(
    ("failure", "first"),
    [
        ("cut", "write"),
        ("unresponsive", "write"),
        ("blackhole", "write"),
        ("blackhole", "read"),
    ],
)
def test_database_loss_gives_503_within_the_bound_and_recovers(
    proxied: Callable[..., tuple[Server, TcpProxy]], failure: str, first: str
) -> None:
    """``cut``: the host went down; ``unresponsive``: it came back hung; ``blackhole``: the
    open connections freeze (TCP still acknowledged, nothing answered) and new ones hang.
    The first request meets the pooled connection the request before it used; the second
    one a connection opened during the outage."""
    server, proxy = proxied()
    played = {"match_id": "m-1", "teams": [["p0"], ["p1"]], "ranks": [1, 2]}
    refused = {"match_id": "m-2", "teams": [["p1"], ["p2"]], "ranks": [1, 2]}
    board = "/v1/ladders/loss/leaderboard"
    with server.client(timeout=CLIENT_TIMEOUT_S) as http:
        create_ladder(http, "loss")
        assert http.post("/v1/ladders/loss/matches", json=played).status_code == 201
        assert http.get("/readyz").status_code == 200
        standings = http.get(board)
        assert standings.status_code == 200

        calls = {
            "write": lambda: http.post("/v1/ladders/loss/matches", json=refused),
            "read": lambda: http.get(board),
        }
        getattr(proxy, failure)()
        seconds = []
        for kind in (first, *(kind for kind in calls if kind != first)):
            response, took = _timed(calls[kind])
            _assert_unavailable(response)
            _within_bound(took)
            seconds.append(round(took, 2))
        if failure == "blackhole":
            # It did wait on the frozen connection: no path fails sooner than a reply's bound.
            assert seconds[0] >= REPLY_TIMEOUT_S - 0.05
        response, took = _timed(lambda: http.get("/readyz"))
        _assert_not_ready(response)
        _within_bound(took, READINESS_TIMEOUT_S)
        assert http.get("/healthz").status_code == 200  # the process itself is fine

        proxy.restore()
        polls = _wait_ready(http)
        # Nothing of the refused match was written, and the reads are back.
        check_ladder(http, "loss", {"m-1": played})
        assert http.get(board).json() == standings.json()
        assert http.post("/v1/ladders/loss/matches", json=refused).status_code == 201
        check_ladder(http, "loss", {"m-1": played, "m-2": refused})
    report(
        f"database_loss[{failure}-{first}]",
        seconds_for_503s=seconds,
        readyz_seconds=round(took, 2),
        readyz_polls=polls,
    )


def test_requests_queued_behind_a_frozen_pool_get_503_within_the_bound(
    proxied: Callable[..., tuple[Server, TcpProxy]],
) -> None:
    """With every pooled connection taken by a request on the frozen database, the requests
    that wait for one give up after ``RATINGS_POOL_TIMEOUT_S``: no request waits longer than
    the pool timeout and the bound of the one it waits behind."""
    server, proxy = proxied(RATINGS_POOL_SIZE="1")  # two connections: one and its overflow
    played = {"match_id": "m-1", "teams": [["p0"], ["p1"]], "ranks": [1, 2]}
    board = "/v1/ladders/pool/leaderboard"
    with server.client(timeout=CLIENT_TIMEOUT_S) as http:
        create_ladder(http, "pool")
        assert http.post("/v1/ladders/pool/matches", json=played).status_code == 201
        standings = http.get(board).json()

        proxy.blackhole()
        with ThreadPoolExecutor(max_workers=5) as pool:
            answers = list(pool.map(lambda _: _timed(lambda: http.get(board)), range(5)))
        for response, took in answers:
            _assert_unavailable(response)
            _within_bound(took, POOL_TIMEOUT_S + BOUND_S)

        proxy.restore()
        _wait_ready(http)
        assert http.get(board).json() == standings
        check_ladder(http, "pool", {"m-1": played})
    report("database_loss[pool]", seconds_for_503s=sorted(round(took, 2) for _, took in answers))


def test_database_lost_mid_transaction_applies_nothing(
    database_url: str, admin_key: str, tmp_path: Path
) -> None:
    """The connection dies while a match's rows are written and COMMIT is not yet sent (the
    fault hook holds it there): the client gets a 503, no row of the match exists, and
    once the database is back the retry applies it exactly once."""
    if not database_url.startswith("postgresql"):
        pytest.skip("PostgreSQL only: SQLite has no network to lose")
    signal_file = tmp_path / "paused"
    release_file = tmp_path / "paused.release"
    release_file.touch()
    url = make_url(database_url)
    proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432)
    through = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    server = Server(
        through,
        admin_key,
        RATINGS_FAULT_HOOK=faults.PAUSE_AFTER_HISTORY,
        RATINGS_FAULT_SIGNAL=str(signal_file),
    )
    server.start()
    victim = {"match_id": "victim", "teams": [["p0"], ["p1", "p2"]], "ranks": [2, 1]}
    first = {"match_id": "m-1", "teams": [["p0"], ["p1"]], "ranks": [1, 2]}
    try:
        with server.client(timeout=CLIENT_TIMEOUT_S) as http:
            create_ladder(http, "loss")
            assert http.post("/v1/ladders/loss/matches", json=first).status_code == 201
            release_file.unlink()
            signal_file.unlink()
            replies: list[httpx.Response] = []
            poster = threading.Thread(
                target=lambda: replies.append(http.post("/v1/ladders/loss/matches", json=victim))
            )
            poster.start()
            deadline = time.monotonic() + 60
            while not signal_file.exists():
                assert time.monotonic() < deadline, "the match never reached its COMMIT"
                time.sleep(0.02)
            proxy.cut()
            release_file.touch()  # COMMIT now goes to a dead connection
            poster.join(timeout=CLIENT_TIMEOUT_S)
            assert len(replies) == 1
            _assert_unavailable(replies[0])
            with get_engine(database_url).connect() as connection:
                rows = connection.scalar(
                    text(
                        "SELECT count(*) FROM rating_history h JOIN matches m "
                        "ON m.seq = h.match_seq WHERE m.match_id = 'victim'"
                    )
                )
                assert rows == 0
                assert connection.scalar(text("SELECT count(*) FROM matches")) == 1

            proxy.restore()
            _wait_ready(http)
            retried = [http.post("/v1/ladders/loss/matches", json=victim) for _ in range(2)]
            assert [r.status_code for r in retried] == [201, 200]
            assert retried[0].content == retried[1].content
            check_ladder(http, "loss", {"m-1": first, "victim": victim})
    finally:
        server.stop()
        proxy.close()


# -- the reply bound and the statement timeout, in process -----------------------------------


@pytest.fixture
def bounded_url(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``database_url`` (PostgreSQL only), its engine made anew with a 500 ms statement
    timeout and a 300 ms reply grace."""
    if not database_url.startswith("postgresql"):
        pytest.skip("PostgreSQL only: SQLite has no statement timeout")
    monkeypatch.setenv("RATINGS_STATEMENT_TIMEOUT_MS", "500")
    monkeypatch.setenv("RATINGS_REPLY_GRACE_MS", "300")
    get_settings.cache_clear()
    dispose_engines()
    yield database_url
    dispose_engines()
    get_settings.cache_clear()


def _reply_timeout(connection: Connection) -> float | None:
    dbapi_connection = connection.connection.dbapi_connection
    assert isinstance(dbapi_connection, BoundedConnection)
    return dbapi_connection.reply_timeout_s


def test_a_slow_statement_is_cancelled_by_the_server_and_its_connection_kept(
    bounded_url: str,
) -> None:
    """The server's statement timeout comes first (the reply bound waits longer), so a slow
    statement is an error on a connection that stays in the pool."""
    engine = get_engine(bounded_url)
    with engine.connect() as connection:
        pid = connection.scalar(text("SELECT pg_backend_pid()"))
        assert _reply_timeout(connection) == 0.8
    with pytest.raises(OperationalError) as raised, engine.connect() as connection:
        connection.execute(text("SELECT pg_sleep(5)"))
    assert getattr(raised.value.orig, "sqlstate", None) == "57014"  # query_canceled
    with engine.connect() as connection:
        assert connection.scalar(text("SELECT pg_backend_pid()")) == pid


def test_a_transaction_that_lifts_its_statement_timeout_lifts_its_reply_bound(
    bounded_url: str,
) -> None:
    """Re-rating lifts the statement timeout of its transaction: the client then waits as
    long as the server works, and the next transaction is bounded again."""
    engine = get_engine(bounded_url)
    with Session(engine) as session, session.begin():
        assert _reply_timeout(session.connection()) == 0.8
        lift_statement_timeout(session=session)
        assert _reply_timeout(session.connection()) is None
        session.execute(text("SELECT pg_sleep(1.2)"))  # longer than the usual 0.8 s
    with engine.begin() as connection:
        assert _reply_timeout(connection) == 0.8
        assert connection.scalar(text("SHOW statement_timeout")) == "500ms"
