"""Launch day: on a new PostgreSQL database, whose ladder tables have no statistics yet, the
service plans each statement afresh, so that a plan cached while a table was small (a
prepared statement's, a foreign-key check's) cannot keep reading a whole ladder as the
table grows; once the tables have statistics it caches plans again."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Connection, text

from app.config import get_settings
from app.storage import engine as engine_module
from app.storage.engine import get_engine, session_factory, upgrade

POSTGRES_URL = os.environ.get("RATINGS_TEST_POSTGRES_URL")

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(POSTGRES_URL is None, reason="RATINGS_TEST_POSTGRES_URL is not set"),
]

#: A lookup of one player's rating by its key, as the write path makes them.
LOOKUP = "SELECT mu FROM ratings WHERE ladder_id = $1 AND player_id = $2"


@pytest.fixture
def launch(new_database: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    """The app on a new database whose autovacuum is off (it would gather statistics in
    the middle of a test), asking about statistics at every transaction."""
    upgrade(new_database)
    with get_engine(new_database).begin() as connection:
        for table in engine_module.KEYED_TABLES:
            connection.execute(text(f"ALTER TABLE {table} SET (autovacuum_enabled = false)"))
    monkeypatch.setattr(engine_module, "UNPLANNED_RECHECK_S", 0.0)
    from app.services import auth

    with session_factory(get_engine(new_database))() as session:
        key = auth.create_key(session, name="launch", scope="admin").key
        session.commit()
    monkeypatch.setenv("RATINGS_DATABASE_URL", new_database)
    get_settings.cache_clear()
    from app.main import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as client:
        client.headers["Authorization"] = f"Bearer {key}"
        assert (
            client.post("/v1/ladders", json={"id": "l", "algorithm": "trueskill"}).status_code
            == 201
        )
        yield client
    get_settings.cache_clear()


def _record(client: TestClient, first: int, count: int) -> None:
    matches = [
        {"match_id": f"m{n}", "teams": [[f"p{2 * n}"], [f"p{2 * n + 1}"]]}
        for n in range(first, first + count)
    ]
    answer = client.post("/v1/ladders/l/matches/batch", json={"matches": matches})
    assert answer.status_code == 201, answer.text


def _grow(url: str, players: int) -> None:
    with get_engine(url).begin() as connection:
        connection.execute(
            text(
                "INSERT INTO ratings (ladder_id, player_id, mu, sigma, conservative, matches,"
                " updated_at) SELECT 'l', 'g' || n, 25.0, 8.0, 1.0, 0, now()"
                " FROM generate_series(1, :players) AS n"
            ),
            {"players": players},
        )


def _analyze(url: str) -> None:
    with get_engine(url).connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("ANALYZE")


def _mode(connection: Connection) -> str:
    with connection.begin():
        return str(connection.execute(text("SHOW plan_cache_mode")).scalar_one())


def _lookup_plan(connection: Connection, *, cached: bool = False) -> str:
    with connection.begin():
        if cached:  # as a connection of a database with statistics would plan it
            connection.exec_driver_sql("SET LOCAL plan_cache_mode = auto")
        rows = connection.exec_driver_sql("EXPLAIN EXECUTE lookup('l', 'p1')").scalars()
        return "\n".join(rows)


def test_a_lookup_prepared_while_the_ladder_was_small_finds_its_key_later(
    launch: TestClient, new_database: str
) -> None:
    _record(launch, 0, 1)
    with get_engine(new_database).connect() as connection:
        assert _mode(connection) == "force_custom_plan"
        with connection.begin():
            # As any connection would have cached it: a generic plan, made after the
            # statement's first runs, while the ladder had two players.
            connection.exec_driver_sql("SET LOCAL plan_cache_mode = auto")
            connection.exec_driver_sql(f"PREPARE lookup(text, text) AS {LOOKUP}")
            for _ in range(8):
                connection.exec_driver_sql("EXECUTE lookup('l', 'p1')").all()
        _grow(new_database, 3000)  # the ladder grows, its statistics stay unknown
        # That plan reads its ladder's part of the leaderboard's index, every player of
        # it, for every lookup; the service's transaction plans it again and finds the key.
        cached = _lookup_plan(connection, cached=True)
        assert "ix_ratings_leaderboard" in cached, cached
        plan = _lookup_plan(connection)
        assert "pk_ratings" in plan, plan


def test_plans_are_cached_again_once_the_tables_have_statistics(
    launch: TestClient, new_database: str
) -> None:
    engine = get_engine(new_database)

    def mode() -> str:  # as the next request's connection, taken from the pool, is set
        with engine.connect() as connection:
            return _mode(connection)

    assert mode() == "force_custom_plan"
    _analyze(new_database)  # empty: nothing is known of the ladders yet
    assert mode() == "force_custom_plan"
    _record(launch, 0, 20)
    _analyze(new_database)
    assert mode() == "auto"
    _record(launch, 20, 20)  # the tables' statistics are not asked about again
    assert mode() == "auto"
