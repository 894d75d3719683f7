"""Which key each route needs: reads open (unless configured), matches write, config admin."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.config import get_settings
from app.services import auth
from app.storage.engine import get_engine, session_factory
from tests.service.helpers import assert_problem, create_ladder


def _key(database_url: str, scope: str) -> dict[str, str]:
    session = session_factory(get_engine(database_url))()
    try:
        key = auth.create_key(session, name=f"test-{scope}", scope=scope).key
        session.commit()
    finally:
        session.close()
    return {"Authorization": f"Bearer {key}"}


def test_scopes_of_the_routes(client: TestClient, database_url: str) -> None:
    create_ladder(client)
    read, write = _key(database_url, "read"), _key(database_url, "write")
    match = {"teams": [["a"], ["b"]]}
    assert client.post("/v1/ladders/test/matches", json=match, headers=write).status_code == 201
    assert_problem(client.post("/v1/ladders/test/matches", json=match, headers=read), 403)
    ladder = {"id": "other", "algorithm": "elo"}
    assert_problem(client.post("/v1/ladders", json=ladder, headers=write), 403)
    assert_problem(client.put("/v1/ladders/test/players/a", json={"mu": 1}, headers=write), 403)
    anonymous = {"Authorization": ""}
    for path in (
        "/v1/ladders",
        "/v1/ladders/test",
        "/v1/ladders/test/leaderboard",
        "/v1/ladders/test/players/a",
        "/v1/ladders/test/players/a/history",
        "/v1/ladders/test/matches",
    ):
        assert client.get(path, headers=anonymous).status_code == 200, path
    quality = client.post("/v1/ladders/test/quality", json=match, headers=anonymous)
    assert quality.status_code == 200


def test_reads_need_a_key_when_configured(
    client: TestClient, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_ladder(client)
    read = _key(database_url, "read")
    monkeypatch.setenv("RATINGS_REQUIRE_READ_KEY", "true")
    get_settings.cache_clear()
    assert_problem(client.get("/v1/ladders/test/leaderboard", headers={"Authorization": ""}), 401)
    assert client.get("/v1/ladders/test/leaderboard", headers=read).status_code == 200
    quality = client.post(
        "/v1/ladders/test/quality", json={"teams": [["a"], ["b"]]}, headers={"Authorization": ""}
    )
    assert_problem(quality, 401)


def test_a_wrong_key_on_an_open_read_is_refused(client: TestClient, database_url: str) -> None:
    """Reads are open, but a key that is sent is checked: an unknown or revoked one is a
    401, so a client learns its key is wrong before the day reads need one."""
    create_ladder(client)
    read = _key(database_url, "read")
    garbage = {"Authorization": "Bearer garbage"}
    for path in ("/v1/ladders", "/v1/ladders/test", "/v1/ladders/test/leaderboard"):
        assert_problem(client.get(path, headers=garbage), 401)
        assert client.get(path, headers=read).status_code == 200, path
    quality = client.post(
        "/v1/ladders/test/quality", json={"teams": [["a"], ["b"]]}, headers=garbage
    )
    assert_problem(quality, 401)
