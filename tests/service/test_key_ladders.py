"""Keys limited to some ladders: good for those ladders' routes alone (records, reads,
admin changes, their jobs); another ladder's routes and every route that is not one
ladder's (the ladder list, making a ladder, keys, webhooks) are a 403, so a limited key can
never make itself a wider one. Made over HTTP or on the command line."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.cli.main import main
from app.config import get_settings
from tests.service.helpers import assert_problem, create_ladder, table_counts
from tests.service.test_jobs import _finished


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _key(client: TestClient, scope: str, ladders: list[str] | None, name: str = "k") -> str:
    made = client.post("/v1/keys", json={"name": name, "scope": scope, "ladders": ladders})
    assert made.status_code == 201, made.text
    assert made.json()["ladders"] == (sorted(set(ladders)) if ladders is not None else None)
    return str(made.json()["key"])


@pytest.fixture
def two(client: TestClient) -> Iterator[None]:
    create_ladder(client, "mine")
    create_ladder(client, "theirs")
    yield


MATCH = {"teams": [["a"], ["b"]]}


def test_a_write_key_records_on_its_ladders_alone(
    client: TestClient, two: None, database_url: str
) -> None:
    key = _bearer(_key(client, "write", ["mine"]))
    assert client.post("/v1/ladders/mine/matches", json=MATCH, headers=key).status_code == 201
    batch = {"matches": [MATCH, MATCH]}
    assert client.post("/v1/ladders/mine/matches/batch", json=batch, headers=key).status_code == 201
    before = table_counts(database_url)
    refused = client.post("/v1/ladders/theirs/matches", json=MATCH, headers=key)
    detail = assert_problem(refused, 403, "limited to the ladders mine")
    assert "'theirs'" in detail
    assert_problem(client.post("/v1/ladders/theirs/matches/batch", json=batch, headers=key), 403)
    assert table_counts(database_url) == before


def test_an_admin_key_limited_to_a_ladder_cannot_widen_itself(
    client: TestClient, two: None, database_url: str
) -> None:
    key = _bearer(_key(client, "admin", ["mine"]))
    changed = client.patch("/v1/ladders/mine", json={"description": "ours"}, headers=key)
    assert changed.status_code == 200, changed.text
    before = table_counts(database_url)
    for method, path, body in (
        ("PATCH", "/v1/ladders/theirs", {"description": "no"}),
        ("DELETE", "/v1/ladders/theirs", None),
        ("POST", "/v1/ladders", {"id": "new", "algorithm": "elo"}),
        ("POST", "/v1/keys", {"name": "wider", "scope": "admin"}),
        ("GET", "/v1/keys", None),
        ("POST", "/v1/webhooks", {"url": "http://127.0.0.1:9/", "events": ["match.recorded"]}),
        ("GET", "/v1/webhooks", None),
    ):
        response = client.request(method, path, json=body, headers=key)
        assert_problem(response, 403, "limited to the ladders mine")
    assert table_counts(database_url) == before


def test_a_limited_key_sees_its_ladders_jobs_alone(client: TestClient, two: None) -> None:
    client.post("/v1/ladders/mine/matches", json={"match_id": "m", **MATCH})
    client.post("/v1/ladders/theirs/matches", json={"match_id": "t", **MATCH})
    key = _bearer(_key(client, "admin", ["mine"]))
    async_ = {"Prefer": "respond-async"}
    ours = client.delete("/v1/ladders/mine/matches/m", headers={**key, **async_})
    assert ours.status_code == 202, ours.text
    assert client.get(ours.headers["location"], headers=key).status_code == 200
    theirs = client.delete("/v1/ladders/theirs/matches/t", headers=async_)
    assert theirs.status_code == 202, theirs.text
    assert_problem(client.get(theirs.headers["location"], headers=key), 403, "limited")
    # Both jobs run to their end before the test does (the next one empties the tables).
    for location in (ours.headers["location"], theirs.headers["location"]):
        assert _finished(client, location)["state"] == "succeeded"


def test_reads_with_a_limited_key(
    client: TestClient, two: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = _bearer(_key(client, "read", ["mine"]))
    for reads_need_a_key in (False, True):
        monkeypatch.setenv("RATINGS_REQUIRE_READ_KEY", str(reads_need_a_key).lower())
        get_settings.cache_clear()
        for _ in range(2):  # the second answered from what the first kept
            board = client.get("/v1/ladders/mine/leaderboard", headers=key)
            assert board.status_code == 200, board.text
            assert_problem(client.get("/v1/ladders/theirs/leaderboard", headers=key), 403)
        assert_problem(client.get("/v1/ladders", headers=key), 403, "limited")
        assert client.get("/v1/ladders/mine/players/a", headers=key).status_code == 404


@pytest.mark.parametrize(
    ("ladders", "field"),
    [([], "ladders"), (["nope"], "nope"), (["Bad Id"], "ladders"), ("mine", "ladders")],
)
def test_a_bad_limit_is_a_422_and_makes_no_key(
    client: TestClient, two: None, database_url: str, ladders: object, field: str
) -> None:
    before = table_counts(database_url)
    body = {"name": "x", "scope": "write", "ladders": ladders}
    assert_problem(client.post("/v1/keys", json=body), 422, field)
    assert table_counts(database_url) == before


def test_the_command_line_makes_and_lists_limited_keys(
    client: TestClient, two: None, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["keys", "create", "--scope", "write", "--name", "cli", "--ladder", "mine"]
    assert main([*argv, "--ladder", "mine"]) == 0
    out, err = capsys.readouterr()
    assert "limited to mine" in err
    key = _bearer(out.strip())
    assert client.post("/v1/ladders/mine/matches", json=MATCH, headers=key).status_code == 201
    assert_problem(client.post("/v1/ladders/theirs/matches", json=MATCH, headers=key), 403)
    assert main(["keys", "list", "--json"]) == 0
    listed = {k["name"]: k for k in json.loads(capsys.readouterr().out)}
    assert listed["cli"]["ladders"] == ["mine"]
    assert main([*argv[:5], "other", "--ladder", "nope"]) == 1
    assert "no ladder 'nope'" in capsys.readouterr().err
