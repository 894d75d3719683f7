"""The path of one recorded match: its statements, the ladder's parameters as they are now,
a retry or conflict that leaves nothing behind, the key checked in the same statement as the
ladder, and SQLite's writer turn given back whatever the request's end."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, text
from sqlalchemy.engine import make_url

from app.config import get_settings
from app.services import auth, recording
from app.storage.engine import _writer_lock, get_engine, session_factory, writer_turn
from tests.service.helpers import assert_problem, table_counts

MATCH = {"teams": [["ann", "bob"], ["cat", "dan"]], "ranks": [1, 2]}


def _ladder(client: TestClient, ladder: str = "path", **params: float) -> None:
    body: dict[str, Any] = {"id": ladder, "algorithm": "trueskill"}
    if params:
        body["params"] = params
    response = client.post("/v1/ladders", json=body)
    assert response.status_code == 201, response.text


@pytest.fixture
def statements(database_url: str) -> Iterator[list[str]]:
    """The SQL statements the service's engine runs, first words only, while collecting."""
    seen: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(" ".join(statement.split()[:3]).upper())

    engine = get_engine(database_url)
    event.listen(engine, "before_cursor_execute", note)
    yield seen
    event.remove(engine, "before_cursor_execute", note)


def test_one_match_of_known_players_takes_few_statements(
    client: TestClient, database_url: str, statements: list[str]
) -> None:
    _ladder(client)
    first = client.post("/v1/ladders/path/matches", json=MATCH)
    assert first.status_code == 201, first.text
    statements.clear()
    response = client.post("/v1/ladders/path/matches", json={**MATCH, "match_id": "second"})
    assert response.status_code == 201, response.text
    assert response.json()["seq"] == first.json()["seq"] + 1
    if database_url.startswith("postgresql"):
        # The key, the ladder and the match_id looked up in one statement, the players'
        # locks, and everything written (the seq drawn) in one statement.
        assert statements == [
            "SELECT K.ID, K.SCOPE,",
            "SELECT R.PLAYER_ID, R.MU,",
            "WITH MATCHES_WRITTEN AS",
            # Its event numbered under the ladder's counter and written (app.storage.outbox).
            "WITH NUMBERED AS",
        ]
    else:
        assert statements == [
            "BEGIN IMMEDIATE",
            "SELECT K.ID, K.SCOPE,",
            "SELECT PLAYER_ID, MU,",
            "SELECT COALESCE(MAX(MATCHES.SEQ), ?)",
            "INSERT INTO RATINGS",  # upserted: a new player is inserted with its rating
            "INSERT INTO MATCHES",
            "INSERT INTO PARTICIPANTS",
            "INSERT INTO RATING_HISTORY",
            "INSERT INTO LADDER_ACCURACY",
            "INSERT INTO LADDER_VERSIONS",  # the ladder's version (app.storage.versions)
            "INSERT INTO LADDER_EVENT_COUNTERS",  # then its event, last (app.storage.outbox)
            "INSERT INTO EVENTS",
        ]


def _kinds(statements: list[str]) -> list[str]:
    """The statements that insert or lock ratings, in order (one-word statements, such as a
    background clock's ``BEGIN``, are neither)."""
    return [
        "lock" if s.split()[1].endswith("PLAYER_ID,") else "insert"
        for s in statements
        if len(s.split()) > 1
        and (s.split()[1].endswith("PLAYER_ID,") or s.startswith("INSERT INTO RATINGS"))
    ]


def test_new_players_are_created_then_locked(
    client: TestClient, database_url: str, statements: list[str]
) -> None:
    recording._rated.clear()
    _ladder(client)
    response = client.post("/v1/ladders/path/matches", json=MATCH)
    assert response.status_code == 201, response.text
    if database_url.startswith("postgresql"):
        # Players never seen rated: inserted before any lock is taken.
        assert _kinds(statements) == ["insert", "lock"]
    else:
        # SQLite's transaction holds the database: read, then inserted with their ratings.
        assert _kinds(statements) == ["lock", "insert"]
    for player in ("ann", "bob", "cat", "dan"):
        assert client.get(f"/v1/ladders/path/players/{player}").json()["matches"] == 1


