"""Glicko-2 ladders: created with their parameters, matches recorded one at a time and in
batches as the core rates them, the volatility stored and shown, the leaderboard by
r - k RD, seeds with a volatility, and voids and rebuilds that restore the volatility."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.rating import Glicko2, VolatileRating
from app.rating.registry import ALGORITHMS
from tests.service.helpers import all_pages, assert_problem, create_ladder, post_match
from tests.service.oracle import core_replay, random_matches

PARAMS = {"tau": 0.6, "deviation_per_day": 2.0, "conservative_k": 2.5}


def _player(client: TestClient, ladder: str, player: str) -> dict[str, Any]:
    response = client.get(f"/v1/ladders/{ladder}/players/{player}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _batch(client: TestClient, ladder: str, bodies: list[dict[str, Any]]) -> None:
    response = client.post(f"/v1/ladders/{ladder}/matches/batch", json={"matches": bodies})
    assert response.status_code == 201, response.text


def test_a_ladder_has_glickos_parameters(client: TestClient) -> None:
    ladder = create_ladder(client, "g", algorithm="glicko2")
    assert ladder["algorithm"] == "glicko2"
    assert ladder["params"] == {
        "rating": 1500.0,
        "deviation": 350.0,
        "volatility": 0.06,
        "tau": 0.5,
        "deviation_per_day": 0.0,
        "conservative_k": 2.0,
        "advantage": 0.0,
    }
    response = client.post(
        "/v1/ladders", json={"id": "bad", "algorithm": "glicko2", "params": {"tau": 9.0}}
    )
    assert_problem(response, 422, "tau")
    response = client.post(
        "/v1/ladders", json={"id": "bad", "algorithm": "glicko2", "params": {"tau_per_day": 1.0}}
    )
    assert_problem(response, 422, "tau_per_day")


def test_a_match_is_rated_as_the_core_rates_it(client: TestClient) -> None:
    create_ladder(client, "g", algorithm="glicko2", params=PARAMS)
    result = post_match(client, "g", {"match_id": "m1", "teams": [["a"], ["b"]]})
    model = Glicko2(**PARAMS)
    a, b = model.rate_1vs1(model.rating(), model.rating())
    after = [team["players"][0]["after"] for team in result["teams"]]
    assert after[0] == {
        "mu": a.mu,
        "sigma": a.sigma,
        "conservative": a.mu - 2.5 * a.sigma,
        "volatility": a.volatility,
    }
    before = result["teams"][0]["players"][0]["before"]
    assert before["volatility"] == 0.06
    assert after[1]["mu"] == b.mu and after[1]["sigma"] == b.sigma
    assert result["quality"] == model.quality([[model.rating()], [model.rating()]])
    shown = _player(client, "g", "a")
    assert (shown["mu"], shown["sigma"], shown["volatility"]) == (a.mu, a.sigma, a.volatility)
    # A second match starts from the stored volatility.
    post_match(client, "g", {"match_id": "m2", "teams": [["b"], ["a"]], "ranks": [1, 1]})
    b2, a2 = model.rate_1vs1(b, a, drawn=True)
    assert _player(client, "g", "a")["volatility"] == a2.volatility
    assert _player(client, "g", "b")["volatility"] == b2.volatility


def test_batches_equal_the_core_and_the_leaderboard_is_r_minus_k_rd(client: TestClient) -> None:
    bodies = random_matches(seed=5, count=40)
    create_ladder(client, "g", algorithm="glicko2", params=PARAMS)
    _batch(client, "g", bodies[:25])
    for body in bodies[25:]:
        post_match(client, "g", body)
    expected = core_replay("glicko2", PARAMS, bodies)
    board = all_pages(client, "/v1/ladders/g/leaderboard", limit=5)
    assert {entry["player_id"] for entry in board} == set(expected.ratings)
    for entry in board:
        rating = expected.ratings[entry["player_id"]]
        assert entry["mu"] == pytest.approx(rating.mu, rel=1e-12)
        assert entry["sigma"] == pytest.approx(rating.sigma, rel=1e-12)
        assert entry["conservative"] == pytest.approx(rating.mu - 2.5 * rating.sigma, rel=1e-12)
        player = _player(client, "g", entry["player_id"])
        assert player["volatility"] == pytest.approx(rating.volatility, rel=1e-12)
    conservative = [entry["conservative"] for entry in board]
    assert conservative == sorted(conservative, reverse=True)


def test_a_seed_sets_the_volatility(client: TestClient) -> None:
    create_ladder(client, "g", algorithm="glicko2")
    response = client.put(
        "/v1/ladders/g/players/a", json={"mu": 1700.0, "sigma": 90.0, "volatility": 0.2}
    )
    assert response.status_code == 200, response.text
    assert response.json()["volatility"] == 0.2
    assert response.json()["conservative"] == 1700.0 - 2.0 * 90.0
    # Without a volatility the player keeps its own.
    response = client.put("/v1/ladders/g/players/a", json={"mu": 1650.0, "sigma": 90.0})
    assert response.json()["volatility"] == 0.2
    result = post_match(client, "g", {"match_id": "m1", "teams": [["a"], ["b"]]})
    model = Glicko2()
    a, _ = model.rate_1vs1(VolatileRating(1650.0, 90.0, 0.2), model.rating())
    assert result["teams"][0]["players"][0]["after"]["mu"] == a.mu
    assert _player(client, "g", "a")["volatility"] == a.volatility
    response = client.put("/v1/ladders/g/players/a", json={"mu": 1650.0, "volatility": 2.0})
    assert_problem(response, 422, "volatility")
    create_ladder(client, "t", algorithm="trueskill")
    response = client.put("/v1/ladders/t/players/a", json={"mu": 20.0, "volatility": 0.1})
    assert_problem(response, 422, "volatility")
    assert client.get("/v1/ladders/t/players/a").status_code == 404


def test_void_and_rebuild_restore_the_volatility(client: TestClient) -> None:
    bodies = random_matches(seed=8, count=30)
    for ladder in ("g", "fresh"):
        create_ladder(client, ladder, algorithm="glicko2", params=PARAMS)
        client.put(f"/v1/ladders/{ladder}/players/p04", json={"mu": 1600.0, "volatility": 0.15})
    _batch(client, "g", bodies)
    response = client.delete(f"/v1/ladders/g/matches/{bodies[6]['match_id']}")
    assert response.status_code == 200, response.text
    _batch(client, "fresh", bodies[:6] + bodies[7:])
    board = all_pages(client, "/v1/ladders/g/leaderboard", limit=50)
    assert board == all_pages(client, "/v1/ladders/fresh/leaderboard", limit=50)
    for entry in board:
        player = entry["player_id"]
        assert _player(client, "g", player) == {
            **_player(client, "fresh", player),
            "ladder": "g",
        }
    # A rebuild with a new tau re-rates every volatility from the seeds and priors.
    response = client.patch(
        "/v1/ladders/g", params={"rebuild": "true"}, json={"params": {"tau": 1.1}}
    )
    assert response.status_code == 200, response.text
    expected = core_replay(
        "glicko2",
        {**PARAMS, "tau": 1.1},
        [
            {"seed": "p04", "mu": 1600.0, "sigma": 350.0, "volatility": 0.15},
            *bodies[:6],
            *bodies[7:],
        ],
    )
    for entry in all_pages(client, "/v1/ladders/g/leaderboard", limit=50):
        rating = expected.ratings[entry["player_id"]]
        player = _player(client, "g", entry["player_id"])
        assert player["mu"] == pytest.approx(rating.mu, rel=1e-12)
        assert player["volatility"] == pytest.approx(rating.volatility, rel=1e-12)


def test_the_leaderboard_and_the_history_show_the_volatility(client: TestClient) -> None:
    bodies = random_matches(seed=11, count=25)
    create_ladder(client, "g", algorithm="glicko2", params=PARAMS)
    seeded = client.put("/v1/ladders/g/players/p03", json={"mu": 1600.0, "volatility": 0.2})
    assert seeded.status_code == 200, seeded.text
    results = {body["match_id"]: post_match(client, "g", body) for body in bodies}
    expected = core_replay(
        "glicko2", PARAMS, [{"seed": "p03", "mu": 1600.0, "volatility": 0.2}, *bodies]
    )
    board = all_pages(client, "/v1/ladders/g/leaderboard", limit=4)
    assert {entry["player_id"] for entry in board} == set(expected.ratings)
    for entry in board:
        rating = expected.ratings[entry["player_id"]]
        assert entry["volatility"] == pytest.approx(rating.volatility, rel=1e-12)
        assert entry["volatility"] == _player(client, "g", entry["player_id"])["volatility"]
    # min_matches pages show it too.
    qualified = client.get("/v1/ladders/g/leaderboard", params={"min_matches": 3}).json()
    assert qualified["entries"]
    for entry in qualified["entries"]:
        assert entry["volatility"] == _player(client, "g", entry["player_id"])["volatility"]

    history = all_pages(client, "/v1/ladders/g/players/p03/history", limit=3)
    played = [body for body in bodies if any("p03" in team for team in body["teams"])]
    assert len(history) == len(played) + 1
    adjustment = history[-1]
    assert adjustment["kind"] == "adjustment"
    assert adjustment["before"] == {
        "mu": 1500.0,
        "sigma": 350.0,
        "conservative": 1500.0 - 2.5 * 350.0,
        "volatility": 0.06,
    }
    assert adjustment["after"]["volatility"] == 0.2
    # Each match entry shows what the match's result document shows for the player.
    for entry in history[:-1]:
        result = results[entry["match_id"]]
        (shown,) = [
            player
            for team in result["teams"]
            for player in team["players"]
            if player["player_id"] == "p03"
        ]
        assert entry["before"] == shown["before"]
        assert entry["after"] == shown["after"]
    # Newest first: each change starts where the one before it ended.
    for newer, older in itertools.pairwise(history):
        assert newer["before"]["volatility"] == older["after"]["volatility"]
    assert history[0]["after"]["volatility"] == _player(client, "g", "p03")["volatility"]
    assert history[0]["after"]["volatility"] == pytest.approx(
        expected.ratings["p03"].volatility, rel=1e-12
    )


@pytest.mark.parametrize("algorithm", [a for a in ALGORITHMS if a != "glicko2"])
def test_other_ladders_show_a_null_volatility(client: TestClient, algorithm: str) -> None:
    create_ladder(client, "x", algorithm=algorithm)
    client.put("/v1/ladders/x/players/a", json={"mu": 30.0})
    result = post_match(client, "x", {"match_id": "m1", "teams": [["a"], ["b"]]})
    # A match result of these ladders has no volatility at all.
    for team in result["teams"]:
        for player in team["players"]:
            assert "volatility" not in player["before"]
            assert "volatility" not in player["after"]
    entries = client.get("/v1/ladders/x/leaderboard").json()["entries"]
    assert sorted(entry["player_id"] for entry in entries) == ["a", "b"]
    assert all(entry["volatility"] is None for entry in entries)
    assert _player(client, "x", "a")["volatility"] is None
    history = client.get("/v1/ladders/x/players/a/history").json()["entries"]
    assert [entry["kind"] for entry in history] == ["match", "adjustment"]
    for entry in history:
        assert entry["before"]["volatility"] is None
        assert entry["after"]["volatility"] is None
    # Apart from the volatility, history shows what the match result shows.
    (shown,) = result["teams"][0]["players"]
    assert history[0]["after"] == {**shown["after"], "volatility": None}
