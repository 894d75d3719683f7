"""The request path's speed measures keep the behaviour: reads on SQLite take no write lock,
keys used for reads are still recorded, the migration heads read without Alembic are
Alembic's, and serving does not load Alembic at all."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from app.config import get_settings
from app.services import auth
from app.storage.engine import (
    _revisions,
    alembic_config,
    dispose_engines,
    get_engine,
    migration_heads,
    normalize_url,
    schema_is_current,
    session_factory,
)

ROOT = Path(__file__).resolve().parents[2]
TEAMS = {"teams": [["ann", "bob"], ["cat", "dan"]]}


def _ladder(client: TestClient, ladder: str = "speed") -> None:
    response = client.post("/v1/ladders", json={"id": ladder, "algorithm": "trueskill"})
    assert response.status_code == 201, response.text


class TestMigrationHeads:
    def test_same_as_alembic(self) -> None:
        script = ScriptDirectory.from_config(alembic_config("sqlite://"))
        assert migration_heads() == set(script.get_heads())
        assert migration_heads()

    def test_merge_and_plain_assignments(self) -> None:
        merge = "revision = 'c3'\ndown_revision = ('a1', 'b2')\n"
        assert _revisions(merge) == ("c3", ("a1", "b2"))
        first = "revision: str = '0001'\ndown_revision: str | None = None\n"
        assert _revisions(first) == ("0001", ())

    def test_readiness_follows_the_stored_revision(self, database_url: str) -> None:
        engine = get_engine(database_url)
        assert schema_is_current(engine)
        (head,) = migration_heads()
        with engine.begin() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = 'older'"))
        try:
            assert not schema_is_current(engine)
        finally:
            # The PostgreSQL test database is migrated once per run: leave it at head.
            with engine.begin() as connection:
                connection.execute(
                    text("UPDATE alembic_version SET version_num = :head"), {"head": head}
                )
        assert schema_is_current(engine)

    def test_no_version_table_is_not_current(self) -> None:
        engine = create_engine(normalize_url("sqlite://"))
        try:
            assert not schema_is_current(engine)
        finally:
            engine.dispose()


def test_serving_does_not_import_alembic() -> None:
    code = "import sys, app.main; print(sorted(m for m in ('alembic', 'mako') if m in sys.modules))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


@pytest.fixture
def no_busy_wait(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """SQLite only: the service's connections give up at once on a locked database."""
    if not database_url.startswith("sqlite"):
        pytest.skip("the write lock is SQLite's")
    monkeypatch.setenv("RATINGS_SQLITE_BUSY_TIMEOUT_MS", "0")
    get_settings.cache_clear()
    dispose_engines()
    yield database_url.split("///", 1)[1]
    dispose_engines()


class TestSqliteReadsTakeNoWriteLock:
    def test_reads_answer_while_a_writer_holds_the_lock(
        self, client: TestClient, no_busy_wait: str
    ) -> None:
        _ladder(client)
        assert client.post("/v1/ladders/speed/matches", json=TEAMS).status_code == 201
        writer = sqlite3.connect(no_busy_wait, isolation_level=None)
        try:
            writer.execute("BEGIN IMMEDIATE")
            board = client.get("/v1/ladders/speed/leaderboard")
            assert board.status_code == 200, board.text
            assert [e["player_id"] for e in board.json()["entries"]][:1]
            assert client.get("/v1/ladders/speed/players/ann").json()["rank"] >= 1
            assert client.get("/v1/ladders/speed/players/ann/history").status_code == 200
            quality = client.post("/v1/ladders/speed/quality", json=TEAMS)
            assert quality.status_code == 200, quality.text
            # The lock is really held: a write cannot get it.
            assert client.post("/v1/ladders/speed/matches", json=TEAMS).status_code >= 500
        finally:
            writer.execute("ROLLBACK")
            writer.close()
        assert client.post("/v1/ladders/speed/matches", json=TEAMS).status_code == 201
        assert client.get("/v1/ladders/speed/players/ann").json()["matches"] == 2