def test_players_removed_by_a_void_are_created_again(
    client: TestClient, database_url: str, statements: list[str]
) -> None:
    _ladder(client)
    assert client.post("/v1/ladders/path/matches", json={**MATCH, "match_id": "v"}).status_code
    voided = client.delete("/v1/ladders/path/matches/v")
    assert voided.status_code == 200, voided.text
    assert client.get("/v1/ladders/path/players/ann").status_code == 404
    statements.clear()
    response = client.post("/v1/ladders/path/matches", json=MATCH)
    assert response.status_code == 201, response.text
    if database_url.startswith("postgresql"):
        # Seen rated before, so locked first: missing, the transaction starts again.
        assert _kinds(statements) == ["lock", "insert", "lock"]
    before = response.json()["teams"][0]["players"][0]["before"]
    assert (before["mu"], before["sigma"]) == (25.0, 25.0 / 3.0)
    assert client.get("/v1/ladders/path/players/ann").json()["matches"] == 1


def test_a_conflict_leaves_no_new_player_behind(client: TestClient, database_url: str) -> None:
    _ladder(client)
    first = client.post("/v1/ladders/path/matches", json={**MATCH, "match_id": "g1"})
    assert first.status_code == 201, first.text
    counts = table_counts(database_url)
    other = {"match_id": "g1", "teams": [["eve"], ["fay"]]}
    assert_problem(client.post("/v1/ladders/path/matches", json=other), 409, "match_id")
    retry = client.post("/v1/ladders/path/matches", json={**MATCH, "match_id": "g1"})
    assert (retry.status_code, retry.content) == (200, first.content)
    assert table_counts(database_url) == counts
    assert client.get("/v1/ladders/path/players/eve").status_code == 404


def test_changed_parameters_rate_the_very_next_match(client: TestClient) -> None:
    _ladder(client)
    assert client.post("/v1/ladders/path/matches", json=MATCH).status_code == 201
    changed = client.patch(
        "/v1/ladders/path", params={"rebuild": "true"}, json={"params": {"beta": 10.0}}
    )
    assert changed.status_code == 200, changed.text
    _ladder(client, "fresh", beta=10.0)
    newcomers = {"teams": [["eve"], ["fay"]]}
    after = client.post("/v1/ladders/path/matches", json=newcomers).json()
    fresh = client.post("/v1/ladders/fresh/matches", json=newcomers).json()
    assert after["teams"] == fresh["teams"]
    assert after["quality"] == fresh["quality"]


def test_key_checks_and_use(client: TestClient, database_url: str) -> None:
    _ladder(client)
    session = session_factory(get_engine(database_url))()
    try:
        reader = auth.create_key(session, name="reader", scope="read")
        writer = auth.create_key(session, name="writer", scope="write")
        session.commit()
    finally:
        session.close()
    path = "/v1/ladders/path/matches"
    assert_problem(client.post(path, json=MATCH, headers={"Authorization": ""}), 401)
    bearer = {"Authorization": f"Bearer {reader.key}"}
    assert_problem(client.post(path, json=MATCH, headers=bearer), 403, reader.prefix)
    bearer = {"Authorization": f"Bearer {writer.key}"}
    # The key is checked before the ladder is looked up.
    assert_problem(client.post("/v1/ladders/nope/matches", json=MATCH, headers=bearer), 404)
    assert client.post(path, json=MATCH, headers=bearer).status_code == 201
    with get_engine(database_url).connect() as connection:
        used = connection.scalar(text("SELECT last_used_at FROM api_keys WHERE name = 'writer'"))
    assert used is not None
    session = session_factory(get_engine(database_url))()
    try:
        auth.revoke_key(session, name_or_prefix="writer")
        session.commit()
    finally:
        session.close()
    assert_problem(client.post(path, json=MATCH, headers=bearer), 401)
    forged = {"Authorization": f"Bearer {writer.key[:-4]}AAAA"}
    assert_problem(client.post("/v1/ladders/nope/matches", json=MATCH, headers=forged), 401)


