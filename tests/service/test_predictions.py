"""The quality endpoint: the core's numbers for stored ratings, the prior for unknown players."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.rating.base import Rating
from app.rating.quality import predict_rank
from app.rating.registry import make_model
from tests.service.helpers import assert_problem, create_ladder, post_match, table_counts


@pytest.mark.parametrize("algorithm", ["trueskill", "plackett_luce", "elo"])
def test_quality_equals_the_core(client: TestClient, database_url: str, algorithm: str) -> None:
    pytest.importorskip(f"app.rating.{algorithm}")
    create_ladder(client, "l", algorithm=algorithm)
    post_match(client, "l", {"teams": [["a"], ["b"]]})
    model = make_model(algorithm)
    players = {}
    for name in ("a", "b"):
        p = client.get(f"/v1/ladders/l/players/{name}").json()
        players[name] = Rating(p["mu"], p["sigma"] if p["sigma"] is not None else 0.0)
    body = {"teams": [["a", "new"], ["b", "c"]], "weights": [[1.0, 0.5], [1.0, 1.0]]}
    before = table_counts(database_url)
    response = client.post("/v1/ladders/l/quality", json=body)
    assert response.status_code == 200, response.text
    got = response.json()
    prior = model.rating()
    teams = [[players["a"], prior], [players["b"], prior]]
    weights = body["weights"]
    assert got["quality"] == pytest.approx(model.quality(teams, weights), rel=1e-12)
    assert got["win_probabilities"] == pytest.approx(
        model.win_probabilities(teams, weights), rel=1e-12
    )
    assert sum(got["win_probabilities"]) == pytest.approx(1.0)
    draw = model.draw_probability(teams, weights)
    assert got["draw_probability"] == (None if draw is None else pytest.approx(draw, rel=1e-12))
    ranks = predict_rank(model, teams, weights)
    assert [r["rank"] for r in got["predicted_ranks"]] == [r.rank for r in ranks]
    assert [r["probability"] for r in got["predicted_ranks"]] == pytest.approx(
        [r.probability for r in ranks], rel=1e-12
    )
    assert table_counts(database_url) == before  # nothing written, not even the new players


@pytest.mark.parametrize("algorithm", ["trueskill", "plackett_luce", "elo"])
def test_predicted_ranks_order_the_teams(client: TestClient, algorithm: str) -> None:
    create_ladder(client, "l", algorithm=algorithm)
    for _ in range(3):
        post_match(client, "l", {"teams": [["a"], ["b"], ["c"]]})
    got = client.post("/v1/ladders/l/quality", json={"teams": [["c"], ["a"], ["b"]]}).json()
    ranks = got["predicted_ranks"]
    assert [r["rank"] for r in ranks] == [3, 1, 2]
    assert sum(r["probability"] for r in ranks) == pytest.approx(1.0)
    # Two new players: even chances share the first place.
    even = client.post("/v1/ladders/l/quality", json={"teams": [["x"], ["y"]]}).json()
    assert even["predicted_ranks"] == [
        {"rank": 1, "probability": pytest.approx(0.5)},
        {"rank": 1, "probability": pytest.approx(0.5)},
    ]


def test_even_match_of_new_players(client: TestClient) -> None:
    create_ladder(client)
    got = client.post("/v1/ladders/test/quality", json={"teams": [["x"], ["y"]]}).json()
    assert got["win_probabilities"] == pytest.approx([0.5, 0.5])
    beta, sigma = 25 / 6, 25 / 3
    assert got["quality"] == pytest.approx((2 * beta**2 / (2 * beta**2 + 2 * sigma**2)) ** 0.5)


def test_quality_rejects_a_player_twice(client: TestClient) -> None:
    create_ladder(client)
    response = client.post("/v1/ladders/test/quality", json={"teams": [["x"], ["x"]]})
    assert_problem(response, 422, "teams")
