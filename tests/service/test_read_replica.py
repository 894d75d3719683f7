"""Reads from a replica (``RATINGS_READ_DATABASE_URL``), writes to the primary, and
``Ratings-Read-From: primary`` for a client that must read its own write.

A second PostgreSQL database stands in for the replica. It is not one (nothing streams
into it): what it holds is set by the test, so each answer shows which database it came
from. Its API keys are copied from the primary, as a replica's would be.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import sql
from sqlalchemy import select

from app.config import get_settings
from app.storage.engine import dispose_engines, get_engine, upgrade
from app.storage.models import ApiKey
from tests.service.helpers import assert_problem

POSTGRES_URL = os.environ.get("RATINGS_TEST_POSTGRES_URL")

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(POSTGRES_URL is None, reason="RATINGS_TEST_POSTGRES_URL is not set"),
]

PRIMARY_READ = {"Ratings-Read-From": "primary"}


@pytest.fixture
def replica_url() -> Iterator[str]:
    assert POSTGRES_URL is not None
    name = f"ratings_replica_{os.getpid()}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = f"{POSTGRES_URL.rsplit('/', 1)[0]}/{name}"
    upgrade(url)
    yield url
    dispose_engines()
    with psycopg.connect(POSTGRES_URL, autocommit=True) as connection:
        connection.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _app(database_url: str, replica: str | None, key: str) -> TestClient:
    os.environ["RATINGS_DATABASE_URL"] = database_url
    if replica is None:
        os.environ.pop("RATINGS_READ_DATABASE_URL", None)
    else:
        os.environ["RATINGS_READ_DATABASE_URL"] = replica
    get_settings.cache_clear()
    from app.main import create_app

    client = TestClient(create_app(), raise_server_exceptions=False)
    client.headers["Authorization"] = f"Bearer {key}"
    return client


def test_reads_go_to_the_replica_and_writes_to_the_primary(
    database_url: str, admin_key: str, replica_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RATINGS_DATABASE_URL", database_url)  # restored after the test
    monkeypatch.setenv("RATINGS_READ_DATABASE_URL", "")
    # The replica's copy of the keys.
    with get_engine(database_url).connect() as primary:
        keys = [dict(row._mapping) for row in primary.execute(select(ApiKey.__table__))]
    with get_engine(replica_url).begin() as replica:
        replica.execute(ApiKey.__table__.insert(), keys)
    # What the replica holds: the same ladder id, an older state (other words, no match).
    with _app(replica_url, None, admin_key) as on_replica:
        made = on_replica.post(
            "/v1/ladders", json={"id": "l", "algorithm": "trueskill", "description": "replica"}
        )
        assert made.status_code == 201
    with _app(database_url, replica_url, admin_key) as client:
        made = client.post(
            "/v1/ladders", json={"id": "l", "algorithm": "trueskill", "description": "primary"}
        )
        assert made.status_code == 201, made.text
        posted = client.post("/v1/ladders/l/matches", json={"teams": [["ann"], ["bo"]]})
        assert posted.status_code == 201, posted.text

        # Reads of the fast path and of FastAPI's routes alike.
        assert client.get("/v1/ladders/l").json()["description"] == "replica"
        assert client.get("/v1/ladders/l").json()["matches"] == 0
        assert_problem(client.get("/v1/ladders/l/players/ann"), 404, "player_id")
        teams = {"teams": [["ann"], ["bo"]]}
        assert client.post("/v1/ladders/l/quality", json=teams).json()["quality"] == pytest.approx(
            0.4472135954999579
        )

        # The client that must see its own write asks for the primary.
        mine = client.get("/v1/ladders/l", headers=PRIMARY_READ).json()
        assert (mine["description"], mine["matches"]) == ("primary", 1)
        assert client.get("/v1/ladders/l/players/ann", headers=PRIMARY_READ).json()["matches"] == 1
        quality = client.post("/v1/ladders/l/quality", json=teams, headers=PRIMARY_READ).json()
        assert quality["quality"] < 0.44

        # Each database's validator is its own state's: the primary's is not the replica's.
        on_replica = client.get("/v1/ladders/l").headers["etag"]
        on_primary = client.get("/v1/ladders/l", headers=PRIMARY_READ).headers["etag"]
        assert on_replica != on_primary
        again = client.get("/v1/ladders/l", headers={"If-None-Match": on_primary})
        assert again.status_code == 200 and again.json()["description"] == "replica"
    get_settings.cache_clear()
