"""Recording matches: the numbers, idempotency, stored results, time decay, every algorithm."""

from __future__ import annotations

import math
from typing import Any

import pytest
import trueskill
from fastapi.testclient import TestClient

from app.rating.base import Rating, age
from app.rating.registry import make_model
from tests.service.helpers import all_pages, assert_problem, create_ladder, post_match


def _players(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["player_id"]: p for team in result["teams"] for p in team["players"]}


def test_one_vs_one_on_a_default_trueskill_ladder(client: TestClient) -> None:
    create_ladder(client)
    result = post_match(client, "test", {"match_id": "g-1", "teams": [["alice"], ["bob"]]})
    oracle = trueskill.TrueSkill(backend=None)
    win, lose = trueskill.rate_1vs1(oracle.create_rating(), oracle.create_rating(), env=oracle)
    alice, bob = _players(result)["alice"], _players(result)["bob"]
    # The TrueSkill paper's published 1 v 1 numbers (with the default dynamics tau).
    assert alice["after"]["mu"] == pytest.approx(29.396, abs=5e-4)
    assert bob["after"]["mu"] == pytest.approx(20.604, abs=5e-4)
    assert alice["after"]["sigma"] == pytest.approx(7.171, abs=5e-4)
    assert bob["after"]["sigma"] == pytest.approx(7.171, abs=5e-4)
    assert (alice["after"]["mu"], alice["after"]["sigma"]) == pytest.approx(
        (win.mu, win.sigma), rel=1e-6
    )
    assert (bob["after"]["mu"], bob["after"]["sigma"]) == pytest.approx(
        (lose.mu, lose.sigma), rel=1e-6
    )
    assert alice["before"] == {"mu": 25.0, "sigma": pytest.approx(25 / 3), "conservative": 0.0}
    assert alice["after"]["conservative"] == pytest.approx(
        alice["after"]["mu"] - 3 * alice["after"]["sigma"]
    )
    # The paper's equation 7 for two new players: sqrt(2 beta^2 / (2 beta^2 + 2 sigma^2)).
    beta, sigma = 25 / 6, 25 / 3
    assert result["quality"] == pytest.approx(math.sqrt(2 * beta**2 / (2 * beta**2 + 2 * sigma**2)))
    assert [team["rank"] for team in result["teams"]] == [1, 2]
    assert result["match_id"] == "g-1" and result["ladder"] == "test"


def test_idempotent_retry_returns_the_same_bytes(client: TestClient) -> None:
    create_ladder(client)
    body = {
        "match_id": "g-7",
        "played_at": "2026-11-21T10:00:00Z",
        "teams": [["a"], ["b", "c"]],
        "scores": [10, 3],
        "meta": {"map": "lockout", "scores": [10, 3]},
    }
    first = client.post("/v1/ladders/test/matches", json=body)
    assert first.status_code == 201
    again = client.post("/v1/ladders/test/matches", json=body)
    assert again.status_code == 200
    assert again.content == first.content
    # The same instant written another way is the same body.
    same_instant = {**body, "played_at": "2026-11-21T11:00:00+01:00"}
    assert client.post("/v1/ladders/test/matches", json=same_instant).content == first.content
    other = client.post("/v1/ladders/test/matches", json={**body, "scores": [3, 10]})
    assert_problem(other, 409, "match_id")
    assert client.get("/v1/ladders/test").json()["matches"] == 1
    assert client.get("/v1/ladders/test/players/a").json()["matches"] == 1
    stored = client.get("/v1/ladders/test/matches/g-7")
    assert stored.status_code == 200 and stored.content == first.content
    assert stored.json()["meta"] == {"map": "lockout", "scores": [10, 3]}


def test_meta_round_trips_any_json(client: TestClient) -> None:
    create_ladder(client)
    meta = {"note": "nul \u0000 and \u00e9 and \U0001f600", "n": [1, 2.5, None, True], "o": {}}
    result = post_match(client, "test", {"match_id": "m", "teams": [["a"], ["b"]], "meta": meta})
    assert result["meta"] == meta
    assert client.get("/v1/ladders/test/matches/m").json()["meta"] == meta


def test_server_made_match_ids_are_unique(client: TestClient) -> None:
    create_ladder(client)
    one = post_match(client, "test", {"teams": [["a"], ["b"]]})
    two = post_match(client, "test", {"teams": [["a"], ["b"]]})
    assert one["match_id"] != two["match_id"]
    assert two["seq"] > one["seq"]
    # The second match starts from the first one's result.
    assert _players(two)["a"]["before"] == _players(one)["a"]["after"]