def test_sqlite_writer_turn_is_given_back(client: TestClient, database_url: str) -> None:
    if not database_url.startswith("sqlite"):
        pytest.skip("the writer turn is SQLite's")
    _ladder(client)
    lock = _writer_lock(get_engine(database_url))
    assert client.post("/v1/ladders/path/matches", json={**MATCH, "match_id": "a"}).status_code
    assert not lock.locked()
    other = {"match_id": "a", "teams": [["eve"], ["fay"]]}
    assert_problem(client.post("/v1/ladders/path/matches", json=other), 409)
    assert not lock.locked()
    assert_problem(client.post("/v1/ladders/nope/matches", json=MATCH), 404)
    assert not lock.locked()
    assert client.post("/v1/ladders/path/matches", json=MATCH).status_code == 201
    assert not lock.locked()


class TestSqliteWritersOfSeveralProcesses:
    """The writer turn's lock file orders the processes on one SQLite file: a writer waits
    for another process's turn, starts as soon as it ends, and gives up at the busy
    timeout (then SQLite's own lock orders them, as before)."""

    @pytest.fixture
    def sqlite_url(self, database_url: str) -> str:
        if not database_url.startswith("sqlite"):
            pytest.skip("the writer turn is SQLite's")
        return database_url

    @staticmethod
    def _other_process_holds(url: str) -> int:
        # A second open file description conflicts with the service's own, as another
        # process's would.
        descriptor = os.open(f"{make_url(url).database}-writer", os.O_RDWR | os.O_CREAT)
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        return descriptor

    def _write_in_thread(self, url: str, entered: list[float]) -> threading.Thread:
        def write() -> None:
            session = session_factory(get_engine(url))()
            try:
                with writer_turn(session):
                    entered.append(time.monotonic())
                    session.execute(text("SELECT 1"))
                    session.commit()
            finally:
                session.close()

        thread = threading.Thread(target=write)
        thread.start()
        return thread

    def test_waits_for_the_other_process_then_goes(self, sqlite_url: str) -> None:
        held = self._other_process_holds(sqlite_url)
        entered: list[float] = []
        thread = self._write_in_thread(sqlite_url, entered)
        time.sleep(0.3)
        assert entered == []  # still waiting for the other process
        released = time.monotonic()
        fcntl.flock(held, fcntl.LOCK_UN)
        thread.join(timeout=10)
        os.close(held)
        assert len(entered) == 1
        assert 0.0 <= entered[0] - released < 0.2
        # The turn was given back: the other process gets it at once.
        again = self._other_process_holds(sqlite_url)
        os.close(again)

    def test_gives_up_at_the_busy_timeout(
        self, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("RATINGS_SQLITE_BUSY_TIMEOUT_MS", "200")
        get_settings.cache_clear()
        held = self._other_process_holds(sqlite_url)
        try:
            started = time.monotonic()
            entered: list[float] = []
            self._write_in_thread(sqlite_url, entered).join(timeout=10)
            assert len(entered) == 1
            assert 0.19 <= entered[0] - started < 5.0
            assert not _writer_lock(get_engine(sqlite_url)).locked()
        finally:
            os.close(held)
            get_settings.cache_clear()

    def test_a_database_in_memory_has_no_lock_file(self) -> None:
        engine = get_engine("sqlite://")
        session = session_factory(engine)()
        try:
            with writer_turn(session):
                session.execute(text("SELECT 1"))
                session.commit()
        finally:
            session.close()
