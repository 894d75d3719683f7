"""A Plackett-Luce ladder with ``limit_sigma``: no sigma grows over a match, recording
single and in batches, voiding and rebuilding give the core's numbers."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.service.helpers import assert_problem, create_ladder, post_match
from tests.service.oracle import core_replay, random_matches
from tests.service.test_void import _batch, _state

PARAMS: dict[str, Any] = {"limit_sigma": True, "tau": 2.0}
#: Time away still widens a belief before the match (``tau_per_day``); the limit is on the
#: match itself.
AGEING: dict[str, Any] = {**PARAMS, "tau_per_day": 0.3}


def _board(client: TestClient, ladder: str) -> dict[str, tuple[float, float]]:
    entries = client.get(f"/v1/ladders/{ladder}/leaderboard", params={"limit": 100}).json()
    return {e["player_id"]: (e["mu"], e["sigma"]) for e in entries["entries"]}


def test_limit_sigma_is_a_ladder_parameter(client: TestClient) -> None:
    ladder = create_ladder(client, "l", algorithm="plackett_luce", params=PARAMS)
    assert ladder["params"]["limit_sigma"] is True
    assert ladder["params"]["kappa"] == 1e-4
    default = create_ladder(client, "d", algorithm="plackett_luce")
    assert default["params"]["limit_sigma"] is False
    for bad in ("true", 1, 0.0):
        response = client.post(
            "/v1/ladders",
            json={"id": "bad", "algorithm": "plackett_luce", "params": {"limit_sigma": bad}},
        )
        assert_problem(response, 422, "limit_sigma")
    response = client.post(
        "/v1/ladders", json={"id": "bad", "algorithm": "trueskill", "params": {"limit_sigma": True}}
    )
    assert_problem(response, 422, "limit_sigma")


def test_no_sigma_grows_and_the_numbers_are_the_cores(client: TestClient) -> None:
    create_ladder(client, "l", algorithm="plackett_luce", params=PARAMS)
    bodies = random_matches(seed=21, count=40)
    for body in bodies[:5]:
        result = post_match(client, "l", body)
        for team in result["teams"]:
            for player in team["players"]:
                assert player["after"]["sigma"] <= player["before"]["sigma"]
    _batch(client, "l", bodies[5:])
    expected = core_replay("plackett_luce", PARAMS, bodies)
    board = _board(client, "l")
    assert len(board) == len(expected.ratings)
    for player, (mu, sigma) in board.items():
        assert (mu, sigma) == pytest.approx(tuple(expected.ratings[player]), rel=1e-12)
    # The same matches without the limit: the dynamics grow some sigma past its start.
    plain = core_replay("plackett_luce", {**PARAMS, "limit_sigma": False}, bodies)
    assert any(plain.ratings[p].sigma > expected.ratings[p].sigma + 1e-9 for p in expected.ratings)


def test_void_and_rebuild_with_limit_sigma_equal_a_fresh_ladder(client: TestClient) -> None:
    bodies = random_matches(seed=22, count=30)
    create_ladder(client, "l", algorithm="plackett_luce", params={"tau": 2.0})
    _batch(client, "l", bodies)
    assert client.delete(f"/v1/ladders/l/matches/{bodies[3]['match_id']}").status_code == 200
    response = client.patch("/v1/ladders/l?rebuild=true", json={"params": AGEING})
    assert response.status_code == 200, response.text
    assert response.json()["ladder"]["params"]["limit_sigma"] is True
    create_ladder(client, "fresh", algorithm="plackett_luce", params=AGEING)
    _batch(client, "fresh", [b for n, b in enumerate(bodies) if n != 3])
    assert _state(client, "l") == _state(client, "fresh")
