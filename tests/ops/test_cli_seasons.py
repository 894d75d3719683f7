"""``ratings seasons list | start``: the seasons ``GET`` and ``POST
/v1/ladders/{ladder}/seasons`` answer, with the API's checks and messages."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient

from app.services import auth
from tests.ops.conftest import bearer
from tests.ops.test_cli import run


def test_start_resets_as_the_api_and_list_matches_it(
    client: TestClient,
    make_key: Callable[[str, str], auth.NewKey],
    capsys: pytest.CaptureFixture[str],
) -> None:
    admin = bearer(make_key("admin", "seasons-test").key)
    assert run(capsys, "ladders", "create", "duel", "--algorithm", "elo")[0] == 0
    body = {"match_id": "m1", "teams": [["alice"], ["bob"]]}
    assert client.post("/v1/ladders/duel/matches", json=body, headers=admin).status_code == 201

    status, out, err = run(capsys, "seasons", "start", "duel", "s2", "--keep", "0.5")
    assert status == 0, err
    season = json.loads(out)
    assert (season["id"], season["ordinal"], season["keep"], season["players"]) == ("s2", 2, 0.5, 2)
    assert err == "opened season 's2' of ladder 'duel': 2 ratings reset with keep 0.5\n"
    alice = client.get("/v1/ladders/duel/players/alice").json()
    assert alice["mu"] == 1500.0 + 0.5 * (1516.0 - 1500.0)
    assert alice["season"] == "s2"

    status, out, _ = run(capsys, "seasons", "list", "duel", "--json")
    assert status == 0
    assert json.loads(out) == client.get("/v1/ladders/duel/seasons").json()["entries"]
    status, out, _ = run(capsys, "seasons", "list", "duel")
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["ID", "STATE", "KEEP", "STARTED", "ENDED", "MATCHES", "PLAYERS"]
    assert [row[:3] for row in rows[1:]] == [["s2", "open", "0.5"], ["1", "closed", "1"]]
    assert [row[-2:] for row in rows[1:]] == [["0", "2"], ["1", "2"]]


def test_refused_with_the_apis_messages(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "ladders", "create", "duel", "--algorithm", "elo")[0] == 0
    status, _, err = run(capsys, "seasons", "start", "duel", "s2", "--keep", "2")
    assert status == 1 and "keep" in err
    status, _, err = run(capsys, "seasons", "start", "duel", "1")
    assert status == 1 and "season '1' already" in err
    status, _, err = run(capsys, "seasons", "start", "nope", "s2")
    assert status == 1 and "no ladder 'nope'" in err
    status, _, err = run(capsys, "seasons", "list", "nope")
    assert status == 1 and "no ladder 'nope'" in err
    assert [s["id"] for s in client.get("/v1/ladders/duel/seasons").json()["entries"]] == ["1"]
