"""Consistency tokens without a replica: every read sees every committed write, so a write's
answer carries no token and a read's token is only checked; tokens are log positions."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.storage.consistency import parse, render


@pytest.mark.parametrize("token", ["0/0", "0/16B3748", "16/B374D848", "FFFFFFFF/FFFFFFFF"])
def test_a_token_is_a_log_position_and_back(token: str) -> None:
    position = parse(token)
    assert position is not None
    assert render(position) == token


def test_log_positions_order_as_the_log_does() -> None:
    assert parse("0/FFFFFFFF") < parse("1/0") < parse("1/1")  # type: ignore[operator]


@pytest.mark.parametrize(
    "token", ["", "yesterday", "16", "16/", "/5", "1/2/3", "G/1", "123456789/0"]
)
def test_anything_else_is_no_token(token: str) -> None:
    assert parse(token) is None


def test_without_a_replica_tokens_are_checked_and_change_nothing(client: TestClient) -> None:
    assert client.post("/v1/ladders", json={"id": "l", "algorithm": "elo"}).status_code == 201
    written = client.post("/v1/ladders/l/matches", json={"teams": [["a"], ["b"]]})
    assert written.status_code == 201
    assert "ratings-consistency-token" not in written.headers
    read = client.get("/v1/ladders/l/players/a", headers={"Ratings-Consistency-Token": "0/0"})
    assert read.status_code == 200
    assert read.json()["matches"] == 1
    assert "ratings-read-from" not in read.headers
    for path in ("/v1/ladders/l/players/a", "/v1/ladders/l/leaderboard"):
        refused = client.get(path, headers={"Ratings-Consistency-Token": "soon"})
        assert refused.status_code == 422, (path, refused.text)
        assert "Ratings-Consistency-Token" in refused.json()["detail"]
