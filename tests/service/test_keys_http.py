"""API keys over HTTP: made (the key shown once), listed (never a secret), revoked (refused
at once by every instance on the database), all admin; the command line sees the same keys."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.config import get_settings
from app.main import create_app
from app.services import auth
from app.storage.engine import get_engine, session_factory
from tests.service.helpers import assert_problem, create_ladder, table_counts


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def other_instance(client: TestClient) -> Iterator[TestClient]:
    """A second application on the same database: another worker or instance."""
    with TestClient(create_app(), raise_server_exceptions=False) as second:
        yield second


def test_a_key_made_over_http_works_for_its_scope(client: TestClient) -> None:
    create_ladder(client)
    made = client.post("/v1/keys", json={"name": "game-server", "scope": "write"})
    assert made.status_code == 201, made.text
    body = made.json()
    assert set(body) == {"name", "scope", "prefix", "key", "created_at", "ladders"}
    assert body["ladders"] is None
    assert body["name"] == "game-server" and body["scope"] == "write"
    assert body["key"].startswith(body["prefix"] + "_") and len(body["key"]) == 55
    match = {"teams": [["a"], ["b"]]}
    recorded = client.post("/v1/ladders/test/matches", json=match, headers=_bearer(body["key"]))
    assert recorded.status_code == 201, recorded.text
    denied = client.post(
        "/v1/keys", json={"name": "x", "scope": "read"}, headers=_bearer(body["key"])
    )
    assert_problem(denied, 403, "admin")


def test_the_list_never_shows_a_secret(client: TestClient, database_url: str) -> None:
    key = client.post("/v1/keys", json={"name": "analytics", "scope": "read"}).json()["key"]
    client.get("/v1/ladders", headers=_bearer(key))
    listed = client.get("/v1/keys")
    assert listed.status_code == 200
    assert key not in listed.text and key[12:] not in listed.text
    keys = {entry["name"]: entry for entry in listed.json()["keys"]}
    assert set(keys) == {"test-admin", "analytics"}
    assert set(keys["analytics"]) == {
        "name",
        "scope",
        "prefix",
        "created_at",
        "last_used_at",
        "revoked_at",
        "ladders",
    }
    assert keys["analytics"]["prefix"] == key[:11]
    assert keys["analytics"]["last_used_at"] is not None
    assert keys["analytics"]["revoked_at"] is None
    # The command line's listing is the same keys.
    session = session_factory(get_engine(database_url))()
    try:
        names = [info.name for info in auth.list_keys(session)]
    finally:
        session.close()
    assert names == [entry["name"] for entry in listed.json()["keys"]]


def test_a_revoked_key_is_refused_at_once_by_every_instance(
    client: TestClient, other_instance: TestClient
) -> None:
    create_ladder(client)
    made = client.post("/v1/keys", json={"name": "to-revoke", "scope": "write"}).json()
    key = _bearer(made["key"])
    match = {"teams": [["a"], ["b"]]}
    assert (
        other_instance.post("/v1/ladders/test/matches", json=match, headers=key).status_code == 201
    )
    read = other_instance.get("/v1/ladders/test/leaderboard", headers=key)
    assert read.status_code == 200
    etag = read.headers["etag"]

    revoked = client.delete(f"/v1/keys/{made['prefix']}")
    assert revoked.status_code == 200, revoked.text
    assert revoked.json()["revoked_at"] is not None and "key" not in revoked.json()

    for instance in (client, other_instance):
        assert_problem(instance.post("/v1/ladders/test/matches", json=match, headers=key), 401)
        assert_problem(instance.get("/v1/ladders/test/leaderboard", headers=key), 401)
        # Not a 304 from a kept answer: the key is checked first.
        cached = instance.get(
            "/v1/ladders/test/leaderboard", headers={**key, "If-None-Match": etag}
        )
        assert_problem(cached, 401)
    listed = {entry["prefix"]: entry for entry in client.get("/v1/keys").json()["keys"]}
    assert listed[made["prefix"]]["revoked_at"] is not None
    # Revoked is revoked: a second revocation finds no active key.
    assert_problem(client.delete(f"/v1/keys/{made['prefix']}"), 404, made["prefix"])
    # Its name is free again.
    again = client.post("/v1/keys", json={"name": "to-revoke", "scope": "read"})
    assert again.status_code == 201


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "x", "scope": "owner"}, "scope"),
        ({"name": "", "scope": "read"}, "name"),
        ({"name": " padded ", "scope": "read"}, "name"),
        ({"name": "n" * 129, "scope": "read"}, "name"),
        ({"scope": "read"}, "name"),
        ({"name": "x", "scope": "read", "secret": "mine"}, "secret"),
    ],
)
def test_a_bad_key_request_names_its_field_and_changes_nothing(
    client: TestClient, database_url: str, body: dict[str, object], field: str
) -> None:
    before = table_counts(database_url)
    assert_problem(client.post("/v1/keys", json=body), 422, field)
    assert table_counts(database_url) == before


def test_names_of_active_keys_are_unique(client: TestClient, database_url: str) -> None:
    assert client.post("/v1/keys", json={"name": "twin", "scope": "read"}).status_code == 201
    before = table_counts(database_url)
    assert_problem(client.post("/v1/keys", json={"name": "twin", "scope": "admin"}), 409, "twin")
    assert table_counts(database_url) == before


def test_revoking_needs_a_prefix_of_an_active_key(client: TestClient) -> None:
    assert_problem(client.delete("/v1/keys/rk_00000000"), 404, "rk_00000000")
    # A name is not a prefix here (the command line takes either).
    client.post("/v1/keys", json={"name": "named", "scope": "read"})
    assert_problem(client.delete("/v1/keys/named"), 422, "prefix")


def test_keys_are_for_admins_alone(client: TestClient, database_url: str) -> None:
    write = client.post("/v1/keys", json={"name": "writer", "scope": "write"}).json()
    for method, path in (("GET", "/v1/keys"), ("DELETE", f"/v1/keys/{write['prefix']}")):
        assert_problem(client.request(method, path, headers=_bearer(write["key"])), 403)
        anonymous = client.request(method, path, headers={"Authorization": ""})
        assert_problem(anonymous, 401)
    # Even with reads open to all, the list is not a read.
    assert not get_settings().require_read_key