def test_outcomes_ranks_scores_and_listed_order_agree(client: TestClient) -> None:
    create_ladder(client)
    by_ranks = post_match(client, "test", {"teams": [["a"], ["b"], ["c"]], "ranks": [2, 1, 2]})
    assert [team["rank"] for team in by_ranks["teams"]] == [2, 1, 2]
    create_ladder(client, "other")
    by_scores = post_match(client, "other", {"teams": [["a"], ["b"], ["c"]], "scores": [0, 5, 0]})
    assert by_scores["teams"] == by_ranks["teams"]


def test_matches_against_the_core_with_weights(client: TestClient) -> None:
    create_ladder(client, params={"draw_probability": 0.05})
    model = make_model("trueskill", {"draw_probability": 0.05})
    body = {
        "teams": [["a"], ["b", "c"], ["d"]],
        "ranks": [1, 2, 2],
        "weights": [[1.0], [1.0, 0.5], [1.0]],
    }
    result = post_match(client, "test", body)
    prior = model.rating()
    teams = [[prior], [prior, prior], [prior]]
    expected = model.rate(teams, ranks=body["ranks"], weights=body["weights"])
    got = [
        [(p["after"]["mu"], p["after"]["sigma"]) for p in team["players"]]
        for team in result["teams"]
    ]
    assert got == [[pytest.approx(tuple(r), rel=1e-12) for r in team] for team in expected]
    assert result["quality"] == pytest.approx(model.quality(teams, body["weights"]), rel=1e-12)
    assert [p["weight"] for team in result["teams"] for p in team["players"]] == [1, 1, 0.5, 1]


@pytest.mark.parametrize("algorithm", ["trueskill", "plackett_luce", "elo"])
def test_every_algorithm_follows_its_core_model(client: TestClient, algorithm: str) -> None:
    pytest.importorskip(f"app.rating.{algorithm}")
    create_ladder(client, "l", algorithm=algorithm)
    model = make_model(algorithm)
    bayesian = algorithm != "elo"
    ratings: dict[str, Rating] = {}
    matches = [
        {"teams": [["a"], ["b"]]},
        {"teams": [["b"], ["c"], ["a"]], "ranks": [1, 2, 2]},
        {"teams": [["a", "c"], ["b", "d"]], "scores": [1, 4]},
    ]
    for body in matches:
        result = post_match(client, "l", body)
        teams = [[ratings.get(p, model.rating()) for p in team] for team in body["teams"]]
        new = model.rate(teams, ranks=body.get("ranks"), scores=body.get("scores"))
        for team, new_team, out in zip(body["teams"], new, result["teams"], strict=True):
            for player, rating, entry in zip(team, new_team, out["players"], strict=True):
                assert entry["player_id"] == player
                assert entry["after"]["mu"] == pytest.approx(rating.mu, rel=1e-12)
                if bayesian:
                    assert entry["after"]["sigma"] == pytest.approx(rating.sigma, rel=1e-12)
                    k_sigma = 3 * rating.sigma
                    assert entry["after"]["conservative"] == pytest.approx(rating.mu - k_sigma)
                else:
                    assert entry["after"]["sigma"] is None
                    assert entry["after"]["conservative"] == entry["after"]["mu"]
                ratings[player] = rating
    for player, rating in ratings.items():
        stored = client.get(f"/v1/ladders/l/players/{player}").json()
        assert stored["mu"] == pytest.approx(rating.mu, rel=1e-12)
        assert stored["sigma"] == (pytest.approx(rating.sigma, rel=1e-12) if bayesian else None)


def test_tau_per_day_widens_a_returning_player(client: TestClient) -> None:
    create_ladder(client, params={"tau_per_day": 0.5})
    model = make_model("trueskill")
    post_match(client, "test", {"teams": [["a"], ["b"]], "played_at": "2026-01-01T00:00:00Z"})
    after_first = client.get("/v1/ladders/test/players/a").json()
    result = post_match(
        client, "test", {"teams": [["a"], ["c"]], "played_at": "2026-01-11T00:00:00Z"}
    )
    a = _players(result)["a"]
    # "before" is the stored belief; the 10 days away widen it before the update.
    assert a["before"]["mu"] == after_first["mu"]
    assert a["before"]["sigma"] == after_first["sigma"]
    aged = age(Rating(after_first["mu"], after_first["sigma"]), 0.5, 10.0)
    assert aged.sigma == pytest.approx(math.sqrt(after_first["sigma"] ** 2 + 0.25 * 10))
    expected = model.rate([[aged], [model.rating()]])
    assert a["after"]["mu"] == pytest.approx(expected[0][0].mu, rel=1e-12)
    assert a["after"]["sigma"] == pytest.approx(expected[0][0].sigma, rel=1e-12)
    # The newcomer has no time away: it starts at the prior.
    assert _players(result)["c"]["before"]["sigma"] == pytest.approx(25 / 3)