class TestReadKeys:
    def test_use_of_a_read_key_is_recorded(
        self, client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _ladder(client)
        session = session_factory(get_engine(database_url))()
        try:
            reader = auth.create_key(session, name="reader", scope="read")
            session.commit()
        finally:
            session.close()
        monkeypatch.setenv("RATINGS_REQUIRE_READ_KEY", "true")
        get_settings.cache_clear()
        headers = {"Authorization": f"Bearer {reader.key}"}
        assert client.get("/v1/ladders/speed/leaderboard", headers=headers).status_code == 200
        assert (
            client.get("/v1/ladders/speed/leaderboard", headers={"Authorization": ""}).status_code
            == 401
        )
        session = session_factory(get_engine(database_url))()
        try:
            used = {key.name: key.last_used_at for key in auth.list_keys(session)}
        finally:
            session.close()
        assert isinstance(used["reader"], datetime)


class TestOneTripRoutes:
    def test_unknown_ladder_and_player_are_404(self, client: TestClient) -> None:
        for response in (
            client.get("/v1/ladders/nope/leaderboard"),
            client.get("/v1/ladders/nope/players/ann"),
            client.post("/v1/ladders/nope/quality", json=TEAMS),
        ):
            assert response.status_code == 404, response.text
            assert response.headers["content-type"] == "application/problem+json"
        _ladder(client)
        assert client.get("/v1/ladders/speed/players/nobody").status_code == 404

    def test_seed_is_committed(self, client: TestClient) -> None:
        _ladder(client)
        seeded = client.put("/v1/ladders/speed/players/eve", json={"mu": 30.0, "sigma": 2.0})
        assert seeded.status_code == 200, seeded.text
        assert seeded.json()["mu"] == 30.0
        player = client.get("/v1/ladders/speed/players/eve").json()
        assert (player["mu"], player["sigma"], player["rank"]) == (30.0, 2.0, 1)
        assert player["conservative"] == pytest.approx(30.0 - 3 * 2.0)


class TestPlainReads:
    """Reads load the ladder and a player's rating with plain queries, not into the session."""

    def test_same_values_as_the_session_loads(self, client: TestClient, database_url: str) -> None:
        from app.storage.models import Ladder, PlayerRating
        from app.storage.repositories import ladders as ladder_repo
        from app.storage.repositories import ratings as rating_repo

        _ladder(client)
        client.put("/v1/ladders/speed/players/eve", json={"mu": 31.25, "sigma": 2.5})
        session = session_factory(get_engine(database_url))()
        try:
            ladder = ladder_repo.read_ladder(session=session, ladder_id="speed")
            rating = rating_repo.read_rating(session=session, ladder_id="speed", player_id="eve")
            assert not session.identity_map  # nothing was loaded into the session
            stored = session.get(Ladder, "speed")
            row = session.get(PlayerRating, ("speed", "eve"))
            assert ladder is not None and stored is not None
            assert rating is not None and row is not None
            columns = Ladder.__table__.columns.keys()
            assert {c: getattr(ladder, c) for c in columns} == {
                c: getattr(stored, c) for c in columns
            }
            assert ladder not in session
            assert rating._asdict() == {name: getattr(row, name) for name in rating._fields}
            assert rating.mu == 31.25 and rating.sigma == 2.5
            assert ladder_repo.read_ladder(session=session, ladder_id="none") is None
            assert (
                rating_repo.read_rating(session=session, ladder_id="speed", player_id="x") is None
            )
        finally:
            session.close()


class TestIdleConnections:
    def test_a_connection_cut_while_idle_is_replaced_unseen(
        self, database_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        if not database_url.startswith("postgresql"):
            pytest.skip("the pool ping is PostgreSQL's")
        import app.storage.engine

        engine = get_engine(database_url)
        with engine.connect() as connection:
            victim = connection.scalar(text("SELECT pg_backend_pid()"))
        killer = create_engine(normalize_url(database_url), poolclass=NullPool)
        try:
            with killer.connect() as connection:
                connection.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": victim})
        finally:
            killer.dispose()
        # Every pooled connection now counts as idle: the dead one is pinged and replaced.
        monkeypatch.setattr(app.storage.engine, "PING_AFTER_IDLE_S", -1.0)
        with engine.connect() as connection:
            assert connection.scalar(text("SELECT pg_backend_pid()")) != victim
