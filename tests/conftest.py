"""Shared fixtures: a migrated database per test on SQLite (and PostgreSQL when
``RATINGS_TEST_POSTGRES_URL`` is set), and an HTTP client with an admin key.

CI runs pytest once without the variable (SQLite params only) and once with it and
``-m postgres`` (PostgreSQL params only), so every database test takes ``database_url``.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url

from app.config import get_settings
from app.storage.engine import dispose_engines, get_engine, normalize_url, session_factory, upgrade

POSTGRES_URL = os.environ.get("RATINGS_TEST_POSTGRES_URL")

DATABASES = [pytest.param("sqlite", id="sqlite")]
if POSTGRES_URL:
    DATABASES.append(pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres))

#: Every table of the schema, children first.
TABLES = (
    "webhooks",
    "jobs",
    "rating_history",
    "participants",
    "matches",
    "ratings",
    "ladders",
    "api_keys",
)


def _drop_everything(url: str) -> None:
    engine = create_engine(normalize_url(url))
    try:
        with engine.begin() as connection:
            for table in inspect(connection).get_table_names():
                connection.execute(text(f'DROP TABLE IF EXISTS "{table}" CASCADE'))
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database built once with ``alembic upgrade head``; each test gets a copy."""
    path = tmp_path_factory.mktemp("template") / "ratings.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    get_engine(url).dispose()
    return path


def _gather_statistics(url: str) -> None:
    """ANALYZE the ladder tables with a row in each, then empty them again: the service's
    connections cache their plans as on a database that has run a while, rather than plan
    every statement afresh as on a new one (``app.storage.engine.Unplanned``, which
    tests/service/test_launch_plans.py tests on databases of their own)."""
    engine = get_engine(url)
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO ladders (id, algorithm, params, created_at)"
                " VALUES ('statistics', 'elo', '{}', now())"
            )
        )
        connection.execute(
            text(
                "INSERT INTO ratings (ladder_id, player_id, mu, sigma, conservative, matches,"
                " updated_at) VALUES ('statistics', 'p', 1500, NULL, 1500, 0, now())"
            )
        )
        connection.execute(
            text(
                "INSERT INTO matches (ladder_id, match_id, body_hash, played_at, recorded_at,"
                " request, result) VALUES ('statistics', 'm', '', now(), now(), '{}', '{}')"
            )
        )
    with engine.connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql(
            "ANALYZE ratings, matches"
        )
    with engine.begin() as connection:
        connection.execute(text("DELETE FROM ladders WHERE id = 'statistics'"))
    engine.dispose()


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The test PostgreSQL, emptied and migrated to head once per run, its ladder tables'
    statistics gathered."""
    assert POSTGRES_URL is not None
    _drop_everything(POSTGRES_URL)
    upgrade(POSTGRES_URL)
    _gather_statistics(POSTGRES_URL)
    return POSTGRES_URL


@pytest.fixture
def new_database() -> Iterator[str]:
    """An empty PostgreSQL database of its own on the test server (no schema), dropped
    after."""
    assert POSTGRES_URL is not None
    name = f"ratings_new_{uuid.uuid4().hex[:12]}"
    admin = create_engine(normalize_url(POSTGRES_URL), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f"CREATE DATABASE {name}"))
    try:
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        dispose_engines()
        with admin.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


@pytest.fixture(params=DATABASES)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database at the newest schema with no rows, on each configured engine."""
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        path = tmp_path / "ratings.db"
        shutil.copyfile(template, path)
        url = f"sqlite:///{path}"
    else:
        url = request.getfixturevalue("postgres_url")
        # DELETE, not TRUNCATE: far quicker on tables this small.
        with get_engine(url).begin() as connection:
            for table in TABLES:
                connection.execute(text(f"DELETE FROM {table}"))
    yield url
    dispose_engines()


@pytest.fixture
def admin_key(database_url: str) -> str:
    """A committed admin key (plaintext)."""
    from app.services import auth

    session = session_factory(get_engine(database_url))()
    try:
        key = auth.create_key(session, name="test-admin", scope="admin").key
        session.commit()
    finally:
        session.close()
    return key


@pytest.fixture
def client(
    database_url: str, admin_key: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[TestClient]:
    """The app on ``database_url``, sending the admin key with every request."""
    monkeypatch.setenv("RATINGS_DATABASE_URL", database_url)
    get_settings.cache_clear()
    from app.main import create_app

    with TestClient(create_app(), raise_server_exceptions=False) as test_client:
        test_client.headers["Authorization"] = f"Bearer {admin_key}"
        yield test_client
    get_settings.cache_clear()
