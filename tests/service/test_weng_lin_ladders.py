"""The Bradley-Terry and Thurstone-Mosteller ladders: recorded singly and in batches they
give the core's numbers; a void and a rebuild equal a fresh ladder of the matches left;
predictions and matchmaking answer from the same model."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.rating import make_model
from app.rating.registry import WENG_LIN_MODELS
from tests.service.helpers import create_ladder, post_match
from tests.service.oracle import core_replay, random_matches
from tests.service.test_void import _batch, _state


@pytest.mark.parametrize("algorithm", WENG_LIN_MODELS)
def test_recording_gives_the_cores_numbers(client: TestClient, algorithm: str) -> None:
    created = create_ladder(client, "l", algorithm=algorithm)
    assert created["algorithm"] == algorithm
    bodies = random_matches(seed=31, count=40)
    for body in bodies[:8]:
        post_match(client, "l", body)
    _batch(client, "l", bodies[8:])
    expected = core_replay(algorithm, {}, bodies)
    entries = client.get("/v1/ladders/l/leaderboard", params={"limit": 100}).json()["entries"]
    assert len(entries) == len(expected.ratings)
    for entry in entries:
        rating = expected.ratings[entry["player_id"]]
        assert (entry["mu"], entry["sigma"]) == pytest.approx((rating.mu, rating.sigma), rel=1e-12)
        assert entry["conservative"] == pytest.approx(rating.mu - 3 * rating.sigma, rel=1e-12)


@pytest.mark.parametrize("algorithm", WENG_LIN_MODELS)
def test_void_and_rebuild_equal_a_fresh_ladder(client: TestClient, algorithm: str) -> None:
    bodies = random_matches(seed=32, count=30)
    create_ladder(client, "l", algorithm=algorithm)
    _batch(client, "l", bodies)
    assert client.delete(f"/v1/ladders/l/matches/{bodies[4]['match_id']}").status_code == 200
    params = {"beta": 3.0, "tau": 0.2}
    response = client.patch("/v1/ladders/l?rebuild=true", json={"params": params})
    assert response.status_code == 200, response.text
    create_ladder(client, "fresh", algorithm=algorithm, params=params)
    _batch(client, "fresh", [b for n, b in enumerate(bodies) if n != 4])
    assert _state(client, "l") == _state(client, "fresh")


@pytest.mark.parametrize("algorithm", WENG_LIN_MODELS)
def test_predictions_and_matchmaking_come_from_the_model(
    client: TestClient, algorithm: str
) -> None:
    create_ladder(client, "l", algorithm=algorithm)
    bodies = random_matches(seed=33, count=20)
    _batch(client, "l", bodies)
    board = {
        e["player_id"]: (e["mu"], e["sigma"])
        for e in client.get("/v1/ladders/l/leaderboard", params={"limit": 100}).json()["entries"]
    }
    players = sorted(board)[:4]
    teams = [players[:2], players[2:]]
    answer = client.post("/v1/ladders/l/quality", json={"teams": teams}).json()
    model = make_model(algorithm, {})
    rated = [[model.rating(*board[p]) for p in team] for team in teams]
    assert answer["quality"] == pytest.approx(model.quality(rated), rel=1e-12)
    assert answer["win_probabilities"] == pytest.approx(model.win_probabilities(rated), rel=1e-12)
    assert answer["draw_probability"] == pytest.approx(model.draw_probability(rated), rel=1e-12)
    assert [r["rank"] for r in answer["predicted_ranks"]] in ([1, 2], [2, 1], [1, 1])
    split = client.post("/v1/ladders/l/matchmaking", json={"players": players, "teams": 2})
    assert split.status_code == 200, split.text
    chosen = split.json()
    assert sorted(p for team in chosen["teams"] for p in team) == players
    best = max(
        model.quality([[model.rating(*board[p]) for p in team] for team in (pair, rest)])
        for pair in ([players[0], other] for other in players[1:])
        for rest in [[p for p in players if p not in pair]]
    )
    assert chosen["quality"] == pytest.approx(best, rel=1e-9)