def test_played_at_without_offset_is_utc_and_a_date_is_midnight(client: TestClient) -> None:
    create_ladder(client)
    naive = post_match(
        client, "test", {"teams": [["a"], ["b"]], "played_at": "2004-07-08T15:45:00"}
    )
    assert naive["played_at"] == "2004-07-08T15:45:00Z"
    date = post_match(client, "test", {"teams": [["a"], ["b"]], "played_at": "1872-11-30"})
    assert date["played_at"] == "1872-11-30T00:00:00Z"
    player = client.get("/v1/ladders/test/players/a").json()
    assert player["last_played_at"] == "2004-07-08T15:45:00Z"  # the latest, not the last sent


def test_match_list_newest_first_and_by_player(client: TestClient) -> None:
    create_ladder(client)
    ids = []
    for n in range(7):
        body = {"match_id": f"m{n}", "teams": [["a"], ["b" if n % 2 else "c"]]}
        ids.append(post_match(client, "test", body)["match_id"])
    every = all_pages(client, "/v1/ladders/test/matches", limit=3)
    assert [m["match_id"] for m in every] == ids[::-1]
    assert every[0] == client.get("/v1/ladders/test/matches/m6").json()
    of_b = all_pages(client, "/v1/ladders/test/matches", limit=2, player="b")
    assert [m["match_id"] for m in of_b] == ["m5", "m3", "m1"]
    assert all_pages(client, "/v1/ladders/test/matches", limit=2, player="nobody") == []


def test_unknown_match_is_404(client: TestClient) -> None:
    create_ladder(client)
    assert_problem(client.get("/v1/ladders/test/matches/nope"), 404, "match_id")


def test_recording_needs_a_write_key(client: TestClient) -> None:
    create_ladder(client)
    response = client.post(
        "/v1/ladders/test/matches", json={"teams": [["a"], ["b"]]}, headers={"Authorization": ""}
    )
    assert_problem(response, 401)


def test_a_match_reported_late_widens_nothing(client: TestClient) -> None:
    create_ladder(client, params={"tau_per_day": 0.5})
    post_match(client, "test", {"teams": [["a"], ["b"]], "played_at": "2026-01-10T00:00:00Z"})
    stored = {p: client.get(f"/v1/ladders/test/players/{p}").json() for p in ("a", "b")}
    # Played before the players' last match: no time away to add.
    late = post_match(
        client, "test", {"teams": [["b"], ["a"]], "played_at": "2026-01-01T00:00:00Z"}
    )
    a, b = (Rating(stored[p]["mu"], stored[p]["sigma"]) for p in ("a", "b"))
    expected = make_model("trueskill").rate([[b], [a]])
    got = _players(late)["a"]["after"]
    assert (got["mu"], got["sigma"]) == pytest.approx(tuple(expected[1][0]), rel=1e-12)
    last = client.get("/v1/ladders/test/players/a").json()["last_played_at"]
    assert last == "2026-01-10T00:00:00Z"


def test_elo_ladder_reports_no_sigma_anywhere(client: TestClient) -> None:
    pytest.importorskip("app.rating.elo")
    create_ladder(client, "elo", algorithm="elo", params={"k_factor": 16})
    result = post_match(client, "elo", {"teams": [["a"], ["b"]]})
    a = _players(result)["a"]
    assert a["before"] == {"mu": 1500.0, "sigma": None, "conservative": 1500.0}
    assert a["after"]["mu"] == pytest.approx(1508.0)  # K/2 for an even game
    board = client.get("/v1/ladders/elo/leaderboard").json()["entries"]
    assert [(e["player_id"], e["sigma"], e["conservative"]) for e in board] == [
        ("a", None, pytest.approx(1508.0)),
        ("b", None, pytest.approx(1492.0)),
    ]
    history = client.get("/v1/ladders/elo/players/b/history").json()["entries"]
    assert history[0]["after"]["sigma"] is None
